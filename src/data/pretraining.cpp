// BERT pre-training data (see include/attn/data/pretraining.h).
#include "attn/data/pretraining.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "attn/core/error.h"
#include "attn/core/parallel.h"
#include "attn/data/sword.h"
#include "attn/data/wordnet.h"

namespace attn::data {

namespace {

uint64_t pt_splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t pt_mix3(uint64_t a, uint64_t b, uint64_t c) { return pt_splitmix(pt_splitmix(pt_splitmix(a) ^ b) ^ c); }

// Python's random.randint(a, b): uniform in [a, b].
int64_t pt_randint(Generator& g, int64_t a, int64_t b) { return a + g.randint(b - a + 1); }

template <class T>
void pt_shuffle(std::vector<T>& v, Generator& g) {
  for (int64_t i = int64_t(v.size()) - 1; i > 0; --i) std::swap(v[size_t(i)], v[size_t(g.randint(i + 1))]);
}

std::string pt_lemma_text(const std::string& lemma) {
  std::string s = lemma;
  std::replace(s.begin(), s.end(), '_', ' ');
  return s;
}

void pt_append(std::vector<TextDocument>& to, std::vector<TextDocument> from) {
  for (auto& d : from) to.push_back(std::move(d));
}

}  // namespace

std::vector<std::string> pretraining_data_names() { return {"bible", "wordnet", "bible+wordnet"}; }

std::vector<TextDocument> bible_documents(const std::string& sword_dir) {
  std::vector<TextDocument> docs(static_cast<size_t>(kjv_num_books()));
  for (int b = 0; b < kjv_num_books(); ++b) docs[size_t(b)].name = std::string("bible:") + kjv_book_name(b);
  SwordModule kjv = [&] {
    try {
      return SwordModule::open(sword_dir, "engKJV2006eb");
    } catch (const Error& e) {
      fail("pretraining data 'bible': expected the KJV SWORD module engKJV2006eb under '", sword_dir,
           "' (Debian package sword-text-kjv): ", e.what());
    }
  }();
  kjv.for_each_verse([&](const Verse& v) {
    std::string s = strip_osis(v.osis);
    if (!s.empty()) docs[size_t(v.ref.book)].sentences.push_back(std::move(s));
  });
  std::erase_if(docs, [](const TextDocument& d) { return d.sentences.empty(); });
  ATTN_CHECK(!docs.empty(), "pretraining data 'bible': expected the verses of the KJV in '", sword_dir,
             "', found none (an empty module)");
  return docs;
}

std::vector<TextDocument> wordnet_documents(const std::string& wordnet_dir) {
  const std::string dir = wordnet_dir.empty() ? default_wordnet_dir() : wordnet_dir;
  const WordNet& wn = [&]() -> const WordNet& {
    try {
      return WordNet::shared(dir);
    } catch (const Error& e) {
      fail("pretraining data 'wordnet': expected WordNet 3.0's data files in '", dir,
           "' (Debian package wordnet-base): ", e.what());
    }
  }();
  std::vector<TextDocument> docs;
  int last_file = -1;
  int64_t in_doc = 0, part = 0;
  for (const Synset& s : wn.synsets()) {
    if (s.lexfile != last_file || in_doc == kWordNetSynsetsPerDocument) {
      part = s.lexfile != last_file ? 0 : part + 1;
      docs.push_back({std::string("wordnet:") + wordnet_lexname(s.lexfile) + "#" + std::to_string(part), {}});
      last_file = s.lexfile;
      in_doc = 0;
    }
    ++in_doc;
    std::string gloss;
    for (const std::string& l : s.lemmas) gloss += (gloss.empty() ? "" : ", ") + pt_lemma_text(l);
    gloss += ": " + s.definition;
    docs.back().sentences.push_back(std::move(gloss));
    for (const std::string& e : s.examples) docs.back().sentences.push_back(e);
  }
  ATTN_CHECK(!docs.empty(), "pretraining data 'wordnet': expected synsets in '", dir, "', found none");
  return docs;
}

std::vector<TextDocument> load_pretraining_documents(const std::string& data, const PretrainingSources& s) {
  std::vector<TextDocument> docs;
  if (data == "bible" || data == "bible+wordnet") pt_append(docs, bible_documents(s.sword_dir));
  if (data == "wordnet" || data == "bible+wordnet") pt_append(docs, wordnet_documents(s.wordnet_dir));
  ATTN_CHECK(data == "bible" || data == "wordnet" || data == "bible+wordnet",
             "pretraining data: expected bible, wordnet or bible+wordnet, got '", data, "'");
  return docs;
}

std::vector<TokenDocument> tokenize_documents(const std::vector<TextDocument>& docs, const text::BertTokenizer& tok,
                                              const std::string& what) {
  // One flat list of sentences, so long books and short glosses spread over the threads alike.
  std::vector<std::pair<size_t, size_t>> at;
  for (size_t d = 0; d < docs.size(); ++d)
    for (size_t s = 0; s < docs[d].sentences.size(); ++s) at.emplace_back(d, s);
  std::vector<std::vector<int32_t>> ids(at.size());
  parallel_for(0, int64_t(at.size()), 256, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const auto [d, s] = at[size_t(i)];
      for (const text::BertToken& t : tok.tokenize(docs[d].sentences[s])) ids[size_t(i)].push_back(int32_t(t.id));
    }
  });
  std::vector<TokenDocument> out(docs.size());
  for (size_t i = 0; i < at.size(); ++i)
    if (!ids[i].empty()) out[at[i].first].sentences.push_back(std::move(ids[i]));
  for (size_t d = 0; d < docs.size(); ++d) out[d].name = docs[d].name;
  std::erase_if(out, [](const TokenDocument& d) { return d.sentences.empty(); });
  ATTN_CHECK(!out.empty(), "pretraining ", what, ": expected documents with text, found ", docs.size(),
             " documents and no sentence with a token");
  return out;
}

DocumentSplit split_documents(int64_t n, double validation_fraction, uint64_t seed) {
  ATTN_CHECK(validation_fraction >= 0 && validation_fraction < 1,
             "split_documents: expected a validation fraction in [0, 1), got ", validation_fraction);
  int64_t nv = int64_t(std::llround(double(n) * validation_fraction));
  if (n >= 2 && validation_fraction > 0) nv = std::clamp<int64_t>(nv, 1, n - 1);
  Generator g(seed ^ 0x73706c6974ull);
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), int64_t(0));
  for (int64_t i = n - 1; i > 0; --i) std::swap(perm[size_t(i)], perm[size_t(g.randint(i + 1))]);
  DocumentSplit s;
  s.validation.assign(perm.begin(), perm.begin() + nv);
  s.train.assign(perm.begin() + nv, perm.end());
  std::sort(s.validation.begin(), s.validation.end());
  std::sort(s.train.begin(), s.train.end());
  return s;
}

std::vector<TokenDocument> select_documents(const std::vector<TokenDocument>& docs, const std::vector<int64_t>& which) {
  std::vector<TokenDocument> out;
  out.reserve(which.size());
  for (int64_t i : which) out.push_back(docs.at(size_t(i)));
  return out;
}

SpecialIds special_ids(const text::BertTokenizer& tok) {
  return {int32_t(tok.cls_id()), int32_t(tok.sep_id()), int32_t(tok.mask_id())};
}

uint64_t instance_seed(uint64_t seed, int64_t pass, int64_t document) {
  return pt_mix3(seed ^ 0x696e7374ull, uint64_t(pass), uint64_t(document));
}

uint64_t mask_seed(uint64_t seed, int64_t epoch, int64_t instance) {
  return pt_mix3(seed ^ 0x6d61736bull, uint64_t(epoch), uint64_t(instance));
}

void truncate_seq_pair(std::vector<int32_t>& a, std::vector<int32_t>& b, int64_t max_num_tokens, Generator& g) {
  while (int64_t(a.size() + b.size()) > max_num_tokens) {
    std::vector<int32_t>& t = a.size() > b.size() ? a : b;
    ATTN_CHECK(!t.empty(), "truncate_seq_pair: expected max_num_tokens >= 0, got ", max_num_tokens);
    if (g.uniform() < 0.5) t.erase(t.begin());
    else t.pop_back();
  }
}

namespace {

// Segment B from a document other than `index` (Google's "random next"): sentences from a uniform
// start until B holds target_b tokens.
std::vector<int32_t> pt_random_next(const std::vector<TokenDocument>& docs, int64_t index, int64_t target_b,
                                 Generator& g) {
  int64_t r = 0;
  for (int k = 0; k < 10; ++k) {
    r = pt_randint(g, 0, int64_t(docs.size()) - 1);
    if (r != index) break;
  }
  const auto& rd = docs[size_t(r)].sentences;
  std::vector<int32_t> b;
  for (size_t j = size_t(pt_randint(g, 0, int64_t(rd.size()) - 1)); j < rd.size(); ++j) {
    b.insert(b.end(), rd[j].begin(), rd[j].end());
    if (int64_t(b.size()) >= target_b) break;
  }
  return b;
}

PretrainingInstance pt_join(const std::vector<int32_t>& a, const std::vector<int32_t>& b, bool random, const SpecialIds& ids) {
  PretrainingInstance in;
  in.tokens.reserve(a.size() + b.size() + 3);
  in.tokens.push_back(ids.cls);
  in.tokens.insert(in.tokens.end(), a.begin(), a.end());
  in.tokens.push_back(ids.sep);
  in.a_end = int32_t(in.tokens.size());
  in.tokens.insert(in.tokens.end(), b.begin(), b.end());
  in.tokens.push_back(ids.sep);
  in.is_random_next = random;
  return in;
}

}  // namespace

std::vector<PretrainingInstance> instances_from_document(const std::vector<TokenDocument>& docs, int64_t index,
                                                         const InstanceOptions& o, const SpecialIds& ids, Generator& g) {
  const auto& doc = docs[size_t(index)].sentences;
  const int64_t max_num_tokens = o.max_seq_length - 3;
  int64_t target = max_num_tokens;
  if (g.uniform() < o.short_seq_prob) target = pt_randint(g, 2, max_num_tokens);
  std::vector<PretrainingInstance> out;
  std::vector<const std::vector<int32_t>*> chunk;
  int64_t length = 0;
  for (int64_t i = 0; i < int64_t(doc.size()); ++i) {
    chunk.push_back(&doc[size_t(i)]);
    length += int64_t(doc[size_t(i)].size());
    if (i != int64_t(doc.size()) - 1 && length < target) continue;
    const int64_t n = int64_t(chunk.size());
    const int64_t a_end = n >= 2 ? pt_randint(g, 1, n - 1) : 1;
    std::vector<int32_t> a, b;
    for (int64_t j = 0; j < a_end; ++j) a.insert(a.end(), chunk[size_t(j)]->begin(), chunk[size_t(j)]->end());
    bool random = false;
    if (n == 1 || g.uniform() < 0.5) {
      random = true;
      b = pt_random_next(docs, index, target - int64_t(a.size()), g);
      i -= n - a_end;   // the unused sentences go back
    } else {
      for (int64_t j = a_end; j < n; ++j) b.insert(b.end(), chunk[size_t(j)]->begin(), chunk[size_t(j)]->end());
    }
    truncate_seq_pair(a, b, max_num_tokens, g);
    out.push_back(pt_join(a, b, random, ids));
    chunk.clear();
    length = 0;
  }
  return out;
}

std::vector<PretrainingInstance> create_instances(const std::vector<TokenDocument>& docs, const InstanceOptions& o,
                                                  const SpecialIds& ids, uint64_t seed) {
  ATTN_CHECK(o.max_seq_length >= 5, "pretraining: expected max_seq_length >= 5, got ", o.max_seq_length);
  ATTN_CHECK(o.short_seq_prob >= 0 && o.short_seq_prob <= 1, "pretraining: expected short_seq_prob in [0, 1], got ",
             o.short_seq_prob);
  ATTN_CHECK(o.dupe_factor >= 1, "pretraining: expected dupe_factor >= 1, got ", o.dupe_factor);
  ATTN_CHECK(!docs.empty(), "pretraining: expected at least one document, got none");
  const int64_t nd = int64_t(docs.size());
  std::vector<std::vector<PretrainingInstance>> per(static_cast<size_t>(o.dupe_factor * nd));
  parallel_for(0, int64_t(per.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      Generator g(instance_seed(seed, k / nd, k % nd));
      per[size_t(k)] = instances_from_document(docs, k % nd, o, ids, g);
    }
  });
  std::vector<PretrainingInstance> out;
  for (auto& v : per)
    for (auto& in : v) out.push_back(std::move(in));
  return out;
}

MaskVocab mask_vocab(const text::BertTokenizer& tok) {
  MaskVocab v;
  v.ids = special_ids(tok);
  v.vocab_size = tok.vocab_size();
  v.continuation.resize(size_t(v.vocab_size));
  for (int64_t i = 0; i < v.vocab_size; ++i) v.continuation[size_t(i)] = tok.id_to_token(i).starts_with("##");
  return v;
}

int64_t num_to_predict(int64_t num_tokens, const MaskingOptions& o) {
  // Python 3's round() rounds halves to even, as nearbyint does in the default rounding mode.
  const auto r = int64_t(std::nearbyint(double(num_tokens) * o.masked_lm_prob));
  return std::min(o.max_predictions_per_seq, std::max<int64_t>(1, r));
}

MaskedTokens mask_tokens(const std::vector<int32_t>& tokens, const MaskVocab& v, const MaskingOptions& o, Generator& g) {
  ATTN_CHECK(o.masked_lm_prob >= 0 && o.masked_lm_prob <= 1, "mask_tokens: expected masked_lm_prob in [0, 1], got ",
             o.masked_lm_prob);
  ATTN_CHECK(o.max_predictions_per_seq >= 0, "mask_tokens: expected max_predictions_per_seq >= 0, got ",
             o.max_predictions_per_seq);
  std::vector<std::vector<int32_t>> cand;
  for (int32_t i = 0; i < int32_t(tokens.size()); ++i) {
    const int32_t t = tokens[size_t(i)];
    if (t == v.ids.cls || t == v.ids.sep) continue;
    const bool piece = t >= 0 && t < int32_t(v.continuation.size()) && v.continuation[size_t(t)];
    if (o.whole_word && !cand.empty() && piece) cand.back().push_back(i);
    else cand.push_back({i});
  }
  pt_shuffle(cand, g);
  MaskedTokens m;
  m.input_ids.assign(tokens.begin(), tokens.end());
  const int64_t want = num_to_predict(int64_t(tokens.size()), o);
  // Candidates never overlap here (each position is in one), so Google's covered-index check is moot.
  for (const auto& word : cand) {
    if (int64_t(m.positions.size()) >= want) break;
    if (int64_t(m.positions.size() + word.size()) > want) continue;
    for (int32_t i : word) {
      int64_t id;
      if (g.uniform() < 0.8) id = v.ids.mask;
      else if (g.uniform() < 0.5) id = tokens[size_t(i)];
      else id = g.randint(v.vocab_size);
      m.input_ids[size_t(i)] = id;
      m.positions.push_back(i);
    }
  }
  std::sort(m.positions.begin(), m.positions.end());
  for (int64_t p : m.positions) m.labels.push_back(tokens[size_t(p)]);
  return m;
}

PretrainingBatch make_pretraining_batch(const std::vector<PretrainingInstance>& instances,
                                        const std::vector<int64_t>& which, const MaskVocab& v,
                                        const MaskingOptions& o, uint64_t seed, int64_t epoch) {
  const auto n = int64_t(which.size());
  std::vector<BertSequence> seqs(static_cast<size_t>(n));
  std::vector<MaskedTokens> masks(static_cast<size_t>(n));
  std::vector<int64_t> nsp(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; ++b) {
    const PretrainingInstance& in = instances.at(size_t(which[size_t(b)]));
    Generator g(mask_seed(seed, epoch, which[size_t(b)]));
    masks[size_t(b)] = mask_tokens(in.tokens, v, o, g);
    seqs[size_t(b)].ids = masks[size_t(b)].input_ids;
    seqs[size_t(b)].token_type_ids.assign(in.tokens.size(), 1);
    std::fill_n(seqs[size_t(b)].token_type_ids.begin(), in.a_end, 0);
    nsp[size_t(b)] = in.is_random_next ? 1 : 0;
  }
  PretrainingBatch out;
  out.inputs = make_bert_batch(seqs);
  const int64_t T = out.inputs.input_ids.size(1);
  std::vector<int64_t> rows, labels;
  for (int64_t b = 0; b < n; ++b)
    for (size_t k = 0; k < masks[size_t(b)].positions.size(); ++k) {
      rows.push_back(b * T + masks[size_t(b)].positions[k]);
      labels.push_back(masks[size_t(b)].labels[k]);
    }
  out.num_masked = int64_t(rows.size());
  out.mlm_rows = Tensor::from_vector(rows, {out.num_masked});
  out.mlm_labels = Tensor::from_vector(labels, {out.num_masked});
  out.nsp_labels = Tensor::from_vector(nsp, {n});
  return out;
}

}  // namespace attn::data

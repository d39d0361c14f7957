// Fine-tuning datasets from WordNet (see include/attn/data/wordnet_tasks.h).
#include "attn/data/wordnet_tasks.h"

#include <algorithm>
#include <cctype>

#include "attn/core/error.h"
#include "attn/data/text_classification.h"

namespace attn::data {

namespace {


std::string wn_task_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string lemma_spaced(const std::string& lemma) {
  std::string s = lemma;
  std::replace(s.begin(), s.end(), '_', ' ');
  return s;
}

// The synsets of each split, in split order.
struct SplitSynsets {
  std::vector<const Synset*> part[3];   // train, validation, test
};

SplitSynsets split_synsets(const WordNet& wn, uint64_t seed) {
  const auto& all = wn.synsets();
  ATTN_CHECK(all.size() >= 10, "wordnet tasks: expected WordNet's synsets (at least 10), found ", all.size());
  const std::vector<int64_t> order = seeded_permutation(int64_t(all.size()), seed ^ 0x5EEDF00DULL);
  const size_t n = order.size(), a = n * 8 / 10, b = n * 9 / 10;
  SplitSynsets s;
  for (size_t i = 0; i < n; ++i) s.part[i < a ? 0 : i < b ? 1 : 2].push_back(&all[size_t(order[i])]);
  return s;
}

WordNetPos morphy_pos(const Synset& s) { return s.pos; }

// Whether words[at..] starts with the lemma's words (exact, case-insensitive, or by a morphy base form).
bool matches_at(const WordNet& wn, WordNetPos pos, const std::vector<std::string>& words, size_t at,
                const std::vector<std::string>& lemma_words) {
  if (at + lemma_words.size() > words.size()) return false;
  for (size_t k = 0; k < lemma_words.size(); ++k) {
    const std::string w = wn_task_lower(words[at + k]);
    if (w == lemma_words[k]) continue;
    const std::vector<std::string> bases = wn.morphy(w, pos);
    if (std::find(bases.begin(), bases.end(), lemma_words[k]) == bases.end()) return false;
  }
  return true;
}

}  // namespace

WordNetTask wordnet_task_data_kind(const std::string& name) {
  if (name == "wordnet-lexname") return WordNetTask::lexname;
  if (name == "wordnet-pairs") return WordNetTask::pairs;
  if (name == "wordnet-supersense") return WordNetTask::supersense;
  fail("wordnet tasks: expected data wordnet-lexname | wordnet-pairs | wordnet-supersense, got '", name, "'");
}

const char* wordnet_task_data_name(WordNetTask t) {
  switch (t) {
    case WordNetTask::lexname: return "wordnet-lexname";
    case WordNetTask::pairs: return "wordnet-pairs";
    case WordNetTask::supersense: return "wordnet-supersense";
  }
  return "?";
}

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) out.push_back(std::move(cur));
    cur.clear();
  };
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isspace(u)) {
      flush();
    } else if (u < 128 && std::ispunct(u)) {
      flush();
      out.emplace_back(1, c);
    } else {
      cur += c;
    }
  }
  flush();
  return out;
}

std::vector<std::string> supersense_labels() {
  std::vector<std::string> l = {"O"};
  for (int k = 0; k < kWordNetLexfiles; ++k) {
    l.push_back(std::string("B-") + wordnet_lexname(k));
    l.push_back(std::string("I-") + wordnet_lexname(k));
  }
  return l;
}

std::vector<int64_t> supersense_tags(const WordNet& wn, const Synset& synset, const std::vector<std::string>& words) {
  std::vector<std::vector<std::string>> lemmas;
  for (const std::string& l : synset.lemmas) {
    std::vector<std::string> w = split_words(wn_task_lower(lemma_spaced(l)));
    if (!w.empty()) lemmas.push_back(std::move(w));
  }
  // Longest first (ties: WordNet's order), so "hot dog" wins over "hot" at the same position.
  std::stable_sort(lemmas.begin(), lemmas.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  std::vector<int64_t> tags(words.size(), 0);
  const WordNetPos pos = morphy_pos(synset);
  const int64_t b_tag = 1 + 2 * int64_t(synset.lexfile), i_tag = b_tag + 1;
  for (size_t at = 0; at < words.size();) {
    size_t len = 0;
    for (const auto& l : lemmas)
      if (matches_at(wn, pos, words, at, l)) {
        len = l.size();
        break;
      }
    if (len == 0) {
      ++at;
      continue;
    }
    tags[at] = b_tag;
    for (size_t k = 1; k < len; ++k) tags[at + k] = i_tag;
    at += len;
  }
  return tags;
}

TextClassificationData wordnet_lexname_data(const WordNet& wn, uint64_t seed) {
  TextClassificationData d;
  d.name = "wordnet-lexname";
  for (int k = 0; k < kWordNetLexfiles; ++k) d.labels.push_back(wordnet_lexname(k));
  const SplitSynsets s = split_synsets(wn, seed);
  std::vector<TextExample>* out[3] = {&d.train, &d.validation, &d.test};
  for (int p = 0; p < 3; ++p)
    for (const Synset* syn : s.part[p]) out[p]->push_back({syn->definition, "", syn->lexfile});
  return d;
}

TextClassificationData wordnet_pairs_data(const WordNet& wn, uint64_t seed) {
  TextClassificationData d;
  d.name = "wordnet-pairs";
  d.labels = {"no", "yes"};
  d.pairs = true;
  const SplitSynsets s = split_synsets(wn, seed);
  std::vector<TextExample>* out[3] = {&d.train, &d.validation, &d.test};
  uint64_t rng = seed ^ 0x9A125ULL;
  for (int p = 0; p < 3; ++p) {
    const auto& part = s.part[p];
    for (size_t i = 0; i < part.size(); ++i) {
      const Synset& syn = *part[i];
      const bool positive = i % 2 == 0;
      std::string lemma;
      if (positive) {
        lemma = syn.lemmas[size_t(seeded_draw(rng, int64_t(syn.lemmas.size())))];
      } else {
        std::vector<std::string> own;
        for (const auto& l : syn.lemmas) own.push_back(wn_task_lower(l));
        // Another synset's lemma, not one of this synset's (a few draws always find one in practice).
        for (int tries = 0; tries < 1000 && lemma.empty(); ++tries) {
          const Synset& other = *part[size_t(seeded_draw(rng, int64_t(part.size())))];
          const std::string& cand = other.lemmas[size_t(seeded_draw(rng, int64_t(other.lemmas.size())))];
          if (&other != &syn && std::find(own.begin(), own.end(), wn_task_lower(cand)) == own.end()) lemma = cand;
        }
        ATTN_CHECK(!lemma.empty(), "wordnet-pairs: found no negative lemma for synset ", syn.offset);
      }
      out[p]->push_back({syn.definition, lemma_spaced(lemma), positive ? 1 : 0});
    }
  }
  return d;
}

TaggingData wordnet_supersense_data(const WordNet& wn, uint64_t seed) {
  TaggingData d;
  d.name = "wordnet-supersense";
  d.labels = supersense_labels();
  const SplitSynsets s = split_synsets(wn, seed);
  std::vector<TaggedSentence>* out[3] = {&d.train, &d.validation, &d.test};
  for (int p = 0; p < 3; ++p)
    for (const Synset* syn : s.part[p])
      for (const std::string& ex : syn->examples) {
        ++d.sentences;
        TaggedSentence t;
        t.words = split_words(ex);
        t.tags = supersense_tags(wn, *syn, t.words);
        if (std::all_of(t.tags.begin(), t.tags.end(), [](int64_t x) { return x == 0; })) {
          ++d.dropped;
          continue;
        }
        out[p]->push_back(std::move(t));
      }
  return d;
}

}  // namespace attn::data

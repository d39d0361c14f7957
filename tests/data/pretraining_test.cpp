// BERT pre-training data (data/pretraining.h, data/bert_batch.h): the masking rule's statistics on a
// large sample (Google's count, 80/10/10 within 5 sigma, uniform positions, never [CLS]/[SEP], the
// cap, whole words), instances (NSP about 50% within 5 sigma, the random-next segment from another
// document and the is-next one its continuation, lengths <= max_seq_length, truncation), the corpus
// (KJV books, WordNet documents, the seeded document split), determinism per seed, padding, and bad
// input. The real-text tests need the KJV and WordNet packages and bert-base-uncased's vocab.txt.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <filesystem>
#include <set>

#include "attn/core/error.h"
#include "attn/data/pretraining.h"
#include "bert_vocab.h"
#include "errors.h"
#include "files.h"

using namespace attn;
using namespace attn::data;
using test::error_of;

namespace {

constexpr int32_t kCls = 101, kSep = 102, kMask = 103;
constexpr int64_t kVocab = 30522;

// |count - n p| <= 5 sigma of a binomial (n, p).
::testing::AssertionResult within_5_sigma(double count, double n, double p, const std::string& what) {
  const double sigma = std::sqrt(n * p * (1 - p)), d = std::abs(count - n * p);
  if (d <= 5 * sigma) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << count << " of " << n << ", expected " << n * p << " +- "
                                       << 5 * sigma;
}

// [CLS] a.. [SEP] b.. [SEP] of `len` tokens, the body drawn from [1000, 30000).
PretrainingInstance synthetic_instance(int32_t len, Generator& g) {
  PretrainingInstance in;
  in.tokens.push_back(kCls);
  for (int32_t t = 1; t < len - 1; ++t) in.tokens.push_back(t == len / 2 ? kSep : int32_t(1000 + g.randint(29000)));
  in.tokens.push_back(kSep);
  in.a_end = len / 2 + 1;
  return in;
}

MaskVocab plain_vocab() { return {.ids = {kCls, kSep, kMask}, .vocab_size = kVocab, .continuation = {}}; }

}  // namespace

TEST(PretrainingMasking, CountFollowsGoogleAndOutcomesAre80_10_10) {
  const MaskVocab v = plain_vocab();
  const MaskingOptions o;
  Generator draw(1);
  double masked = 0, as_mask = 0, kept = 0, random = 0, random_sum = 0, non_special = 0;
  std::vector<double> at_position(128, 0.0);
  for (int i = 0; i < 20000; ++i) {
    const int32_t len = i % 2 ? 128 : int32_t(5 + draw.randint(124));
    const PretrainingInstance in = synthetic_instance(len, draw);
    Generator g(mask_seed(3, 0, i));
    const MaskedTokens m = mask_tokens(in.tokens, v, o, g);
    ASSERT_EQ(int64_t(m.positions.size()), num_to_predict(len, o)) << len;
    ASSERT_LE(m.positions.size(), 20u);
    ASSERT_EQ(m.labels.size(), m.positions.size());
    non_special += len - 3;
    for (size_t k = 0; k < m.positions.size(); ++k) {
      const int64_t p = m.positions[k];
      if (k) ASSERT_LT(m.positions[k - 1], p);
      ASSERT_NE(in.tokens[size_t(p)], kCls);
      ASSERT_NE(in.tokens[size_t(p)], kSep);
      ASSERT_EQ(m.labels[k], in.tokens[size_t(p)]);
      const int64_t now = m.input_ids[size_t(p)];
      as_mask += now == kMask;
      kept += now == in.tokens[size_t(p)];
      if (now != kMask && now != in.tokens[size_t(p)]) {
        ++random;
        random_sum += double(now);
      }
      if (len == 128) ++at_position[size_t(p)];
    }
    for (size_t t = 0; t < in.tokens.size(); ++t)
      if (!std::binary_search(m.positions.begin(), m.positions.end(), int64_t(t)))
        ASSERT_EQ(m.input_ids[t], in.tokens[t]);
    masked += double(m.positions.size());
  }
  std::printf("masked %.0f of %.0f non-special tokens (%.2f%%): [MASK] %.0f, kept %.0f, random %.0f\n", masked,
              non_special, 100 * masked / non_special, as_mask, kept, random);
  EXPECT_NEAR(masked / non_special, 0.15, 0.01);
  EXPECT_TRUE(within_5_sigma(as_mask, masked, 0.8, "[MASK]"));
  EXPECT_TRUE(within_5_sigma(kept, masked, 0.1, "unchanged"));
  EXPECT_TRUE(within_5_sigma(random, masked, 0.1, "random"));
  // Random tokens come from the whole vocabulary: their mean is V / 2 within 5 standard errors.
  const double sd = kVocab / std::sqrt(12.0);
  EXPECT_NEAR(random_sum / random, (kVocab - 1) / 2.0, 5 * sd / std::sqrt(random));
  // Every non-special position of the 128-token instances is as likely (19 of 125 each).
  for (int32_t p = 1; p < 127; ++p) {
    if (p == 64) {
      EXPECT_EQ(at_position[size_t(p)], 0);   // the middle [SEP]
      continue;
    }
    EXPECT_TRUE(within_5_sigma(at_position[size_t(p)], 10000, 19.0 / 125, "position " + std::to_string(p)));
  }
}

TEST(PretrainingMasking, CapAndRoundingAsPython) {
  MaskingOptions o;
  EXPECT_EQ(num_to_predict(10, o), 2);    // round(1.5) = 2 (half to even)
  EXPECT_EQ(num_to_predict(30, o), 4);    // round(4.5) = 4
  EXPECT_EQ(num_to_predict(3, o), 1);     // at least 1
  EXPECT_EQ(num_to_predict(128, o), 19);
  EXPECT_EQ(num_to_predict(512, o), 20);  // max_predictions_per_seq
  o.max_predictions_per_seq = 5;
  Generator draw(2);
  const PretrainingInstance in = synthetic_instance(128, draw);
  Generator g(9);
  EXPECT_EQ(mask_tokens(in.tokens, plain_vocab(), o, g).positions.size(), 5u);
}

TEST(PretrainingMasking, WholeWordMaskingMasksWholeWords) {
  // Words of 1 to 4 pieces: a head id, then "##" continuation ids (marked in the vocabulary).
  MaskVocab v = plain_vocab();
  v.continuation.assign(size_t(kVocab), 0);
  for (int32_t id = 20000; id < 30000; ++id) v.continuation[size_t(id)] = 1;
  const MaskingOptions o{.whole_word = true};
  Generator draw(5);
  int64_t words_masked = 0, predicted = 0, wanted = 0;
  for (int i = 0; i < 5000; ++i) {
    std::vector<int32_t> tokens = {kCls};
    std::vector<int64_t> word_of = {-1};
    int64_t words = 0;
    while (tokens.size() < 120) {
      const int64_t pieces = 1 + draw.randint(4);
      for (int64_t k = 0; k < pieces; ++k) {
        tokens.push_back(int32_t(k == 0 ? 1000 + draw.randint(19000) : 20000 + draw.randint(10000)));
        word_of.push_back(words);
      }
      ++words;
    }
    tokens.push_back(kSep);
    word_of.push_back(-1);
    Generator g(mask_seed(8, -1, i));
    const MaskedTokens m = mask_tokens(tokens, v, o, g);
    const std::set<int64_t> at(m.positions.begin(), m.positions.end());
    std::set<int64_t> words_hit;
    for (int64_t p : m.positions) words_hit.insert(word_of[size_t(p)]);
    for (size_t t = 0; t < tokens.size(); ++t)
      if (word_of[t] >= 0) ASSERT_EQ(at.count(int64_t(t)), words_hit.count(word_of[t])) << "piece " << t;
    ASSERT_LE(int64_t(m.positions.size()), num_to_predict(int64_t(tokens.size()), o));
    words_masked += int64_t(words_hit.size());
    predicted += int64_t(m.positions.size());
    wanted += num_to_predict(int64_t(tokens.size()), o);
  }
  std::printf("whole words: %lld words, %lld of %lld wanted predictions\n", (long long)words_masked,
              (long long)predicted, (long long)wanted);
  EXPECT_GT(double(predicted), 0.9 * double(wanted));
}

TEST(PretrainingMasking, DeterministicPerSeed) {
  Generator draw(3);
  const PretrainingInstance in = synthetic_instance(100, draw);
  Generator a(mask_seed(1, 2, 3)), b(mask_seed(1, 2, 3)), c(mask_seed(1, 3, 3));
  const MaskedTokens x = mask_tokens(in.tokens, plain_vocab(), {}, a), y = mask_tokens(in.tokens, plain_vocab(), {}, b),
                     z = mask_tokens(in.tokens, plain_vocab(), {}, c);
  EXPECT_EQ(x.input_ids, y.input_ids);
  EXPECT_EQ(x.positions, y.positions);
  EXPECT_NE(x.positions, z.positions);   // another epoch (dynamic masking): other masks
  EXPECT_NE(mask_seed(1, -1, 3), mask_seed(1, 0, 3));
}

namespace {

// `ndocs` documents of `nsent` sentences of 4 to 12 tokens; token = doc * 100000 + sentence * 100 + k, so a
// token says where it came from.
std::vector<TokenDocument> tagged_documents(int ndocs = 40, int nsent = 60) {
  std::vector<TokenDocument> docs(static_cast<size_t>(ndocs));
  Generator g(11);
  for (int d = 0; d < ndocs; ++d)
    for (int s = 0; s < nsent; ++s) {
      std::vector<int32_t> sent;
      const int64_t len = 4 + g.randint(9);
      for (int64_t k = 0; k < len; ++k) sent.push_back(int32_t(d * 100000 + s * 100 + k + 1000));
      docs[size_t(d)].sentences.push_back(sent);
    }
  return docs;
}

int32_t doc_of(int32_t t) { return (t - 1000) / 100000; }

}  // namespace

TEST(PretrainingInstances, NextSentenceAboutHalfAndSegmentsRight) {
  const std::vector<TokenDocument> docs = tagged_documents(40, 800);
  InstanceOptions o;
  o.dupe_factor = 2;
  const std::vector<PretrainingInstance> inst = create_instances(docs, o, {}, 21);
  double random = 0;
  for (const PretrainingInstance& in : inst) {
    ASSERT_LE(in.tokens.size(), 128u);
    ASSERT_EQ(in.tokens.front(), kCls);
    ASSERT_EQ(in.tokens.back(), kSep);
    ASSERT_EQ(in.tokens[size_t(in.a_end - 1)], kSep);
    ASSERT_GE(in.a_end, 3);                              // A has a token
    ASSERT_GE(int64_t(in.tokens.size()) - in.a_end, 2);  // so has B
    const std::vector<int32_t> a(in.tokens.begin() + 1, in.tokens.begin() + in.a_end - 1),
        b(in.tokens.begin() + in.a_end, in.tokens.end() - 1);
    for (size_t k = 1; k < a.size(); ++k) {
      ASSERT_EQ(doc_of(a[k]), doc_of(a[0]));
      ASSERT_LT(a[k - 1], a[k]);   // A is a contiguous run of its document (truncation cuts its ends only)
    }
    for (size_t k = 1; k < b.size(); ++k) ASSERT_LT(b[k - 1], b[k]);
    if (in.is_random_next) {
      ++random;
      ASSERT_NE(doc_of(b[0]), doc_of(a[0]));
    } else {
      ASSERT_EQ(doc_of(b[0]), doc_of(a[0]));
      ASSERT_GT(b[0], a.back());   // B follows A in its document
    }
  }
  std::printf("%zu instances, %.0f random next (%.2f%%)\n", inst.size(), random, 100 * random / double(inst.size()));
  ASSERT_GT(inst.size(), 1000u);
  // The only extra random-next instances are one-sentence chunks (at a document's end: about one in a
  // document's ~50 instances here); 1% allowed for them.
  const double n = double(inst.size()), five_sigma = 5 * std::sqrt(0.25 * n);
  EXPECT_GE(random, 0.5 * n - five_sigma);
  EXPECT_LE(random, 0.5 * n + five_sigma + 0.01 * n);
}

TEST(PretrainingInstances, ShortSequencesAndDeterminism) {
  const std::vector<TokenDocument> docs = tagged_documents(20, 100);
  InstanceOptions o;
  o.max_seq_length = 64;
  o.short_seq_prob = 1.0;   // every document draws its target length in [2, 61]
  const auto x = create_instances(docs, o, {}, 5), y = create_instances(docs, o, {}, 5), z = create_instances(docs, o, {}, 6);
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(x[i].tokens, y[i].tokens);
    ASSERT_EQ(x[i].is_random_next, y[i].is_random_next);
    ASSERT_LE(x[i].tokens.size(), 64u);
  }
  bool differs = x.size() != z.size();
  for (size_t i = 0; !differs && i < x.size(); ++i) differs = x[i].tokens != z[i].tokens;
  EXPECT_TRUE(differs);
}

TEST(PretrainingInstances, TruncateSeqPairCutsTheLongerFromEitherEnd) {
  Generator g(1);
  int front = 0, total = 0;
  for (int i = 0; i < 2000; ++i) {
    std::vector<int32_t> a = {1, 2, 3, 4, 5, 6}, b = {7, 8};
    truncate_seq_pair(a, b, 7, g);
    ASSERT_EQ(a.size(), 5u);
    ASSERT_EQ(b.size(), 2u);
    front += a.front() == 2;
    ++total;
  }
  EXPECT_TRUE(within_5_sigma(front, total, 0.5, "front cuts"));
  std::vector<int32_t> a = {1, 2}, b = {3, 4};
  truncate_seq_pair(a, b, 3, g);   // a tie cuts b
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(b.size(), 1u);
}

TEST(PretrainingBatch, PaddedInputsMaskedRowsAndNspLabels) {
  Generator draw(4);
  std::vector<PretrainingInstance> inst = {synthetic_instance(20, draw), synthetic_instance(9, draw)};
  inst[1].is_random_next = true;
  const PretrainingBatch b = make_pretraining_batch(inst, {1, 0}, plain_vocab(), {}, 3, 0);
  EXPECT_EQ(b.inputs.input_ids.shape(), (Shape{2, 20}));
  EXPECT_EQ(b.nsp_labels.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  const auto mask = b.inputs.attention_mask.to_vector<int64_t>(), types = b.inputs.token_type_ids.to_vector<int64_t>();
  EXPECT_EQ(std::accumulate(mask.begin(), mask.begin() + 20, int64_t(0)), 9);
  EXPECT_EQ(types[4], 0);   // row 0 (9 tokens): A ends at its [SEP] (position 4)
  EXPECT_EQ(types[5], 1);
  EXPECT_EQ(types[9], 0);   // padding
  EXPECT_EQ(b.num_masked, num_to_predict(9, {}) + num_to_predict(20, {}));
  const auto rows = b.mlm_rows.to_vector<int64_t>(), labels = b.mlm_labels.to_vector<int64_t>();
  for (size_t k = 0; k < rows.size(); ++k) {
    const PretrainingInstance& in = inst[rows[k] < 20 ? 1 : 0];
    EXPECT_EQ(labels[k], in.tokens[size_t(rows[k] % 20)]);
  }
}

TEST(BertBatch, PadsToLongestOrMoreAndChecksInput) {
  const std::vector<BertSequence> seqs = {{{101, 7, 102}, {0, 0, 0}}, {{101, 102}, {}}};
  BertBatch b = make_bert_batch(seqs);
  EXPECT_EQ(b.input_ids.to_vector<int64_t>(), (std::vector<int64_t>{101, 7, 102, 101, 102, 0}));
  EXPECT_EQ(b.attention_mask.to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(b.tokens, 5);
  b = make_bert_batch(seqs, {.pad_id = 9, .pad_to = 4, .pad_multiple = 3});
  EXPECT_EQ(b.input_ids.shape(), (Shape{2, 6}));
  EXPECT_EQ(b.input_ids.to_vector<int64_t>()[5], 9);
  EXPECT_EQ(error_of([] { make_bert_batch(std::vector<BertSequence>{}); }),
            "make_bert_batch: expected at least one sequence, got an empty batch");
  EXPECT_EQ(error_of([] { make_bert_batch({{{101, 102}, {0}}}); }),
            "make_bert_batch: sequence 0 has 2 ids but 1 token_type_ids (expected as many)");
}

TEST(PretrainingCorpus, DocumentSplitIsSeededAndWhole) {
  const DocumentSplit s = split_documents(100, 0.05, 7), t = split_documents(100, 0.05, 7), u = split_documents(100, 0.05, 8);
  EXPECT_EQ(s.validation.size(), 5u);
  EXPECT_EQ(s.train.size(), 95u);
  EXPECT_EQ(s.validation, t.validation);
  EXPECT_NE(s.validation, u.validation);
  std::set<int64_t> all(s.train.begin(), s.train.end());
  all.insert(s.validation.begin(), s.validation.end());
  EXPECT_EQ(all.size(), 100u);
  EXPECT_EQ(split_documents(3, 0.01, 1).validation.size(), 1u);   // at least one
}

TEST(PretrainingCorpus, BibleBooksAndWordNetDocuments) {
  const std::vector<TextDocument> bible = bible_documents("/usr/share/sword");
  ASSERT_EQ(bible.size(), 66u);
  EXPECT_EQ(bible[0].name, "bible:Genesis");
  EXPECT_EQ(bible[0].sentences[0], "In the beginning God created the heaven and the earth.");
  size_t verses = 0;
  for (const auto& d : bible) verses += d.sentences.size();
  EXPECT_GT(verses, 31000u);
  const std::vector<TextDocument> wn = wordnet_documents("");
  ASSERT_GT(wn.size(), 117659u / 64);
  EXPECT_EQ(wn[0].name, "wordnet:noun.Tops#0");
  EXPECT_EQ(wn[0].sentences[0].rfind("entity: ", 0), 0u) << wn[0].sentences[0];
}

TEST(PretrainingCorpus, RealTextInstancesFitAndRepeat) {
  const std::string vocab = test::bert_vocab_path();
  ATTN_NEED_BERT_VOCAB(vocab);
  const auto tok = text::BertTokenizer::from_files(vocab);
  std::vector<TextDocument> text = bible_documents("/usr/share/sword");
  text.resize(6);   // Genesis .. Joshua: enough, and quick
  const std::vector<TokenDocument> docs = tokenize_documents(text, tok);
  const auto x = create_instances(docs, {}, special_ids(tok), 1), y = create_instances(docs, {}, special_ids(tok), 1);
  ASSERT_GT(x.size(), 500u);
  ASSERT_EQ(x.size(), y.size());
  double random = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_LE(x[i].tokens.size(), 128u);
    ASSERT_EQ(x[i].tokens, y[i].tokens);
    random += x[i].is_random_next;
  }
  // Verses are short: chunks of one sentence are rare, so random next is near 1/2.
  EXPECT_NEAR(random / double(x.size()), 0.5, 0.05);
}

TEST(PretrainingCorpus, BadInput) {
  EXPECT_EQ(error_of([] { load_pretraining_documents("books"); }),
            "pretraining data: expected bible, wordnet or bible+wordnet, got 'books'");
  const std::string empty = test::fresh_tmp_dir("attn_pretraining_test", "empty");
  const std::string e = error_of([&] { bible_documents(empty); });
  EXPECT_EQ(e.rfind("pretraining data 'bible': expected the KJV SWORD module engKJV2006eb under '" + empty +
                        "' (Debian package sword-text-kjv): ", 0), 0u) << e;
  const std::string w = error_of([&] { wordnet_documents(empty); });
  EXPECT_EQ(w.rfind("pretraining data 'wordnet': expected WordNet 3.0's data files in '" + empty +
                        "' (Debian package wordnet-base): ", 0), 0u) << w;
  const auto tok = text::BertTokenizer({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"});
  EXPECT_EQ(error_of([&] { tokenize_documents({{"d", {"", "  "}}, {"e", {}}}, tok, "data 'x'"); }),
            "pretraining data 'x': expected documents with text, found 2 documents and no sentence with a token");
  EXPECT_EQ(error_of([] { create_instances({}, {}, {}, 1); }), "pretraining: expected at least one document, got none");
}

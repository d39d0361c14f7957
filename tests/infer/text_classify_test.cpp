// The text metrics (infer/text_classify.h) on hand-computed cases: macro-F1 (scikit-learn's
// f1_score(average="macro") over the classes present) and conlleval's span F1 with the BIO edge cases
// (an I- opening a span, a type change inside a run, adjacent B- spans, a span at the end); and the
// fine-tuning inputs (data/text_classification.h): labels on the first WordPiece, padding, the
// per-epoch order.
#include <gtest/gtest.h>

#include <set>

#include "attn/data/text_classification.h"
#include "attn/infer/text_classify.h"
#include "bert_vocab.h"
#include "errors.h"

using namespace attn;
using infer::Span;
using V = std::vector<std::string>;

TEST(TextMetrics, MacroF1ByHand) {
  // gold 0 0 1 1 2, pred 0 1 1 1 0: class 0 tp 1 fp 1 fn 1 -> 1/2; class 1 tp 2 fp 1 fn 0 -> 4/5;
  // class 2 tp 0 fp 0 fn 1 -> 0. Mean (0.5 + 0.8 + 0) / 3; class 3 (absent everywhere) is not counted.
  EXPECT_NEAR(infer::macro_f1({0, 0, 1, 1, 2}, {0, 1, 1, 1, 0}, 4), (0.5 + 0.8 + 0.0) / 3, 1e-12);
  EXPECT_DOUBLE_EQ(infer::macro_f1({1, 1, 0}, {1, 1, 0}, 2), 1.0);
  // A class only predicted counts (F1 0): gold 0 0, pred 0 1 -> class 0: 2/3, class 1: 0.
  EXPECT_NEAR(infer::macro_f1({0, 0}, {0, 1}, 2), (2.0 / 3) / 2, 1e-12);
  EXPECT_NE(test::error_of([] { infer::macro_f1({0, 5}, {0, 1}, 2); }).find("outside [0, 2)"), std::string::npos);
  EXPECT_NE(test::error_of([] { infer::macro_f1({0}, {0, 1}, 2); }).find("got 2 and 1"), std::string::npos);
}

TEST(TextMetrics, BioSpansAsConlleval) {
  using S = std::vector<Span>;
  EXPECT_EQ(infer::bio_spans({"B-A", "I-A", "O", "B-B"}), (S{{0, 1, "A"}, {3, 3, "B"}}));
  EXPECT_EQ(infer::bio_spans({"O", "I-A", "I-A"}), (S{{1, 2, "A"}}));            // I- after O opens a span
  EXPECT_EQ(infer::bio_spans({"B-A", "I-B", "I-B"}), (S{{0, 0, "A"}, {1, 2, "B"}}));   // type change
  EXPECT_EQ(infer::bio_spans({"B-A", "B-A"}), (S{{0, 0, "A"}, {1, 1, "A"}}));   // adjacent B-
  EXPECT_EQ(infer::bio_spans({"O", "B-A", "I-A"}), (S{{1, 2, "A"}}));            // at the end
  EXPECT_EQ(infer::bio_spans({"I-A"}), (S{{0, 0, "A"}}));
  EXPECT_TRUE(infer::bio_spans({"O", "O"}).empty());
}

TEST(TextMetrics, SpanF1ByHand) {
  // Gold: (0-1 A), (3 B) | (0 A). Pred: (0-1 A) right, (3 A) wrong type | (0-1 A) wrong span, (2 B) extra.
  const std::vector<V> gold = {{"B-A", "I-A", "O", "B-B"}, {"B-A", "O", "O"}};
  const std::vector<V> pred = {{"B-A", "I-A", "O", "B-A"}, {"B-A", "I-A", "B-B"}};
  const infer::SpanScore s = infer::span_f1(gold, pred);
  EXPECT_EQ(s.gold, 3);
  EXPECT_EQ(s.predicted, 4);
  EXPECT_EQ(s.correct, 1);
  EXPECT_DOUBLE_EQ(s.precision, 0.25);
  EXPECT_DOUBLE_EQ(s.recall, 1.0 / 3);
  EXPECT_NEAR(s.f1, 2 * 0.25 * (1.0 / 3) / (0.25 + 1.0 / 3), 1e-12);
  // An I- run that conlleval reads as the same span as B- I- counts as correct.
  EXPECT_DOUBLE_EQ(infer::span_f1({{"B-A", "I-A"}}, {{"I-A", "I-A"}}).f1, 1.0);
  EXPECT_DOUBLE_EQ(infer::span_f1({{"O"}}, {{"O"}}).f1, 0.0);
  EXPECT_NE(test::error_of([] { infer::span_f1({{"O"}}, {{"O", "O"}}); }).find("1 gold tags and 2 predicted"),
            std::string::npos);
}

TEST(TextInputs, LabelsOnFirstPiecesAndPadding) {
  const std::string path = test::bert_vocab_path();
  ATTN_NEED_BERT_VOCAB(path);
  const text::BertTokenizer tok = text::BertTokenizer::from_files(path);
  // "unaffable" is three pieces (un ##ffa ##ble).
  const data::EncodedText e = data::encode_tagged(tok, {"the", "unaffable", "dog"}, {0, 7, 11}, 128);
  ASSERT_EQ(e.ids.size(), 7u);
  EXPECT_EQ(e.ids.front(), tok.cls_id());
  EXPECT_EQ(e.ids.back(), tok.sep_id());
  EXPECT_EQ(tok.id_to_token(e.ids[3]), "##ffa");
  EXPECT_EQ(e.labels, (std::vector<int64_t>{-100, 0, 7, -100, -100, 11, -100}));
  EXPECT_EQ(e.word_token, (std::vector<int64_t>{1, 2, 5}));
  // Truncated to 4 tokens: [CLS] the un [SEP]; "dog" has no piece left.
  const data::EncodedText t = data::encode_tagged(tok, {"the", "unaffable", "dog"}, {0, 7, 11}, 4);
  EXPECT_EQ(t.labels, (std::vector<int64_t>{-100, 0, 7, -100}));
  EXPECT_EQ(t.word_token, (std::vector<int64_t>{1, 2, -1}));
  EXPECT_EQ(t.word_tags, (std::vector<int64_t>{0, 7, 11}));
  // A pair: types 0 then 1.
  const data::EncodedText p = data::encode_text(tok, "a dog", "cat", 1, 128);
  EXPECT_EQ(p.types, (std::vector<int64_t>{0, 0, 0, 0, 1, 1}));
  const data::TextBatch b = data::make_text_batch({e, t}, {1, 0}, tok.pad_id());
  EXPECT_EQ(b.input_ids.shape(), (Shape{2, 7}));
  EXPECT_EQ(b.attention_mask.to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(b.labels.to_vector<int64_t>(),
            (std::vector<int64_t>{-100, 0, 7, -100, -100, -100, -100, -100, 0, 7, -100, -100, 11, -100}));
  EXPECT_EQ(b.input_ids.to_vector<int64_t>()[6], tok.pad_id());
  EXPECT_EQ(b.tokens, 11);
  EXPECT_NE(test::error_of([&] { data::make_text_batch({e, p}, {0, 1}, tok.pad_id()); }).find("one label"),
            std::string::npos);
  const data::TextBatch c = data::make_text_batch({p, p}, {0, 1}, tok.pad_id());
  EXPECT_EQ(c.labels.to_vector<int64_t>(), (std::vector<int64_t>{1, 1}));
}

TEST(TextInputs, EpochOrderIsAPermutationPerSeedAndEpoch) {
  const auto a = data::epoch_order(100, 7, 0), b = data::epoch_order(100, 7, 1);
  EXPECT_EQ(std::set<int64_t>(a.begin(), a.end()).size(), 100u);
  EXPECT_EQ(a, data::epoch_order(100, 7, 0));
  EXPECT_NE(a, b);
  EXPECT_NE(a, data::epoch_order(100, 8, 0));
}

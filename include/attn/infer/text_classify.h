// Fine-tuned BERT classifiers and taggers (train/tasks/sequence_classification.h, token_classification.h)
// at inference, and the metrics they are judged by.
//
//   infer::TextModel m = infer::load_text_model("runs/lex/checkpoint.safetensors");
//   infer::TextClass c = infer::classify_text(m, "a domesticated carnivorous mammal");   // c.label, c.probs
//   infer::TextClass p = infer::classify_text(m, "a gloss", "dog");                       // sentence pair
//   infer::TaggedText t = infer::tag_text(m, "The dogs barked");   // t.words {"The", "dogs", "barked"}, t.tags
//
//   double f = infer::macro_f1(gold, pred, 45);                  // classes' F1 averaged (absent classes skipped)
//   infer::SpanScore s = infer::span_f1(gold_tags, pred_tags);   // BIO strings, conlleval's rules
//
// Metrics:
// - accuracy: correct / count.
// - macro_f1: per class c, F1 = 2 tp / (2 tp + fp + fn); averaged over the classes that occur in gold
//   or predictions (scikit-learn's f1_score(average="macro") over the labels present; a class with
//   tp = fp = fn = 0 is not one of them).
// - span_f1 (conlleval): spans read from BIO tags per sentence: a chunk starts at B-X, or at I-X that
//   does not continue a chunk of type X (conlleval's rule: an I- after O or after another type opens a
//   chunk); it ends before O, B-, or an I- of another type. A predicted span counts when a gold span
//   has the same first word, last word and type. precision = correct / predicted, recall = correct /
//   gold, F1 their harmonic mean (0 when either is 0).
// A text model: an attn checkpoint of BertForSequenceClassification or BertForTokenClassification with
// id2label in its config (what the trainer writes), its vocabulary found as infer/bert_pipeline.h says.
// A checkpoint of another architecture or without labels is an attn::Error naming what it holds.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "attn/infer/bert_pipeline.h"

namespace attn::infer {

double macro_f1(const std::vector<int64_t>& gold, const std::vector<int64_t>& pred, int64_t num_classes);

struct SpanScore {
  double precision = 0, recall = 0, f1 = 0;
  int64_t gold = 0, predicted = 0, correct = 0;
};
// Labelled spans (first, last, type) of one sentence's BIO tags ("O", "B-X", "I-X").
struct Span {
  int64_t first, last;
  std::string type;
  bool operator==(const Span&) const = default;
};
std::vector<Span> bio_spans(const std::vector<std::string>& tags);
SpanScore span_f1(const std::vector<std::vector<std::string>>& gold, const std::vector<std::vector<std::string>>& pred);

struct TextModel {
  BertPipeline pipeline;
  bool tagger = false;                 // BertForTokenClassification
  std::vector<std::string> labels;     // id2label in id order
  int64_t max_length = 128;
};
// linear_dtype: f32, bf16 or i8 (int8 inference; see attn/ops/quantize.h).
TextModel load_text_model(const std::string& checkpoint, DType linear_dtype = DType::f32);

struct TextClass {
  int64_t index = 0;
  std::string label;
  std::vector<float> probs;   // softmax of the logits, by label id
};
TextClass classify_text(const TextModel& m, const std::string& text, const std::string& text_b = "");

struct TaggedText {
  std::vector<std::string> words;    // data::split_words of the text
  std::vector<std::string> tags;     // per word (its first piece's label; "O" for a word without piece)
  std::vector<std::string> tokens;   // WordPiece tokens with [CLS] / [SEP]
  std::vector<std::string> token_tags;   // per token (argmax at every piece)
  std::vector<Span> spans;
};
TaggedText tag_text(const TextModel& m, const std::string& text);

}  // namespace attn::infer

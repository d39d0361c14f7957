// BERT inputs for fine-tuning: examples encoded once with the WordPiece tokenizer, padded batches, and
// a seeded order per epoch.
//
//   text::BertTokenizer tok = ...;
//   data::EncodedText e = data::encode_text(tok, "a gloss", "", 5, 128);        // [CLS] a gloss [SEP], label 5
//   data::EncodedText p = data::encode_text(tok, "a gloss", "dog", 1, 128);     // types 0 ... 0 1 1
//   data::EncodedText t = data::encode_tagged(tok, {"the", "dogs"}, {0, 11}, 128);
//   t.labels;       // per token: -100 for [CLS], [SEP] and every piece after a word's first; the word's tag
//   t.word_token;   // the token of each word's first piece (-1: cut by truncation)
//   data::TextBatch b = data::make_text_batch(examples, {3, 0, 7}, tok.pad_id());   // (3, longest) i64
//   std::vector<int64_t> order = data::epoch_order(n, seed, epoch);
//
// Sequence labels sit on the first WordPiece of each word; the other pieces (and [CLS] / [SEP]) carry
// kIgnoreLabel (-100, PyTorch's cross-entropy ignore_index), so the loss and the word-level
// predictions are the first pieces'. A word that tokenizes to nothing (a character the tokenizer
// drops) has no piece: its word_token is -1 and it is predicted "O" (label 0). Truncation keeps the
// first max_length - 2 pieces (sentence pairs: the longer text is cut first, as Hugging Face's
// longest_first); the cut words' word_token is -1.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "attn/core/tensor.h"
#include "attn/text/bert_tokenizer.h"

namespace attn::data {

inline constexpr int64_t kIgnoreLabel = -100;

struct EncodedText {
  std::vector<int64_t> ids, types;
  std::vector<int64_t> labels;       // one (classification) or one per token (tagging)
  std::vector<int64_t> word_token;   // tagging: the first piece's token of each word, -1 when none
  std::vector<int64_t> word_tags;    // tagging: each word's tag (those of words cut off included)
};

EncodedText encode_text(const text::BertTokenizer& tok, const std::string& a, const std::string& b, int64_t label,
                        int64_t max_length);
EncodedText encode_tagged(const text::BertTokenizer& tok, const std::vector<std::string>& words,
                          const std::vector<int64_t>& tags, int64_t max_length);

// Padded (B, T) i64 tensors of the examples `index`; labels (B) or (B, T) (padding -100).
struct TextBatch {
  Tensor input_ids, token_type_ids, attention_mask, labels;
  int64_t tokens = 0;   // non-padding tokens
};
TextBatch make_text_batch(const std::vector<EncodedText>& examples, const std::vector<int64_t>& index,
                          int64_t pad_id);

// A permutation of [0, n), a pure function of the seed (splitmix64 Fisher-Yates: the same on every
// platform, unlike std::shuffle); epoch_order: that of (seed, epoch).
std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed);
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch);
// The next splitmix64 number of the state `s`, and a uniform integer in [0, n) (n > 0) from it.
uint64_t seeded_next(uint64_t& s);
int64_t seeded_draw(uint64_t& s, int64_t n);

}  // namespace attn::data

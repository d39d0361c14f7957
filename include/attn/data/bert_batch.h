// A batch of BERT inputs from encoded sequences: the token ids and segment ids of each sequence
// (special tokens already in place, e.g. [CLS] A [SEP] B [SEP]) padded on the right into the (B, T)
// i64 tensors a BERT takes (models/bert.h BertInputs: input_ids, token_type_ids, attention_mask).
//
//   std::vector<data::BertSequence> seqs = {{{101, 7592, 102}, {0, 0, 0}}, {{101, 102}, {0, 0}}};
//   data::BertBatch b = data::make_bert_batch(seqs);     // T = 3 (the longest)
//   b.input_ids;        // [[101 7592 102] [101 102 0]]
//   b.attention_mask;   // [[1 1 1] [1 1 0]]
//   b = data::make_bert_batch(seqs, {.pad_to = 8});      // T = 8
//
// Padding: input_ids pad_id (bert-base-uncased's [PAD] is 0), token_type_ids 0, attention_mask 0;
// real tokens have mask 1. T is the longest sequence, raised to pad_to when that is larger and rounded
// up to a multiple of pad_multiple. token_type_ids may be empty (all 0); otherwise it must have the
// ids' length. Errors (attn::Error): an empty batch, an empty sequence, a segment-id list of another
// length than its ids.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "attn/core/tensor.h"

namespace attn::data {

struct BertSequence {
  std::vector<int64_t> ids;
  std::vector<int64_t> token_type_ids;   // empty: all segment 0
};

struct BertBatch {
  Tensor input_ids, token_type_ids, attention_mask;   // (B, T) i64 each
  int64_t tokens = 0;                                  // the real (unpadded) tokens
};

struct BertBatchOptions {
  int64_t pad_id = 0;
  int64_t pad_to = 0;         // at least this many positions (0: the longest sequence)
  int64_t pad_multiple = 1;   // T rounded up to a multiple of this
};

BertBatch make_bert_batch(const std::vector<BertSequence>& seqs, const BertBatchOptions& o = {});
// The same for n sequences given by `at(i)` (no copies of the sequences).
BertBatch make_bert_batch(int64_t n, const std::function<const BertSequence&(int64_t)>& at,
                          const BertBatchOptions& o = {});

}  // namespace attn::data

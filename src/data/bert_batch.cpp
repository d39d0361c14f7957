// BERT input batches (see include/attn/data/bert_batch.h).
#include "attn/data/bert_batch.h"

#include <algorithm>

#include "attn/core/error.h"

namespace attn::data {

BertBatch make_bert_batch(int64_t n, const std::function<const BertSequence&(int64_t)>& at, const BertBatchOptions& o) {
  ATTN_CHECK(n > 0, "make_bert_batch: expected at least one sequence, got an empty batch");
  ATTN_CHECK(o.pad_multiple >= 1, "make_bert_batch: expected pad_multiple >= 1, got ", o.pad_multiple);
  int64_t T = std::max<int64_t>(o.pad_to, 0);
  for (int64_t i = 0; i < n; ++i) {
    const BertSequence& s = at(i);
    ATTN_CHECK(!s.ids.empty(), "make_bert_batch: sequence ", i, " is empty (expected at least one token)");
    ATTN_CHECK(s.token_type_ids.empty() || s.token_type_ids.size() == s.ids.size(), "make_bert_batch: sequence ", i,
               " has ", s.ids.size(), " ids but ", s.token_type_ids.size(), " token_type_ids (expected as many)");
    T = std::max(T, int64_t(s.ids.size()));
  }
  T = (T + o.pad_multiple - 1) / o.pad_multiple * o.pad_multiple;
  std::vector<int64_t> ids(size_t(n * T), o.pad_id), types(size_t(n * T), 0), mask(size_t(n * T), 0);
  BertBatch b;
  for (int64_t i = 0; i < n; ++i) {
    const BertSequence& s = at(i);
    const size_t row = size_t(i * T);
    std::copy(s.ids.begin(), s.ids.end(), ids.begin() + int64_t(row));
    std::copy(s.token_type_ids.begin(), s.token_type_ids.end(), types.begin() + int64_t(row));
    std::fill_n(mask.begin() + int64_t(row), s.ids.size(), 1);
    b.tokens += int64_t(s.ids.size());
  }
  b.input_ids = Tensor::from_vector(ids, {n, T});
  b.token_type_ids = Tensor::from_vector(types, {n, T});
  b.attention_mask = Tensor::from_vector(mask, {n, T});
  return b;
}

BertBatch make_bert_batch(const std::vector<BertSequence>& seqs, const BertBatchOptions& o) {
  return make_bert_batch(int64_t(seqs.size()), [&](int64_t i) -> const BertSequence& { return seqs[size_t(i)]; }, o);
}

}  // namespace attn::data

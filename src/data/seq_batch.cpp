// Token-budget seq2seq batches (see attn/data/seq_batch.h).
#include "attn/data/seq_batch.h"

#include <algorithm>

#include "attn/core/error.h"
#include "attn/core/rng.h"

namespace attn::data {
namespace {

std::vector<int64_t> permutation(int64_t n, uint64_t seed, uint64_t offset) {
  Generator g(seed);
  g.set_state(seed, offset);
  return randperm(n, g).to_vector<int64_t>();
}

}  // namespace

SeqBatcher::SeqBatcher(std::vector<SeqPair> pairs, const SeqBatchOptions& opt) : opt_(opt), pairs_(std::move(pairs)) {
  ATTN_CHECK(opt_.max_tokens >= 2, "SeqBatcher: expected max_tokens >= 2, got ", opt_.max_tokens);
  ATTN_CHECK(opt_.max_sentences >= 0 && opt_.max_length >= 0 && opt_.pool_size >= 0,
             "SeqBatcher: expected max_sentences, max_length and pool_size >= 0, got ", opt_.max_sentences, ", ",
             opt_.max_length, ", ", opt_.pool_size);
  for (size_t i = 0; i < pairs_.size(); ++i) {
    auto& [x, y] = pairs_[i];
    if (x.empty() || y.empty()) {
      ++dropped_empty_;
      continue;
    }
    if (opt_.max_length > 0 && (int64_t(x.size()) > opt_.max_length || int64_t(y.size()) > opt_.max_length)) {
      if (opt_.over_length == OverLength::drop) {
        ++dropped_long_;
        continue;
      }
      x.resize(std::min(x.size(), size_t(opt_.max_length)));
      y.resize(std::min(y.size(), size_t(opt_.max_length)));
      ++truncated_;
    }
    const int64_t need = std::max(int64_t(x.size()), int64_t(y.size()) + 1);
    ATTN_CHECK(need <= opt_.max_tokens, "SeqBatcher: pair ", i, " needs ", need,
               " tokens (source ", x.size(), ", target ", y.size(), " + 1), more than max_tokens ",
               opt_.max_tokens, "; raise max_tokens or lower max_length");
    kept_.push_back(int64_t(i));
  }
}

std::vector<std::vector<int64_t>> SeqBatcher::epoch_batches(int64_t epoch) const {
  ATTN_CHECK(epoch >= 0, "SeqBatcher: expected epoch >= 0, got ", epoch);
  const auto n = int64_t(kept_.size());
  const uint64_t base = uint64_t(epoch) << 40;
  std::vector<int64_t> order(kept_);
  if (opt_.shuffle) {
    const std::vector<int64_t> perm = permutation(n, opt_.seed, base);
    for (int64_t i = 0; i < n; ++i) order[size_t(i)] = kept_[size_t(perm[size_t(i)])];
  }
  const auto src_len = [&](int64_t i) { return int64_t(pairs_[size_t(i)].first.size()); };
  const auto tgt_len = [&](int64_t i) { return int64_t(pairs_[size_t(i)].second.size()) + 1; };   // with the shift
  std::vector<std::vector<int64_t>> batches;
  const int64_t pool = opt_.pool_size > 0 ? opt_.pool_size : std::max<int64_t>(n, 1);
  for (int64_t p0 = 0; p0 < n; p0 += pool) {
    const auto first = order.begin() + p0, last = order.begin() + std::min(n, p0 + pool);
    std::stable_sort(first, last, [&](int64_t a, int64_t b) {
      const int64_t ka = std::max(src_len(a), tgt_len(a)), kb = std::max(src_len(b), tgt_len(b));
      if (ka != kb) return ka < kb;
      if (src_len(a) != src_len(b)) return src_len(a) < src_len(b);
      return tgt_len(a) < tgt_len(b);
    });
    std::vector<int64_t> cur;
    int64_t cur_max = 0;   // max(S, T) of the batch being built
    for (auto it = first; it != last; ++it) {
      const int64_t need = std::max(src_len(*it), tgt_len(*it));
      const int64_t m = std::max(cur_max, need);
      const auto b = int64_t(cur.size()) + 1;
      if (!cur.empty() && (b * m > opt_.max_tokens || (opt_.max_sentences > 0 && b > opt_.max_sentences))) {
        batches.push_back(std::move(cur));
        cur.clear();
        cur_max = 0;
      }
      cur.push_back(*it);
      cur_max = std::max(cur_max, need);
    }
    if (!cur.empty()) batches.push_back(std::move(cur));
  }
  if (opt_.shuffle) {
    const std::vector<int64_t> perm = permutation(int64_t(batches.size()), opt_.seed, base | (uint64_t(1) << 39));
    std::vector<std::vector<int64_t>> shuffled(batches.size());
    for (size_t i = 0; i < batches.size(); ++i) shuffled[i] = std::move(batches[size_t(perm[i])]);
    batches = std::move(shuffled);
  }
  return batches;
}

SeqBatch SeqBatcher::make_batch(const std::vector<int64_t>& indices) const {
  ATTN_CHECK(!indices.empty(), "SeqBatcher::make_batch: expected at least one pair index, got none");
  int64_t S = 0, T = 0;
  for (int64_t i : indices) {
    ATTN_CHECK(i >= 0 && i < int64_t(pairs_.size()), "SeqBatcher::make_batch: pair index ", i,
               " out of range [0, ", pairs_.size(), ")");
    S = std::max(S, int64_t(pairs_[size_t(i)].first.size()));
    T = std::max(T, int64_t(pairs_[size_t(i)].second.size()) + 1);
  }
  const auto B = int64_t(indices.size());
  SeqBatch b;
  b.indices = indices;
  b.src = Tensor::full({B, S}, double(kSeqPadId), DType::i64);
  b.src_pad = Tensor::ones({B, S}, DType::u8);
  b.tgt_in = Tensor::full({B, T}, double(kSeqPadId), DType::i64);
  b.tgt_out = Tensor::full({B, T}, double(kSeqPadId), DType::i64);
  int64_t* src = b.src.data<int64_t>();
  uint8_t* pad = b.src_pad.data<uint8_t>();
  int64_t* tin = b.tgt_in.data<int64_t>();
  int64_t* tout = b.tgt_out.data<int64_t>();
  for (int64_t r = 0; r < B; ++r) {
    const auto& [x, y] = pairs_[size_t(indices[size_t(r)])];
    for (size_t j = 0; j < x.size(); ++j) {
      src[r * S + int64_t(j)] = x[j];
      pad[r * S + int64_t(j)] = 0;
    }
    tin[r * T] = kSeqBosId;
    for (size_t j = 0; j < y.size(); ++j) {
      tin[r * T + int64_t(j) + 1] = y[j];
      tout[r * T + int64_t(j)] = y[j];
    }
    tout[r * T + int64_t(y.size())] = kSeqEosId;
    b.num_tgt_tokens += int64_t(y.size()) + 1;
  }
  return b;
}

const std::vector<std::vector<int64_t>>& SeqBatcher::plan(int64_t epoch) {
  if (plan_epoch_ != epoch) {
    plan_ = epoch_batches(epoch);
    plan_epoch_ = epoch;
  }
  return plan_;
}

int64_t SeqBatcher::num_batches_in_epoch(int64_t epoch) { return int64_t(plan(epoch).size()); }

SeqBatch SeqBatcher::next() {
  ATTN_CHECK(!kept_.empty(), "SeqBatcher::next: no pairs to batch (", pairs_.size(), " given, ", dropped_empty_,
             " empty and ", dropped_long_, " over max_length ", opt_.max_length, " dropped)");
  while (pos_.index >= int64_t(plan(pos_.epoch).size())) pos_ = {pos_.epoch + 1, 0};
  SeqBatch b = make_batch(plan(pos_.epoch)[size_t(pos_.index)]);
  ++pos_.index;
  if (pos_.index >= int64_t(plan(pos_.epoch).size())) pos_ = {pos_.epoch + 1, 0};
  return b;
}

void SeqBatcher::seek(const SeqPosition& pos) {
  ATTN_CHECK(pos.epoch >= 0 && pos.index >= 0, "SeqBatcher::seek: expected epoch >= 0 and index >= 0, got (",
             pos.epoch, ", ", pos.index, ")");
  ATTN_CHECK(pos.index <= int64_t(plan(pos.epoch).size()), "SeqBatcher::seek: epoch ", pos.epoch, " has ",
             plan(pos.epoch).size(), " batches, got index ", pos.index);
  pos_ = pos;
}

}  // namespace attn::data

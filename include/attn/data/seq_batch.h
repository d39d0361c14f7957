// Token-budget batches for sequence-to-sequence training: bucketing by length inside random pools,
// padded tensors with the teacher-forcing shift, a per-epoch seeded order that a position restores.
//
//   std::vector<data::SeqPair> pairs = ...;            // (source ids, target ids), no bos/eos
//   data::SeqBatchOptions opt;  opt.max_tokens = 4096;  opt.seed = 1;
//   data::SeqBatcher batcher(std::move(pairs), opt);
//   for (int64_t i = 0; i < steps; ++i) {
//     data::SeqBatch b = batcher.next();               // b.src (B, S), b.tgt_in / b.tgt_out (B, T)
//     Tensor logits = model->forward(b.src, b.src_pad, b.tgt_in);
//     ...  cross_entropy(logits, b.tgt_out, ignore_index = 0) summed / b.num_tgt_tokens
//   }
//   data::SeqPosition p = batcher.position();         // save with the checkpoint ...
//   batcher.seek(p);                                   // ... a new batcher resumes exactly there
//
// Glossary: B sentences in a batch, S longest source in it, T longest target in it + 1 (the shift).
// Tensors: src (B, S) i64 = x padded with pad 0; src_pad (B, S) u8, 1 = padding; tgt_in (B, T) i64 =
// [bos 2, y...] padded with 0; tgt_out (B, T) i64 = [y..., eos 3] padded with 0 (the loss's
// ignore_index). num_tgt_tokens = sum over rows of len(y) + 1 (the non-pad entries of tgt_out).
//
// Filtering (once, at construction): a pair with an empty source or target is dropped; a side longer
// than max_length (ids, before bos/eos) drops the pair (OverLength::drop) or is cut to max_length
// (OverLength::truncate). The counts are kept (num_dropped_long, num_truncated, num_dropped_empty).
//
// Order of epoch e (shuffle = true), a pure function of (seed, e), like data/loader.h:
//  1. the kept pairs in the order randperm(N, g), g = Generator(seed) at counter offset e << 40;
//  2. cut into pools of pool_size pairs (0: one pool); each pool stably sorted by
//     (max(len x, len y + 1), len x, len y) — so equal lengths stay in random order;
//  3. each pool cut greedily, in that order, into batches with B * max(S, T) <= max_tokens (the padded
//     source or target tokens, whichever is larger) and B <= max_sentences (0: no cap);
//  4. the batches of all pools in the order randperm(num_batches, g'), g' = Generator(seed) at
//     offset (e << 40) | (1 << 39).
// shuffle = false: the pairs in input order, batches in pool order (still sorted inside pools).
// A pair that alone exceeds max_tokens is an error at construction (it could never be batched).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "attn/core/tensor.h"

namespace attn::data {

using TokenIds = std::vector<int64_t>;
using SeqPair = std::pair<TokenIds, TokenIds>;   // (source ids, target ids), without bos / eos

inline constexpr int64_t kSeqPadId = 0, kSeqBosId = 2, kSeqEosId = 3;

enum class OverLength { drop, truncate };

struct SeqBatchOptions {
  int64_t max_tokens = 4096;      // B * max(S, T) per batch
  int64_t max_sentences = 0;      // B cap; 0 = none
  int64_t max_length = 256;       // per side, ids without bos/eos; 0 = no limit
  OverLength over_length = OverLength::drop;
  int64_t pool_size = 16384;      // pairs per sorting pool; 0 = the whole epoch
  bool shuffle = true;
  uint64_t seed = 0;
};

struct SeqBatch {
  Tensor src;       // (B, S) i64
  Tensor src_pad;   // (B, S) u8, nonzero = padding
  Tensor tgt_in;    // (B, T) i64, [bos, y...]
  Tensor tgt_out;   // (B, T) i64, [y..., eos]
  int64_t num_tgt_tokens = 0;    // non-pad entries of tgt_out
  std::vector<int64_t> indices;  // the pairs (indices into the constructor's input), row order
};

// Where next() stands: batch `index` of epoch `epoch` comes next.
struct SeqPosition {
  int64_t epoch = 0, index = 0;
  bool operator==(const SeqPosition&) const = default;
};

class SeqBatcher {
 public:
  SeqBatcher(std::vector<SeqPair> pairs, const SeqBatchOptions& opt);

  const SeqBatchOptions& options() const { return opt_; }
  int64_t num_pairs() const { return int64_t(kept_.size()); }   // after filtering
  int64_t num_dropped_long() const { return dropped_long_; }
  int64_t num_dropped_empty() const { return dropped_empty_; }
  int64_t num_truncated() const { return truncated_; }

  // The batches of epoch e, each a list of input indices (the order above).
  std::vector<std::vector<int64_t>> epoch_batches(int64_t epoch) const;
  // The tensors of a batch of input indices (padded to its longest source / target).
  SeqBatch make_batch(const std::vector<int64_t>& indices) const;

  // Sequential iteration, running from the last batch of epoch e into batch 0 of epoch e + 1.
  SeqBatch next();
  SeqPosition position() const { return pos_; }
  void seek(const SeqPosition& pos);
  int64_t num_batches_in_epoch(int64_t epoch);   // of the (cached) plan of that epoch

 private:
  const std::vector<std::vector<int64_t>>& plan(int64_t epoch);
  SeqBatchOptions opt_;
  std::vector<SeqPair> pairs_;        // as given (truncated where asked)
  std::vector<int64_t> kept_;         // input indices that survive filtering
  int64_t dropped_long_ = 0, dropped_empty_ = 0, truncated_ = 0;
  SeqPosition pos_;
  int64_t plan_epoch_ = -1;
  std::vector<std::vector<int64_t>> plan_;
};

}  // namespace attn::data

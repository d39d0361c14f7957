// Seq2seq token-budget batches: coverage per epoch, budgets, tensors and masks, bucketing,
// determinism in (seed, epoch), resuming from a position, filtering, errors.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "attn/attn.h"
#include "attn/core/rng.h"
#include "attn/data/seq_batch.h"
#include "errors.h"

using namespace attn;
using test::error_of;
using namespace attn::data;

namespace {

// n pairs with random lengths in [1, max_len]; ids >= 4 (past the specials), and the first id of
// each source is 1000 + its index so a row names its pair.
std::vector<SeqPair> random_pairs(int64_t n, int64_t max_len, uint64_t seed) {
  Generator g(seed);
  std::vector<SeqPair> pairs;
  for (int64_t i = 0; i < n; ++i) {
    SeqPair p;
    const int64_t ls = 1 + g.randint(max_len), lt = 1 + g.randint(max_len);
    for (int64_t j = 0; j < ls; ++j) p.first.push_back(j == 0 ? 1000 + i : 4 + g.randint(50));
    for (int64_t j = 0; j < lt; ++j) p.second.push_back(4 + g.randint(50));
    pairs.push_back(std::move(p));
  }
  return pairs;
}

}  // namespace

TEST(SeqBatch, EveryPairOncePerEpochWithinBudget) {
  const auto pairs = random_pairs(500, 40, 1);
  SeqBatchOptions opt{.max_tokens = 300, .max_sentences = 16, .pool_size = 128, .seed = 7};
  SeqBatcher b(pairs, opt);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::multiset<int64_t> seen;
    for (const auto& batch : b.epoch_batches(epoch)) {
      ASSERT_FALSE(batch.empty());
      EXPECT_LE(int64_t(batch.size()), opt.max_sentences);
      int64_t S = 0, T = 0;
      for (int64_t i : batch) {
        seen.insert(i);
        S = std::max(S, int64_t(pairs[size_t(i)].first.size()));
        T = std::max(T, int64_t(pairs[size_t(i)].second.size()) + 1);
      }
      EXPECT_LE(int64_t(batch.size()) * std::max(S, T), opt.max_tokens) << "epoch " << epoch;
    }
    EXPECT_EQ(seen.size(), pairs.size());
    for (int64_t i = 0; i < 500; ++i) EXPECT_EQ(seen.count(i), 1u) << "pair " << i << " epoch " << epoch;
  }
  // Different epochs, different orders; the same epoch twice, the same order.
  EXPECT_NE(b.epoch_batches(0), b.epoch_batches(1));
  EXPECT_EQ(b.epoch_batches(2), SeqBatcher(pairs, opt).epoch_batches(2));
  opt.seed = 8;
  EXPECT_NE(b.epoch_batches(0), SeqBatcher(pairs, opt).epoch_batches(0));
}

TEST(SeqBatch, BucketingKeepsPaddingLow) {
  // Sorted inside pools, a batch's lengths are close: padding is a small share of the budget,
  // far below what random batches of the same pairs would waste.
  const auto pairs = random_pairs(2000, 60, 2);
  SeqBatchOptions opt{.max_tokens = 1024, .pool_size = 1000};
  SeqBatcher b(pairs, opt);
  int64_t real = 0, padded = 0;
  for (const auto& batch : b.epoch_batches(0)) {
    int64_t m = 0;
    for (int64_t i : batch) {
      m = std::max({m, int64_t(pairs[size_t(i)].first.size()), int64_t(pairs[size_t(i)].second.size()) + 1});
      real += std::max(int64_t(pairs[size_t(i)].first.size()), int64_t(pairs[size_t(i)].second.size()) + 1);
    }
    padded += m * int64_t(batch.size());
  }
  EXPECT_LT(double(padded - real) / double(padded), 0.05);
}

TEST(SeqBatch, TensorsAndMasks) {
  std::vector<SeqPair> pairs = {{{10, 11, 12}, {20, 21}}, {{13}, {22, 23, 24, 25}}};
  SeqBatcher b(pairs, SeqBatchOptions{});
  SeqBatch x = b.make_batch({0, 1});
  // S = 3, T = 4 + 1 = 5.
  EXPECT_EQ(x.src.shape(), (Shape{2, 3}));
  EXPECT_EQ(x.src.dtype(), DType::i64);
  EXPECT_EQ(x.src.to_vector<int64_t>(), (std::vector<int64_t>{10, 11, 12, 13, 0, 0}));
  EXPECT_EQ(x.src_pad.dtype(), DType::u8);
  EXPECT_EQ(x.src_pad.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(x.tgt_in.shape(), (Shape{2, 5}));
  EXPECT_EQ(x.tgt_in.to_vector<int64_t>(), (std::vector<int64_t>{2, 20, 21, 0, 0, 2, 22, 23, 24, 25}));
  EXPECT_EQ(x.tgt_out.to_vector<int64_t>(), (std::vector<int64_t>{20, 21, 3, 0, 0, 22, 23, 24, 25, 3}));
  EXPECT_EQ(x.num_tgt_tokens, 3 + 5);
  EXPECT_EQ(x.indices, (std::vector<int64_t>{0, 1}));
  // In every batch of an epoch: src_pad marks exactly the zeros past each source, and the
  // non-pad count of tgt_out is num_tgt_tokens.
  const auto many = random_pairs(200, 30, 3);
  SeqBatchOptions opt{.max_tokens = 200};
  SeqBatcher mb(many, opt);
  for (const auto& idx : mb.epoch_batches(0)) {
    SeqBatch s = mb.make_batch(idx);
    const auto src = s.src.to_vector<int64_t>(), pad = s.src_pad.to_vector<int64_t>(),
               tout = s.tgt_out.to_vector<int64_t>();
    const int64_t S = s.src.size(1);
    int64_t nonpad = 0;
    for (int64_t v : tout) nonpad += v != 0;
    EXPECT_EQ(nonpad, s.num_tgt_tokens);
    for (size_t r = 0; r < idx.size(); ++r) {
      const auto len = int64_t(many[size_t(idx[r])].first.size());
      EXPECT_EQ(src[r * size_t(S)], 1000 + idx[r]);   // row r is pair idx[r]
      for (int64_t j = 0; j < S; ++j) EXPECT_EQ(pad[r * size_t(S) + size_t(j)], j >= len ? 1 : 0);
    }
  }
}

TEST(SeqBatch, NextRunsAcrossEpochsAndResumesFromAPosition) {
  const auto pairs = random_pairs(300, 25, 4);
  SeqBatchOptions opt{.max_tokens = 256, .seed = 11};
  SeqBatcher a(pairs, opt);
  const int64_t n0 = a.num_batches_in_epoch(0);
  std::vector<std::vector<int64_t>> seq;
  std::vector<SeqPosition> positions;
  for (int64_t i = 0; i < n0 + 5; ++i) {
    positions.push_back(a.position());
    seq.push_back(a.next().indices);
  }
  EXPECT_EQ(positions[size_t(n0)], (SeqPosition{1, 0}));
  EXPECT_EQ(seq[0], a.epoch_batches(0)[0]);
  EXPECT_EQ(seq[size_t(n0)], a.epoch_batches(1)[0]);
  // A fresh batcher seeking any saved position continues identically, tensors included.
  for (int64_t k : {int64_t(0), int64_t(3), n0 - 1, n0, n0 + 2}) {
    SeqBatcher b(pairs, opt);
    b.seek(positions[size_t(k)]);
    for (int64_t i = k; i < n0 + 5; ++i) {
      SeqBatch x = b.next();
      ASSERT_EQ(x.indices, seq[size_t(i)]) << "resumed at " << k << ", step " << i;
    }
  }
  SeqBatcher c(pairs, opt);
  c.seek({2, 1});
  SeqBatch x = c.next(), y = SeqBatcher(pairs, opt).make_batch(c.epoch_batches(2)[1]);
  EXPECT_EQ(x.src.to_vector<int64_t>(), y.src.to_vector<int64_t>());
  EXPECT_EQ(x.tgt_in.to_vector<int64_t>(), y.tgt_in.to_vector<int64_t>());
  EXPECT_EQ(error_of([&] { c.seek({0, n0 + 1}); }),
            "SeqBatcher::seek: epoch 0 has " + std::to_string(n0) + " batches, got index " + std::to_string(n0 + 1));
}

TEST(SeqBatch, NoShuffleKeepsInputOrderInsidePools) {
  std::vector<SeqPair> pairs;
  for (int64_t i = 0; i < 6; ++i) pairs.push_back({TokenIds(size_t(6 - i), 5), TokenIds(1, 5)});   // lengths 6..1
  SeqBatchOptions opt{.max_sentences = 2, .pool_size = 3, .shuffle = false};
  SeqBatcher b(pairs, opt);
  // Pools {0,1,2} (lengths 6,5,4) and {3,4,5} (3,2,1), each sorted ascending, cut in twos.
  EXPECT_EQ(b.epoch_batches(0), (std::vector<std::vector<int64_t>>{{2, 1}, {0}, {5, 4}, {3}}));
  EXPECT_EQ(b.epoch_batches(3), b.epoch_batches(0));
}

TEST(SeqBatch, OverLengthDropOrTruncateAndEmptyPairs) {
  std::vector<SeqPair> pairs = {{{5, 6}, {7}}, {{5, 6, 7, 8, 9}, {7}}, {{5}, {7, 8, 9, 10, 11, 12}}, {{}, {7}},
                                {{5}, {}}};
  SeqBatchOptions opt{.max_length = 4};
  SeqBatcher d(pairs, opt);
  EXPECT_EQ(d.num_pairs(), 1);
  EXPECT_EQ(d.num_dropped_long(), 2);
  EXPECT_EQ(d.num_dropped_empty(), 2);
  EXPECT_EQ(d.epoch_batches(0), (std::vector<std::vector<int64_t>>{{0}}));
  opt.over_length = OverLength::truncate;
  SeqBatcher t(pairs, opt);
  EXPECT_EQ(t.num_pairs(), 3);
  EXPECT_EQ(t.num_truncated(), 2);
  SeqBatch x = t.make_batch({1, 2});
  EXPECT_EQ(x.src.to_vector<int64_t>(), (std::vector<int64_t>{5, 6, 7, 8, 5, 0, 0, 0}));
  EXPECT_EQ(x.tgt_out.to_vector<int64_t>(), (std::vector<int64_t>{7, 3, 0, 0, 0, 7, 8, 9, 10, 3}));
}

TEST(SeqBatch, Errors) {
  std::vector<SeqPair> pairs = {{{5, 6, 7, 8, 9, 10}, {7}}};
  SeqBatchOptions opt{.max_tokens = 4, .max_length = 0};
  EXPECT_EQ(error_of([&] { SeqBatcher b(pairs, opt); }),
            "SeqBatcher: pair 0 needs 6 tokens (source 6, target 1 + 1), more than max_tokens 4; raise max_tokens "
            "or lower max_length");
  SeqBatcher empty(std::vector<SeqPair>{SeqPair{{}, {}}}, SeqBatchOptions{});
  EXPECT_EQ(error_of([&] { empty.next(); }),
            "SeqBatcher::next: no pairs to batch (1 given, 1 empty and 0 over max_length 256 dropped)");
  SeqBatcher one(std::vector<SeqPair>{SeqPair{{5}, {6}}}, SeqBatchOptions{});
  EXPECT_EQ(error_of([&] { one.make_batch({3}); }), "SeqBatcher::make_batch: pair index 3 out of range [0, 1)");
}

// DataLoader: seeded, resumable mini-batches with the next batch prepared on a background thread.
//
//   auto ds = std::make_shared<attn::data::FashionMnist>(attn::data::FashionMnist::load());
//   attn::data::LoaderOptions opt;
//   opt.batch_size = 128;  opt.seed = 42;  opt.mean = {0.2860f};  opt.std = {0.3530f};
//   opt.augment.crop_padding = 4;  opt.augment.hflip_p = 0.5;
//   attn::data::DataLoader loader(ds, opt);
//   for (int64_t i = 0; i < steps; ++i) {
//     attn::data::Batch b = loader.next();     // b.images: (B, C, H, W) f32, b.labels: (B) i64
//     ...
//   }
//   auto st = loader.state();                  // {epoch, step} of the next batch: save it
//   loader.seek(st);                           // ... and a new loader resumes from there
//
// Order. Epoch e visits the examples in the order randperm(N, g) where g is attn::Generator(seed)
// at counter offset e << 40 (shuffle = false: 0..N-1). Batch k of epoch e holds positions
// [k B, (k+1) B) of that order; the last, shorter batch is dropped when drop_last. next() runs on
// forever, from the last batch of epoch e to batch 0 of epoch e + 1.
//
// Per example: random crop (zero padding), horizontal flip, normalisation, random erasing (value
// 0, i.e. erased to the mean) — each only when enabled — with the transforms of
// attn/data/transforms.h, drawing from sample_generator(epoch, position in the epoch). So a batch
// depends only on (seed, epoch, step): resuming at (epoch, step) reproduces the data exactly,
// with or without prefetching.
//
// Prefetching: while the caller trains on batch k, one std::thread builds batch k + 1 (plain
// loops, no OpenMP, so it does not compete with the training step's thread team).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "attn/core/rng.h"
#include "attn/data/dataset.h"

namespace attn::data {

struct Augment {
  int64_t crop_padding = 0;    // > 0: RandomCrop((H, W), padding)
  double hflip_p = 0.0;        // > 0: RandomHorizontalFlip(p)
  double erase_p = 0.0;        // > 0: RandomErasing(p, scale, ratio, value = 0), after normalisation
  double erase_scale_lo = 0.02, erase_scale_hi = 0.33;
  double erase_ratio_lo = 0.3, erase_ratio_hi = 3.3;
  int64_t rand_augment_ops = 0;        // > 0: RandAugment(num_ops, magnitude) after crop + flip (data/augment.h)
  int64_t rand_augment_magnitude = 9;
  bool any() const { return crop_padding > 0 || hflip_p > 0 || erase_p > 0 || rand_augment_ops > 0; }
};

struct LoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = true;
  bool drop_last = false;
  uint64_t seed = 0;
  std::vector<float> mean, std;   // per channel, 1 or C values each; empty: no normalisation
  Augment augment;                // default: none
  bool prefetch = true;           // build the next batch on a background thread
  // DeiT's repeated augmentation (RASampler, one process): with repeats > 1 an epoch is
  // data::repeated_augmentation_order(n, repeats, g, shuffle) — each index `repeats` times in a row,
  // cut to floor(n / 256) * 256 entries — so a batch holds differently augmented copies of fewer
  // images. 0 or 1: off (an epoch is one permutation of all n).
  int64_t repeats = 0;
  // Data parallelism: each batch of batch_size is split in order into shard_count parts, and this
  // loader builds part shard_rank (the others are other processes'). Augmentation is drawn per
  // example position as without shards, so the parts together are the one-process batch.
  int64_t shard_rank = 0, shard_count = 1;
};

struct Batch {
  Tensor images;                  // (B, C, H, W) f32
  Tensor labels;                  // (B) i64
  int64_t epoch = 0, step = 0;    // where this batch sits
};

struct LoaderState {
  int64_t epoch = 0;              // epoch of the next batch next() returns
  int64_t step = 0;               // its index in that epoch, in [0, batches_per_epoch())
  bool operator==(const LoaderState&) const = default;
};

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> dataset, LoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  const LoaderOptions& options() const { return opt_; }
  const Dataset& dataset() const { return *ds_; }

  // The batch at state(), then advances (rolling over to the next epoch).
  Batch next();
  LoaderState state() const;
  // The next batch will be (epoch, step); step in [0, batches_per_epoch()).
  void seek(LoaderState s);
  // seek to the global step k = epoch * batches_per_epoch() + step.
  void seek_global(int64_t k);
  int64_t global_step() const;

  // Example indices of epoch `epoch`, in visiting order (the full permutation, before drop_last).
  std::vector<int64_t> epoch_order(int64_t epoch) const;
  // The generator an example's augmentation draws from: position = its index in the epoch order.
  Generator sample_generator(int64_t epoch, int64_t position) const;
  // Builds batch (epoch, step) synchronously on the calling thread (no prefetch, state unchanged).
  Batch make_batch(int64_t epoch, int64_t step) const;

 private:
  void worker_loop();
  std::shared_ptr<const std::vector<int64_t>> order_for(int64_t epoch) const;
  void check_state(LoaderState s, const char* who) const;

  std::shared_ptr<const Dataset> ds_;
  LoaderOptions opt_;
  int64_t n_ = 0, c_ = 0, h_ = 0, w_ = 0;
  int64_t epoch_len_ = 0;   // entries of an epoch's order: n_, or the repeated-augmentation cut
  int64_t batches_per_epoch_ = 0;

  LoaderState pos_;                            // caller side: the next batch to hand out

  // The last epoch order computed (batches of one epoch share it), guarded by order_mu_.
  mutable std::mutex order_mu_;
  mutable int64_t order_epoch_ = -1;
  mutable std::shared_ptr<const std::vector<int64_t>> order_;

  // Prefetch slot, guarded by mu_.
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<LoaderState> request_;         // what the worker should build next
  bool busy_ = false;
  std::optional<LoaderState> ready_pos_;
  std::optional<Batch> ready_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace attn::data

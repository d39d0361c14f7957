// DataLoader: epoch permutations, per-example augmentation, one prefetch thread (double buffering).
#include "attn/data/loader.h"
#include "attn/data/augment.h"

#include <algorithm>
#include <numeric>

#include "attn/data/transforms.h"

namespace attn::data {
namespace {

constexpr int64_t kMaxEpoch = int64_t(1) << 24;      // epoch << 40 stays below 2^64
constexpr int64_t kMaxExamples = int64_t(1) << 24;   // position << 16 stays below 2^40

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

ErasingOptions erasing_options(const Augment& a) {
  ErasingOptions e;
  e.p = a.erase_p;
  e.scale_lo = a.erase_scale_lo;
  e.scale_hi = a.erase_scale_hi;
  e.ratio_lo = a.erase_ratio_lo;
  e.ratio_hi = a.erase_ratio_hi;
  e.value = 0.0f;
  return e;
}

}  // namespace

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, LoaderOptions options)
    : ds_(std::move(dataset)), opt_(std::move(options)) {
  ATTN_CHECK(ds_ != nullptr, "DataLoader: expected a dataset, got null");
  ATTN_CHECK(opt_.batch_size > 0, "DataLoader: expected batch_size > 0, got ", opt_.batch_size);
  n_ = ds_->size();
  ATTN_CHECK(n_ > 0, "DataLoader: the dataset is empty");
  ATTN_CHECK(n_ < kMaxExamples, "DataLoader: expected fewer than ", kMaxExamples, " examples, got ", n_);
  const Shape s = ds_->image_shape();
  ATTN_CHECK(s.size() == 3 && s[0] > 0 && s[1] > 0 && s[2] > 0,
             "DataLoader: expected the dataset's images to have shape (C, H, W), got ", s);
  c_ = s[0];
  h_ = s[1];
  w_ = s[2];
  ATTN_CHECK(opt_.repeats >= 0, "DataLoader: expected repeats >= 0, got ", opt_.repeats);
  ATTN_CHECK(opt_.shard_count >= 1 && opt_.shard_rank >= 0 && opt_.shard_rank < opt_.shard_count,
             "DataLoader: expected 0 <= shard_rank < shard_count, got ", opt_.shard_rank, " of ", opt_.shard_count);
  epoch_len_ = opt_.repeats > 1 ? repeated_augmentation_length(n_) : n_;
  batches_per_epoch_ = opt_.drop_last ? epoch_len_ / opt_.batch_size : (epoch_len_ + opt_.batch_size - 1) / opt_.batch_size;
  ATTN_CHECK(batches_per_epoch_ > 0, "DataLoader: a dataset of ", n_, " examples gives no full batch of ",
             opt_.batch_size, " with drop_last");

  ATTN_CHECK(opt_.mean.empty() == opt_.std.empty(), "DataLoader: expected mean and std both set or both empty, got ",
             opt_.mean.size(), " mean and ", opt_.std.size(), " std values");
  if (!opt_.mean.empty()) {
    ATTN_CHECK(opt_.mean.size() == 1 || int64_t(opt_.mean.size()) == c_, "DataLoader: expected 1 or ", c_,
               " mean values, got ", opt_.mean.size());
    ATTN_CHECK(opt_.std.size() == 1 || int64_t(opt_.std.size()) == c_, "DataLoader: expected 1 or ", c_,
               " std values, got ", opt_.std.size());
    for (size_t i = 0; i < opt_.std.size(); ++i)
      ATTN_CHECK(opt_.std[i] != 0.0f, "DataLoader: expected non-zero std, got std[", i, "] = 0");
  }
  const Augment& a = opt_.augment;
  ATTN_CHECK(a.crop_padding >= 0, "DataLoader: expected augment.crop_padding >= 0, got ", a.crop_padding);
  ATTN_CHECK(a.hflip_p >= 0.0 && a.hflip_p <= 1.0, "DataLoader: expected augment.hflip_p in [0, 1], got ", a.hflip_p);
  ATTN_CHECK(a.erase_p >= 0.0 && a.erase_p <= 1.0, "DataLoader: expected augment.erase_p in [0, 1], got ", a.erase_p);
  ATTN_CHECK(a.rand_augment_ops >= 0 && a.rand_augment_magnitude >= 0 && a.rand_augment_magnitude < 31,
             "DataLoader: expected augment.rand_augment_ops >= 0 and a magnitude in [0, 31), got ",
             a.rand_augment_ops, " ops at magnitude ", a.rand_augment_magnitude);
  if (a.erase_p > 0) {
    // Validates scale and ratio with random_erasing's own messages, without drawing.
    ErasingOptions e = erasing_options(a);
    e.p = 0.0;
    Generator scratch(0);
    erasing_params(h_, w_, e, scratch);
  }

  if (opt_.prefetch) {
    worker_ = std::thread(&DataLoader::worker_loop, this);
    std::lock_guard<std::mutex> lk(mu_);
    request_ = pos_;   // batch 0 gets built while the caller sets up
    cv_.notify_all();
  }
}

DataLoader::~DataLoader() {
  if (worker_.joinable()) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
}

void DataLoader::worker_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || request_.has_value(); });
    if (stop_) return;
    const LoaderState s = *request_;
    request_.reset();
    busy_ = true;
    lk.unlock();
    std::optional<Batch> b;
    std::exception_ptr err;
    try {
      b = make_batch(s.epoch, s.step);
    } catch (...) {
      err = std::current_exception();
    }
    lk.lock();
    busy_ = false;
    ready_pos_ = s;
    ready_ = std::move(b);
    error_ = err;
    cv_.notify_all();
  }
}

Batch DataLoader::next() {
  const LoaderState want = pos_;
  Batch out;
  if (!opt_.prefetch) {
    out = make_batch(want.epoch, want.step);
  } else {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return !busy_ && !request_.has_value(); });
    if (ready_pos_ && *ready_pos_ == want) {
      std::exception_ptr err = error_;
      std::optional<Batch> b = std::move(ready_);
      ready_.reset();
      ready_pos_.reset();
      error_ = nullptr;
      if (err) std::rethrow_exception(err);
      out = std::move(*b);
    } else {
      // Nothing prefetched for this position (the worker is idle): build it here.
      ready_.reset();
      ready_pos_.reset();
      error_ = nullptr;
      lk.unlock();
      out = make_batch(want.epoch, want.step);
      lk.lock();
    }
  }
  pos_.step = want.step + 1;
  pos_.epoch = want.epoch;
  if (pos_.step == batches_per_epoch_) {
    pos_.step = 0;
    pos_.epoch += 1;
  }
  if (opt_.prefetch && pos_.epoch < kMaxEpoch) {
    std::lock_guard<std::mutex> lk(mu_);
    request_ = pos_;
    cv_.notify_all();
  }
  return out;
}

LoaderState DataLoader::state() const { return pos_; }

int64_t DataLoader::global_step() const { return pos_.epoch * batches_per_epoch_ + pos_.step; }

void DataLoader::check_state(LoaderState s, const char* who) const {
  ATTN_CHECK(s.epoch >= 0 && s.epoch < kMaxEpoch, who, ": expected epoch in [0, ", kMaxEpoch, "), got ", s.epoch);
  ATTN_CHECK(s.step >= 0 && s.step < batches_per_epoch_, who, ": expected step in [0, ", batches_per_epoch_,
             "), got ", s.step);
}

void DataLoader::seek(LoaderState s) {
  check_state(s, "DataLoader::seek");
  pos_ = s;
  if (opt_.prefetch) {
    std::lock_guard<std::mutex> lk(mu_);
    request_ = pos_;   // a batch prefetched for the old position is dropped by next()
    cv_.notify_all();
  }
}

void DataLoader::seek_global(int64_t k) {
  ATTN_CHECK(k >= 0, "DataLoader::seek_global: expected a step >= 0, got ", k);
  seek({k / batches_per_epoch_, k % batches_per_epoch_});
}

std::vector<int64_t> DataLoader::epoch_order(int64_t epoch) const {
  ATTN_CHECK(epoch >= 0 && epoch < kMaxEpoch, "DataLoader::epoch_order: expected epoch in [0, ", kMaxEpoch,
             "), got ", epoch);
  return *order_for(epoch);
}

std::shared_ptr<const std::vector<int64_t>> DataLoader::order_for(int64_t epoch) const {
  {
    std::lock_guard<std::mutex> lk(order_mu_);
    if (order_ && order_epoch_ == epoch) return order_;
  }
  auto v = std::make_shared<std::vector<int64_t>>();
  Generator g(opt_.seed);
  g.set_state(opt_.seed, uint64_t(epoch) << 40);
  if (opt_.repeats > 1) {
    *v = repeated_augmentation_order(n_, opt_.repeats, g, opt_.shuffle);
  } else if (opt_.shuffle) {
    const Tensor perm = randperm(n_, g);   // contiguous i64; copied by hand (no OpenMP here)
    const int64_t* p = perm.data<int64_t>();
    v->assign(p, p + n_);
  } else {
    v->resize(size_t(n_));
    std::iota(v->begin(), v->end(), int64_t(0));
  }
  std::lock_guard<std::mutex> lk(order_mu_);
  order_epoch_ = epoch;
  order_ = v;
  return v;
}

Generator DataLoader::sample_generator(int64_t epoch, int64_t position) const {
  Generator g;
  g.set_state(splitmix64(opt_.seed ^ 0x6A09E667F3BCC909ull), (uint64_t(epoch) << 40) + (uint64_t(position) << 16));
  return g;
}

Batch DataLoader::make_batch(int64_t epoch, int64_t step) const {
  check_state({epoch, step}, "DataLoader::make_batch");
  const auto order = order_for(epoch);
  const int64_t first = step * opt_.batch_size, last = std::min(first + opt_.batch_size, epoch_len_);
  const int64_t begin = first + (last - first) * opt_.shard_rank / opt_.shard_count,
                end = first + (last - first) * (opt_.shard_rank + 1) / opt_.shard_count;
  const int64_t b = end - begin, m = c_ * h_ * w_;
  Batch out;
  out.epoch = epoch;
  out.step = step;
  out.images = Tensor::empty({b, c_, h_, w_}, DType::f32);
  out.labels = Tensor::empty({b}, DType::i64);
  float* images = out.images.data<float>();
  int64_t* labels = out.labels.data<int64_t>();
  const Augment& a = opt_.augment;
  const ErasingOptions eopt = erasing_options(a);
  std::vector<float> raw(a.crop_padding > 0 ? size_t(m) : 0);
  for (int64_t k = 0; k < b; ++k) {
    const int64_t pos = begin + k, idx = (*order)[size_t(pos)];
    float* dst = images + k * m;
    Generator g = sample_generator(epoch, pos);
    if (a.crop_padding > 0) {
      labels[k] = ds_->read(idx, raw.data());
      const CropParams cp = crop_params(h_, w_, h_, w_, a.crop_padding, g);
      pad_crop_into(raw.data(), c_, h_, w_, a.crop_padding, cp.top, cp.left, h_, w_, dst);
    } else {
      labels[k] = ds_->read(idx, dst);
    }
    if (a.hflip_p > 0 && hflip_param(a.hflip_p, g)) hflip_inplace(dst, c_, h_, w_);
    if (a.rand_augment_ops > 0)
      rand_augment_inplace(dst, c_, h_, w_, {.num_ops = a.rand_augment_ops, .magnitude = a.rand_augment_magnitude}, g);
    if (!opt_.mean.empty()) normalize_inplace(dst, c_, h_, w_, opt_.mean, opt_.std);
    if (a.erase_p > 0) erase_inplace(dst, c_, h_, w_, erasing_params(h_, w_, eopt, g), eopt.value);
  }
  return out;
}

}  // namespace attn::data

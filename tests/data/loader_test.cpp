// DataLoader: epoch coverage, seeded order, drop_last, normalisation against torchvision,
// augmentation as the public transforms, resume from (epoch, step), prefetch on vs off, the
// background thread, error propagation and messages.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <set>
#include <thread>

#include "attn/attn.h"
#include "attn/data/loader.h"
#include "attn/data/transforms.h"
#include "errors.h"
#include "torch_ref.h"
#include "watchdog.h"

using namespace attn;
using test::error_of;
using test::torch_ref;

namespace {

// N images of shape (2, 5, 7); label i for example i, so a batch's labels name its examples.
std::shared_ptr<data::TensorDataset> make_dataset(int64_t n, uint64_t seed = 1) {
  Generator g(seed);
  return std::make_shared<data::TensorDataset>(randn({n, 2, 5, 7}, g), Tensor::arange(n));
}

std::vector<int64_t> labels_of(const data::Batch& b) { return b.labels.to_vector<int64_t>(); }

void expect_same_batch(const data::Batch& a, const data::Batch& b, const std::string& ctx) {
  EXPECT_EQ(a.epoch, b.epoch) << ctx;
  EXPECT_EQ(a.step, b.step) << ctx;
  EXPECT_EQ(labels_of(a), labels_of(b)) << ctx;
  EXPECT_TENSOR_NEAR(a.images, b.images, 0.0, 0.0) << ctx;
}

data::LoaderOptions augmenting(uint64_t seed, bool prefetch) {
  data::LoaderOptions o;
  o.batch_size = 8;
  o.seed = seed;
  o.prefetch = prefetch;
  o.mean = {0.1f, -0.2f};
  o.std = {0.9f, 1.3f};
  o.augment.crop_padding = 2;
  o.augment.hflip_p = 0.5;
  o.augment.erase_p = 0.5;
  return o;
}

}  // namespace

TEST(Loader, EveryEpochVisitsEveryExampleOnce) {
  auto ds = make_dataset(103);   // prime: the last batch is short
  for (bool drop_last : {false, true})
    for (int64_t bs : {1, 8, 10, 103, 200}) {
      if (drop_last && bs > 103) continue;
      data::LoaderOptions o;
      o.batch_size = bs;
      o.drop_last = drop_last;
      o.seed = 9;
      data::DataLoader loader(ds, o);
      const int64_t bpe = drop_last ? 103 / bs : (103 + bs - 1) / bs;
      ASSERT_EQ(loader.batches_per_epoch(), bpe);
      for (int64_t epoch = 0; epoch < 2; ++epoch) {
        std::vector<int64_t> seen;
        for (int64_t s = 0; s < bpe; ++s) {
          data::Batch b = loader.next();
          EXPECT_EQ(b.epoch, epoch);
          EXPECT_EQ(b.step, s);
          const int64_t want = (s + 1 < bpe || drop_last) ? bs : 103 - s * bs;
          EXPECT_EQ(b.images.shape(), (Shape{want, 2, 5, 7}));
          for (int64_t l : labels_of(b)) seen.push_back(l);
        }
        const std::vector<int64_t> order = loader.epoch_order(epoch);
        EXPECT_EQ(seen, std::vector<int64_t>(order.begin(), order.begin() + int64_t(seen.size())));
        std::set<int64_t> unique(seen.begin(), seen.end());
        EXPECT_EQ(unique.size(), seen.size()) << "no example twice in an epoch";
        EXPECT_EQ(int64_t(seen.size()), drop_last ? bpe * bs : 103);
      }
      EXPECT_EQ(loader.state(), (data::LoaderState{2, 0}));
    }
}

TEST(Loader, OrderIsTheSeededPermutationPerEpoch) {
  auto ds = make_dataset(50);
  data::LoaderOptions o;
  o.seed = 1234;
  data::DataLoader loader(ds, o);
  for (int64_t e : {0, 1, 7}) {
    Generator g(1234);
    g.set_state(1234, uint64_t(e) << 40);
    EXPECT_EQ(loader.epoch_order(e), randperm(50, g).to_vector<int64_t>()) << "epoch " << e;
  }
  EXPECT_NE(loader.epoch_order(0), loader.epoch_order(1));
  o.seed = 1235;
  data::DataLoader other(ds, o);
  EXPECT_NE(loader.epoch_order(0), other.epoch_order(0));
  o.shuffle = false;
  data::DataLoader plain(ds, o);
  std::vector<int64_t> identity(50);
  for (int64_t i = 0; i < 50; ++i) identity[size_t(i)] = i;
  EXPECT_EQ(plain.epoch_order(3), identity);
}

TEST(Loader, BatchesHoldTheDatasetImages) {
  auto ds = make_dataset(37);
  data::LoaderOptions o;
  o.batch_size = 6;
  data::DataLoader loader(ds, o);
  for (int s = 0; s < 7; ++s) {
    data::Batch b = loader.next();
    const auto labels = labels_of(b);
    for (size_t k = 0; k < labels.size(); ++k)
      EXPECT_TENSOR_NEAR(b.images.select(0, int64_t(k)), ds->get(labels[k]).image, 0.0, 0.0) << "step " << s;
  }
}

TEST(Loader, NormalisationMatchesTorchvision) {
  auto ds = make_dataset(20);
  data::LoaderOptions o;
  o.batch_size = 7;
  data::DataLoader raw(ds, o);
  o.mean = {0.25f, -0.5f};
  o.std = {0.5f, 2.0f};
  data::DataLoader norm(ds, o);
  for (int s = 0; s < 3; ++s) {
    data::Batch a = raw.next(), b = norm.next();
    auto ref = torch_ref("data.normalize", {{"img", a.images}}, {{"mean", o.mean}, {"std", o.std}});
    EXPECT_TENSOR_NEAR(b.images, ref.at("out"), 0.0, 0.0) << "step " << s;
  }
}

TEST(Loader, AugmentationIsThePublicTransformsOnTheSampleGenerator) {
  auto ds = make_dataset(29);
  const data::LoaderOptions o = augmenting(5, true);
  data::DataLoader loader(ds, o);
  int changed = 0;
  for (int s = 0; s < 2 * loader.batches_per_epoch(); ++s) {
    data::Batch b = loader.next();
    const auto order = loader.epoch_order(b.epoch);
    for (int64_t k = 0; k < b.images.size(0); ++k) {
      const int64_t pos = b.step * o.batch_size + k;
      Generator g = loader.sample_generator(b.epoch, pos);
      Tensor x = ds->get(order[size_t(pos)]).image;
      x = data::random_crop(x, 5, 7, o.augment.crop_padding, g);
      x = data::random_hflip(x, o.augment.hflip_p, g);
      x = data::normalize(x, o.mean, o.std);
      x = data::random_erasing(x, g, {o.augment.erase_p, 0.02, 0.33, 0.3, 3.3, 0.0f});
      EXPECT_TENSOR_NEAR(b.images.select(0, k), x, 0.0, 0.0) << "epoch " << b.epoch << " step " << b.step << " k " << k;
      Tensor plain = data::normalize(ds->get(order[size_t(pos)]).image, o.mean, o.std);
      if (!test::compare(x, plain, 0, 0).ok) ++changed;
    }
  }
  EXPECT_GT(changed, 29) << "augmentation changes most images";
}

TEST(Loader, RepeatedAugmentationRepeatsEachImageDifferentlyAugmented) {
  // 600 images, 3 repeats: an epoch is RASampler's order on the epoch's generator, 512 entries.
  auto ds = make_dataset(600);
  data::LoaderOptions o = augmenting(9, true);
  o.repeats = 3;
  o.batch_size = 48;
  o.drop_last = true;
  data::DataLoader loader(ds, o);
  EXPECT_EQ(loader.batches_per_epoch(), 512 / 48);
  for (int64_t e : {0, 2}) {
    Generator g(9);
    g.set_state(9, uint64_t(e) << 40);
    EXPECT_EQ(loader.epoch_order(e), data::repeated_augmentation_order(600, 3, g)) << "epoch " << e;
  }
  EXPECT_NE(loader.epoch_order(0), loader.epoch_order(1));
  // A batch holds each image three times in a row, each copy augmented on its own.
  const data::Batch b = loader.next();
  const auto labels = labels_of(b);
  int differ = 0;
  for (int64_t k = 0; k + 2 < 48; k += 3) {
    EXPECT_EQ(labels[size_t(k)], labels[size_t(k + 1)]);
    EXPECT_EQ(labels[size_t(k)], labels[size_t(k + 2)]);
    if (!test::compare(b.images.select(0, k), b.images.select(0, k + 1), 0, 0).ok) ++differ;
  }
  EXPECT_GE(differ, 12) << "the copies see different crops / flips";
  // Resume lands on the same batches.
  data::DataLoader again(ds, o);
  again.seek_global(loader.batches_per_epoch() + 3);
  loader.seek_global(loader.batches_per_epoch() + 3);
  expect_same_batch(loader.next(), again.next(), "after seek");
  // Under 256 images nothing is cut.
  o.drop_last = false;
  data::DataLoader small(make_dataset(100), o);
  EXPECT_EQ(small.epoch_order(0).size(), 100u);
  EXPECT_EQ(small.batches_per_epoch(), 3);
}

TEST(Loader, PrefetchingDoesNotChangeTheData) {
  auto ds = make_dataset(41);
  data::DataLoader a(ds, augmenting(77, true)), b(ds, augmenting(77, false));
  for (int s = 0; s < 3 * a.batches_per_epoch() + 2; ++s) {
    data::Batch x = a.next(), y = b.next();
    expect_same_batch(x, y, "batch " + std::to_string(s));
  }
}

TEST(Loader, ResumesFromEpochAndStep) {
  auto ds = make_dataset(41);
  for (bool prefetch : {true, false}) {
    data::DataLoader a(ds, augmenting(3, prefetch));
    const int64_t bpe = a.batches_per_epoch();
    std::vector<data::Batch> first;
    for (int s = 0; s < 2 * bpe + 3; ++s) first.push_back(a.next());
    // A fresh loader seeking to any point continues exactly as the first one did.
    for (int64_t k : {int64_t(0), int64_t(1), bpe - 1, bpe, bpe + 2, 2 * bpe}) {
      data::DataLoader b(ds, augmenting(3, prefetch));
      b.seek_global(k);
      EXPECT_EQ(b.global_step(), k);
      EXPECT_EQ(b.state(), (data::LoaderState{k / bpe, k % bpe}));
      for (int64_t j = k; j < int64_t(first.size()); ++j)
        expect_same_batch(b.next(), first[size_t(j)], "resume at " + std::to_string(k) + ", batch " + std::to_string(j));
    }
    // Rewinding the same loader (dropping its prefetched batch) also works.
    const data::LoaderState st = {1, 2};
    a.seek(st);
    EXPECT_EQ(a.state(), st);
    expect_same_batch(a.next(), first[size_t(bpe + 2)], "rewind");
    expect_same_batch(a.make_batch(0, 1), first[1], "make_batch");
  }
}

namespace {
// Records the threads that read it; throws for one index.
class ProbeDataset : public data::Dataset {
 public:
  explicit ProbeDataset(int64_t n, int64_t bad = -1) : n_(n), bad_(bad) {}
  int64_t size() const override { return n_; }
  Shape image_shape() const override { return {1, 2, 3}; }
  int64_t read(int64_t i, float* out) const override {
    if (i == bad_) fail("ProbeDataset: cannot read example ", i);
    if (std::this_thread::get_id() != main_) off_main_ = true;
    for (int k = 0; k < 6; ++k) out[k] = float(i);
    return i;
  }
  mutable std::atomic<bool> off_main_{false};

 private:
  int64_t n_, bad_;
  std::thread::id main_ = std::this_thread::get_id();
};
}  // namespace

TEST(Loader, PrefetchRunsOnABackgroundThread) {
  auto ds = std::make_shared<ProbeDataset>(30);
  data::LoaderOptions o;
  o.batch_size = 4;
  {
    data::DataLoader loader(ds, o);
    for (int s = 0; s < 5; ++s) loader.next();
  }
  EXPECT_TRUE(ds->off_main_.load());
  auto ds2 = std::make_shared<ProbeDataset>(30);
  o.prefetch = false;
  data::DataLoader loader(ds2, o);
  for (int s = 0; s < 5; ++s) loader.next();
  EXPECT_FALSE(ds2->off_main_.load());
}

TEST(Loader, DatasetErrorsReachTheCaller) {
  for (bool prefetch : {true, false}) {
    data::LoaderOptions o;
    o.batch_size = 4;
    o.shuffle = false;
    o.prefetch = prefetch;
    data::DataLoader loader(std::make_shared<ProbeDataset>(12, 5), o);
    loader.next();   // examples 0..3
    EXPECT_EQ(error_of([&] { loader.next(); }), "ProbeDataset: cannot read example 5") << prefetch;
    EXPECT_EQ(loader.state(), (data::LoaderState{0, 1})) << "a failed batch does not advance";
    loader.seek({0, 2});
    EXPECT_EQ(labels_of(loader.next()), (std::vector<int64_t>{8, 9, 10, 11}));
  }
}

// Counts the reads in progress and done; each read takes `delay`, so a batch takes long enough for a
// loader to be destroyed while its worker is still building one.
class SlowCountingDataset : public data::Dataset {
 public:
  SlowCountingDataset(int64_t n, std::chrono::microseconds delay) : n_(n), delay_(delay) {}
  int64_t size() const override { return n_; }
  Shape image_shape() const override { return {1, 2, 3}; }
  int64_t read(int64_t i, float* out) const override {
    ++in_flight_;
    std::this_thread::sleep_for(delay_);
    for (int k = 0; k < 6; ++k) out[k] = float(i);
    ++reads_;
    --in_flight_;
    return i;
  }
  mutable std::atomic<int64_t> in_flight_{0}, reads_{0};

 private:
  int64_t n_;
  std::chrono::microseconds delay_;
};

// Destroyed at any point (idle, while the worker builds a batch, after a seek), a loader returns
// promptly (a watchdog bounds the whole test at 60 s, not the binary's 1800 s), and nothing of it
// outlives it: its worker holds no reference to the dataset and reads nothing more. The batches it
// handed out before are the right ones.
TEST(Loader, DestroysCleanlyAtAnyPoint) {
  test::Watchdog dog(std::chrono::seconds(60), "Loader.DestroysCleanlyAtAnyPoint");
  auto ds = std::make_shared<SlowCountingDataset>(300, std::chrono::microseconds(300));
  int64_t destroyed_while_reading = 0;
  for (int i = 0; i < 20; ++i) {
    data::LoaderOptions o;
    o.batch_size = 64;
    o.seed = uint64_t(i);
    {
      data::DataLoader loader(ds, o);
      if (i % 2) {
        const data::Batch b = loader.next();
        const std::vector<int64_t> order = loader.epoch_order(0);
        EXPECT_EQ(labels_of(b), std::vector<int64_t>(order.begin(), order.begin() + 64)) << "loader " << i;
        EXPECT_EQ(b.images.at({5, 0, 1, 2}), double(order[5])) << "loader " << i;
      }
      if (i % 3 == 0) loader.seek({4, 1});
      // Some loaders wait for their worker to be inside a read (on a loaded machine it may not have
      // started yet), so that destruction mid-batch is always exercised.
      for (int spin = 0; i % 4 == 2 && spin < 2000 && ds->in_flight_.load() == 0; ++spin)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      destroyed_while_reading += ds->in_flight_.load() > 0;
    }
    EXPECT_EQ(ds.use_count(), 1) << "loader " << i << ": something still holds the dataset after the loader is gone";
    EXPECT_EQ(ds->in_flight_.load(), 0) << "loader " << i << ": a read still runs after the loader is gone";
    const int64_t reads = ds->reads_.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(ds->reads_.load(), reads) << "loader " << i << ": reads went on after the loader was destroyed";
  }
  std::printf("  %lld of 20 loaders destroyed while their worker was reading\n", (long long)destroyed_while_reading);
  EXPECT_GT(destroyed_while_reading, 0) << "no loader was destroyed mid-batch: the test missed its main case";
}

// The watchdog itself: a test still running at its limit ends with the message (and exit code 1).
TEST(LoaderDeathTest, WatchdogEndsAHungTestWithAMessage) {
  ::testing::GTEST_FLAG(death_test_style) = "threadsafe";
  EXPECT_EXIT(
      {
        test::Watchdog dog(std::chrono::milliseconds(100), "a deliberate hang");
        std::this_thread::sleep_for(std::chrono::seconds(20));
      },
      ::testing::ExitedWithCode(1), "watchdog: a deliberate hang: still running after 0.1 s");
  // Done in time: nothing happens, and the destructor returns at once.
  const auto t0 = std::chrono::steady_clock::now();
  { test::Watchdog dog(std::chrono::seconds(30), "a quick step"); }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
}

TEST(Loader, ErrorMessages) {
  auto ds = make_dataset(10);
  auto make = [&](auto edit) {
    data::LoaderOptions o;
    o.batch_size = 4;
    edit(o);
    data::DataLoader loader(ds, o);
  };
  EXPECT_EQ(error_of([&] { make([](data::LoaderOptions& o) { o.batch_size = 0; }); }),
            "DataLoader: expected batch_size > 0, got 0");
  EXPECT_EQ(error_of([&] { make([](data::LoaderOptions& o) { o.batch_size = 11; o.drop_last = true; }); }),
            "DataLoader: a dataset of 10 examples gives no full batch of 11 with drop_last");
  EXPECT_EQ(error_of([&] { make([](data::LoaderOptions& o) { o.mean = {0.5f}; }); }),
            "DataLoader: expected mean and std both set or both empty, got 1 mean and 0 std values");
  EXPECT_EQ(error_of([&] { make([](data::LoaderOptions& o) { o.mean = {0.f, 0.f, 0.f}; o.std = {1.f}; }); }),
            "DataLoader: expected 1 or 2 mean values, got 3");
  EXPECT_EQ(error_of([&] { make([](data::LoaderOptions& o) { o.mean = {0.f}; o.std = {0.f}; }); }),
            "DataLoader: expected non-zero std, got std[0] = 0");
  EXPECT_EQ(error_of([&] { make([](data::LoaderOptions& o) { o.augment.hflip_p = 2; }); }),
            "DataLoader: expected augment.hflip_p in [0, 1], got 2");
  EXPECT_EQ(error_of([&] { make([](data::LoaderOptions& o) { o.augment.erase_p = 0.5; o.augment.erase_scale_hi = 2; }); }),
            "random_erasing: expected 0 <= scale_lo <= scale_hi <= 1, got scale (0.02, 2)");
  EXPECT_EQ(error_of([&] { data::DataLoader(nullptr, data::LoaderOptions{}); }),
            "DataLoader: expected a dataset, got null");
  EXPECT_EQ(error_of([&] { data::DataLoader(std::make_shared<ProbeDataset>(0), data::LoaderOptions{}); }),
            "DataLoader: the dataset is empty");
  data::LoaderOptions o;
  o.batch_size = 4;
  data::DataLoader loader(ds, o);
  EXPECT_EQ(error_of([&] { loader.seek({0, 3}); }), "DataLoader::seek: expected step in [0, 3), got 3");
  EXPECT_EQ(error_of([&] { loader.seek({-1, 0}); }), "DataLoader::seek: expected epoch in [0, 16777216), got -1");
  EXPECT_EQ(error_of([&] { loader.seek_global(-2); }), "DataLoader::seek_global: expected a step >= 0, got -2");
  EXPECT_EQ(error_of([&] { ds->get(10); }), "Dataset::get: index 10 is out of range for a dataset of 10 examples");
  EXPECT_EQ(error_of([&] { data::TensorDataset(Tensor::zeros({3, 4, 4}), Tensor::zeros({2}, DType::i64)); }),
            "TensorDataset: expected 3 labels (one per image), got 2");
}

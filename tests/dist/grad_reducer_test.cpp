// The bucketed gradient all-reduce on a stand-in communicator of two identical ranks (its
// all-reduce doubles the values, as the sum over two ranks with the same gradients would): every
// gradient ends as the sum over ranks, bucket by bucket in index order, most buckets start during
// the backward pass, the gradients are made in their bucket slots, a parameter without a gradient
// is reduced as zeros and keeps no gradient, and gradient accumulation over micro-batches is summed before the reduction.
// The real transport is exercised by tests/cli/mpi_train_test.cpp.
#include <gtest/gtest.h>

#include <vector>

#include "attn/attn.h"

using namespace attn;

namespace {

class TwinRanks final : public dist::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string transport() const override { return "test"; }
  void allreduce_sum(float* d, int64_t n) override { for (int64_t i = 0; i < n; ++i) d[i] *= 2; }
  void allreduce_sum(double* d, int64_t n) override { for (int64_t i = 0; i < n; ++i) d[i] *= 2; }
  void allreduce_max(uint64_t*, int64_t) override {}
  std::unique_ptr<dist::Request> iallreduce_sum(float* d, int64_t n) override {
    allreduce_sum(d, n);
    launches.push_back({n, in_backward});
    struct Done : dist::Request {
      bool test() override { return true; }
      void wait() override {}
    };
    return std::make_unique<Done>();
  }
  std::vector<std::string> allgather(const std::string& s) override { return {s, s}; }
  void barrier() override {}
  [[noreturn]] void abort(int) override { std::abort(); }
  struct Launch {
    int64_t n;
    bool during_backward;
  };
  std::vector<Launch> launches;
  bool in_backward = false;
};

struct Net {
  nn::Linear a{16, 32}, b{32, 32}, c{32, 8}, unused{4, 4};
  std::vector<Tensor> params() const {
    std::vector<Tensor> p;
    for (const nn::Module* m : {static_cast<const nn::Module*>(&a), static_cast<const nn::Module*>(&b),
                                static_cast<const nn::Module*>(&c), static_cast<const nn::Module*>(&unused)})
      for (const Tensor& t : m->parameters()) p.push_back(t);
    return p;
  }
  Tensor loss(const Tensor& x) const { return sum(c.forward(gelu(b.forward(gelu(a.forward(x)))))); }
};

std::vector<std::vector<float>> grads_of(const std::vector<Tensor>& ps) {
  std::vector<std::vector<float>> g;
  for (const Tensor& p : ps) g.push_back(p.grad().defined() ? p.grad().to_vector<float>() : std::vector<float>());
  return g;
}

// The one-process gradients of net.loss(x) for ps (empty where none), then the gradients dropped.
std::vector<std::vector<float>> reference_grads(const Net& net, const std::vector<Tensor>& ps, const Tensor& x) {
  net.loss(x).backward();
  const auto want = grads_of(ps);
  for (Tensor p : ps) p.zero_grad();
  return want;
}

// One armed backward pass through the reducer, the stand-in communicator told when it runs.
void reduced_backward(const Net& net, const Tensor& x, dist::GradReducer& r, TwinRanks& comm) {
  r.arm();
  comm.in_backward = true;
  net.loss(x).backward();
  comm.in_backward = false;
  r.finish();
}

TEST(GradReducer, SumsOverRanksInBucketsStartedDuringBackward) {
  manual_seed(1);
  Net net;
  const std::vector<Tensor> ps = net.params();
  const Tensor x = Tensor::randn({8, 16});
  const auto want = reference_grads(net, ps, x);
  TwinRanks comm;
  // Small buckets: several of them for these 3.2 K parameters.
  dist::GradReducer r(comm, ps, {.first_bucket_bytes = 512, .bucket_bytes = 4096});
  ASSERT_GE(r.num_buckets(), 3);
  EXPECT_EQ(r.numel(), 16 * 32 + 32 + 32 * 32 + 32 + 32 * 8 + 8 + 4 * 4 + 4);
  for (int step = 0; step < 2; ++step) {   // twice: the slots are reused after zero_grad
    comm.launches.clear();
    reduced_backward(net, x, r, comm);
    ASSERT_EQ(int64_t(comm.launches.size()), r.num_buckets());
    int early = 0;
    for (const auto& l : comm.launches) early += l.during_backward;
    if (step == 0) {
      // In registration order the first bucket holds the unused layer: it completes only in finish(),
      // and the buckets after it wait for it.
      EXPECT_EQ(early, 0) << "buckets start in index order: the first holds the unused layer";
    } else {
      // Rebuilt in the first step's order of readiness, the unused layer last: all but its bucket
      // start during the backward.
      EXPECT_EQ(early, r.num_buckets() - 1);
    }
    for (size_t i = 0; i < ps.size(); ++i) {
      if (want[i].empty()) {   // no rank had a gradient: none after the reduction either (the optimizer skips it)
        EXPECT_FALSE(ps[i].grad().defined()) << i;
        continue;
      }
      const std::vector<float> got = ps[i].grad().to_vector<float>();
      ASSERT_EQ(got.size(), size_t(ps[i].numel()));
      for (size_t k = 0; k < got.size(); ++k) EXPECT_EQ(got[k], 2 * want[i][k]) << i << ":" << k;
    }
    for (Tensor p : ps) p.zero_grad();
  }
}

TEST(GradReducer, BucketsStartDuringBackwardAndGradientsLandInTheirSlots) {
  manual_seed(2);
  Net net;
  std::vector<Tensor> ps = net.params();
  ps.resize(ps.size() - 2);   // without the unused layer
  const Tensor x = Tensor::randn({8, 16});
  const auto want = reference_grads(net, ps, x);
  TwinRanks comm;
  dist::GradReducer r(comm, ps, {.first_bucket_bytes = 512, .bucket_bytes = 4096});
  reduced_backward(net, x, r, comm);
  int early = 0;
  for (const auto& l : comm.launches) early += l.during_backward;
  EXPECT_GE(early, r.num_buckets() - 1) << "all but the last bucket start while backward still runs";
  EXPECT_EQ(r.stats().started_early, early);
  for (size_t i = 0; i < ps.size(); ++i) {
    const std::vector<float> got = ps[i].grad().to_vector<float>();
    for (size_t k = 0; k < got.size(); ++k) ASSERT_EQ(got[k], 2 * want[i][k]) << i << ":" << k;
  }
  // The gradient of every parameter is a view of a bucket buffer (no copy out).
  const float* first = ps.back().grad().data<float>();
  const float* second = ps[ps.size() - 2].grad().data<float>();
  EXPECT_EQ(second, first + ps.back().numel()) << "consecutive slots of the first bucket";
}

TEST(GradReducer, AccumulatedMicroBatchesAreSummedBeforeTheReduction) {
  manual_seed(3);
  Net net;
  std::vector<Tensor> ps = net.params();
  ps.resize(ps.size() - 2);
  const Tensor x1 = Tensor::randn({4, 16}), x2 = Tensor::randn({4, 16});
  net.loss(x1).backward();
  net.loss(x2).backward();
  const auto want = grads_of(ps);
  for (Tensor p : ps) p.zero_grad();
  TwinRanks comm;
  dist::GradReducer r(comm, ps, {.first_bucket_bytes = 512, .bucket_bytes = 4096});
  net.loss(x1).backward();   // not armed: nothing is reduced
  EXPECT_TRUE(comm.launches.empty());
  r.arm();
  net.loss(x2).backward();
  r.finish();
  for (size_t i = 0; i < ps.size(); ++i) {
    const std::vector<float> got = ps[i].grad().to_vector<float>();
    for (size_t k = 0; k < got.size(); ++k) ASSERT_FLOAT_EQ(got[k], 2 * want[i][k]) << i << ":" << k;
  }
}

TEST(GradReducer, FinishWithoutArmIsAnError) {
  Net net;
  TwinRanks comm;
  dist::GradReducer r(comm, net.params());
  EXPECT_THROW(r.finish(), Error);
}

TEST(Dist, OneProcessWorldWithoutMpirun) {
  // The test runs without mpirun: a world of one, no MPI call.
  ASSERT_FALSE(dist::launched_by_mpi());
  EXPECT_EQ(dist::world().size(), 1);
  EXPECT_EQ(dist::world().rank(), 0);
  EXPECT_EQ(dist::world().transport(), "none");
  std::vector<double> v = {1.5};
  dist::world().allreduce_sum(v.data(), 1);
  EXPECT_EQ(v[0], 1.5);
}

}  // namespace

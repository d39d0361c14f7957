// cross_entropy, kl_div, mse_loss against PyTorch (forward + backward, f32 and f64, every option
// combination, (N, C, d...) and unbatched logits, soft targets, all-ignored batches, special
// values), finite differences in f64, thread-count independence, and the error messages.
#include <gtest/gtest.h>

#include <cmath>

#include "attn/attn.h"
#include "attn/core/isa.h"
#include "attn/ops/indexing.h"
#include "attn/ops/loss.h"
#include "errors.h"
#include "isa.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::torch_ref;

namespace {

const char* red_name(Reduction r) { return r == Reduction::none ? "none" : r == Reduction::mean ? "mean" : "sum"; }

Tensor rand_classes(const Shape& s, int64_t C, Generator& g) {
  std::vector<int64_t> v(size_t(shape_numel(s)));
  for (auto& x : v) x = g.randint(C);
  return Tensor::from_vector<int64_t>(v, s);
}

// Class-index target shape for logits of shape ls.
Shape target_shape(const Shape& ls) {
  if (ls.size() == 1) return {};
  Shape t = {ls[0]};
  t.insert(t.end(), ls.begin() + 2, ls.end());
  return t;
}

// Random probabilities along the class dim (dim 0 for unbatched, else 1).
Tensor rand_probs(const Shape& ls, Generator& g, DType dt) {
  Tensor r = add(rand(ls, g, dt), 0.05);
  const int64_t cd = ls.size() == 1 ? 0 : 1;
  return r / sum(r, {cd}, true);
}

struct Tol { double atol, rtol; };
Tol tol(DType dt) { return dt == DType::f32 ? Tol{2e-5, 2e-5} : Tol{1e-10, 1e-10}; }

// Runs cross_entropy forward + backward and compares with torch.
void check_ce(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& o, Generator& g,
              const std::string& ctx) {
  Tensor xx = logits.clone().requires_grad_();
  Tensor y = cross_entropy(xx, target, o);
  Tensor gout = randn(y.shape(), g, logits.dtype());
  auto ref = torch_ref("loss.cross_entropy", {{"x", logits}, {"t", target}, {"g", gout}},
                       {{"reduction", red_name(o.reduction)}, {"ignore_index", o.ignore_index},
                        {"label_smoothing", o.label_smoothing}});
  y.backward(gout);
  const Tol t = tol(logits.dtype());
  EXPECT_TENSOR_NEAR(y, ref.at("out"), t.atol, t.rtol) << ctx;
  EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), t.atol, t.rtol) << ctx;
}

}  // namespace

// ---------------------------------------------------------------- cross_entropy

TEST(CrossEntropy, ClassTargetsEveryOption) {
  Generator g(401);
  // {130, 19}: more rows than one SIMD kernel call takes (64); {4, 1003}: long rows with a tail.
  const std::vector<Shape> shapes = {{7, 11}, {5, 37, 3}, {2, 5, 3, 4}, {13}, {3, 1}, {1, 2}, {130, 19}, {4, 1003}};
  for (DType dt : {DType::f32, DType::f64}) {
    for (const auto& ls : shapes) {
      const int64_t C = ls.size() == 1 ? ls[0] : ls[1];
      for (int64_t ignore : {int64_t(-100), int64_t(1)}) {
        for (double smoothing : {0.0, 0.1, 1.0}) {
          for (Reduction r : {Reduction::none, Reduction::mean, Reduction::sum}) {
            Tensor x = randn(ls, g, dt) * 2.0;
            Tensor t = rand_classes(target_shape(ls), C, g);
            if (ignore == -100 && t.numel() > 2) {   // a few ignored positions
              std::vector<int64_t> v = t.to_vector<int64_t>();
              v[0] = -100;
              v[v.size() / 2] = -100;
              t = Tensor::from_vector<int64_t>(v, t.shape());
            }
            CrossEntropyOptions o;
            o.ignore_index = ignore; o.label_smoothing = smoothing; o.reduction = r;
            check_ce(x, t, o, g,
                     std::string(dtype_name(dt)) + " " + shape_str(ls) + " ignore " + std::to_string(ignore) +
                         " ls " + std::to_string(smoothing) + " " + red_name(r));
          }
        }
      }
    }
  }
}

TEST(CrossEntropy, AllIgnoredBatch) {
  Generator g(402);
  for (double smoothing : {0.0, 0.2}) {
    for (Reduction r : {Reduction::none, Reduction::mean, Reduction::sum}) {
      Tensor x = randn({4, 6}, g, DType::f64);
      Tensor t = Tensor::full({4}, -100, DType::i64);
      CrossEntropyOptions o;
      o.label_smoothing = smoothing; o.reduction = r;
      check_ce(x, t, o, g, std::string("all ignored ") + red_name(r) + " ls " + std::to_string(smoothing));
      if (r == Reduction::mean) EXPECT_TRUE(std::isnan(cross_entropy(x, t, o).item())) << "torch gives nan";
    }
  }
}

TEST(CrossEntropy, SoftTargets) {
  Generator g(403);
  const std::vector<Shape> shapes = {{7, 11}, {5, 37, 3}, {13}, {2, 3, 2, 2}};
  for (DType dt : {DType::f32, DType::f64}) {
    for (const auto& ls : shapes) {
      for (double smoothing : {0.0, 0.3}) {
        for (Reduction r : {Reduction::none, Reduction::mean, Reduction::sum}) {
          CrossEntropyOptions o;
          o.label_smoothing = smoothing; o.reduction = r;
          check_ce(randn(ls, g, dt), rand_probs(ls, g, dt), o, g,
                   std::string("soft ") + dtype_name(dt) + " " + shape_str(ls) + " ls " + std::to_string(smoothing) +
                       " " + red_name(r));
        }
      }
    }
  }
}

TEST(CrossEntropy, SpecialValuesAndLargeLogits) {
  Generator g(404);
  // Row 0: -inf off target; row 1: -inf at the target; row 2: NaN; row 3: huge logits.
  Tensor x = Tensor::from_vector<float>({1.f, -INFINITY, 2.f, 0.5f,        //
                                         -INFINITY, 3.f, 1.f, 0.f,         //
                                         0.f, NAN, 1.f, 2.f,               //
                                         1e4f, -1e4f, 3e4f, 2.9999e4f}, {4, 4});
  Tensor t = Tensor::from_vector<int64_t>({0, 0, 2, 3}, {4});
  for (double smoothing : {0.0, 0.1}) {
    CrossEntropyOptions o;
    o.reduction = Reduction::none; o.label_smoothing = smoothing;
    Tensor y = cross_entropy(x, t, o);
    auto ref = torch_ref("loss.cross_entropy", {{"x", x}, {"t", t}, {"g", Tensor::ones({4})}},
                         {{"reduction", "none"}, {"ignore_index", -100}, {"label_smoothing", smoothing}});
    EXPECT_TENSOR_NEAR(y, ref.at("out"), 1e-5, 1e-5) << "ls " << smoothing;
  }
  Tensor big = Tensor::from_vector<float>({1e4f, -1e4f, 3e4f, 2.9999e4f}, {1, 4});
  check_ce(big, Tensor::from_vector<int64_t>({3}, {1}), CrossEntropyOptions{}, g, "large logits");
}

TEST(CrossEntropy, FiniteDifferences) {
  Generator g(405);
  Tensor x = randn({3, 5, 2}, g, DType::f64);
  Tensor t = Tensor::from_vector<int64_t>({0, 4, 2, -100, 3, 3}, {3, 2});
  for (Reduction r : {Reduction::none, Reduction::mean, Reduction::sum}) {
    CrossEntropyOptions o;
    o.label_smoothing = 0.15; o.reduction = r;
    EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], t, o); }, {x}))
        << red_name(r);
  }
  Tensor p = rand_probs({3, 5, 2}, g, DType::f64);
  CrossEntropyOptions o;
  o.label_smoothing = 0.2;
  EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], p, o); }, {x}));
}

TEST(CrossEntropy, IndependentOfThreadCount) {
  Generator g(406);
  Tensor x = randn({4001, 37}, g);
  Tensor t = rand_classes({4001}, 37, g);
  auto run = [&](int threads) {
    set_num_threads(threads);
    Tensor xx = x.clone().requires_grad_();
    Tensor y = cross_entropy(xx, t);
    y.backward();
    return std::make_pair(y, xx.grad());
  };
  const int prev = get_num_threads();
  auto [y1, d1] = run(1);
  auto [y2, d2] = run(2);
  set_num_threads(prev);
  EXPECT_TENSOR_NEAR(y1, y2, 0, 0);
  EXPECT_TENSOR_NEAR(d1, d2, 0, 0);
}

// The f32 (N, C) rows run through the SIMD row kernels; each ISA this CPU has must agree with the
// scalar f64 path (max, log-sum-exp, label smoothing's sum, the gradient's exp), large logits too.
TEST(CrossEntropy, EveryIsaMatchesDouble) {
  const test::IsaRestore restore;
  Generator g(407);
  for (int64_t C : {int64_t(5), int64_t(8), int64_t(37), int64_t(1003), int64_t(8000)}) {
    Tensor x = randn({70, C}, g) * 4.0 + 30.0;   // lse near 30 + log C: the hi/lo split matters
    std::vector<int64_t> tv = rand_classes({70}, C, g).to_vector<int64_t>();
    tv[3] = -100;
    Tensor t = Tensor::from_vector<int64_t>(tv, {70});
    for (double smoothing : {0.0, 0.1}) {
      CrossEntropyOptions o;
      o.label_smoothing = smoothing;
      Tensor xd = x.to(DType::f64).requires_grad_();
      Tensor yd = cross_entropy(xd, t, o);
      yd.backward();
      for (Isa isa : test::supported_isas()) {
        set_isa(isa);
        Tensor xf = x.clone().requires_grad_();
        Tensor yf = cross_entropy(xf, t, o);
        yf.backward();
        set_isa(restore.saved);
        const std::string what = std::string("C ") + std::to_string(C) + " ls " + std::to_string(smoothing) +
                                 " isa " + isa_name(isa);
        EXPECT_NEAR(yf.item(), yd.item(), 2e-6 * std::abs(yd.item())) << what;
        EXPECT_TENSOR_NEAR(xf.grad(), xd.grad().to(DType::f32), 1e-8, 1e-5) << what;
      }
    }
  }
}

TEST(CrossEntropy, Errors) {
  Tensor x = Tensor::zeros({4, 10});
  EXPECT_EQ(error_of([&] { cross_entropy(x, Tensor::from_vector<int64_t>({1, 2, 10, 0}, {4})); }),
            "cross_entropy: target 10 at flat position 2 is out of range [0, 10)");
  EXPECT_EQ(error_of([&] { cross_entropy(x, Tensor::from_vector<int64_t>({1, -1, 0, 0}, {4})); }),
            "cross_entropy: target -1 at flat position 1 is out of range [0, 10)");
  EXPECT_EQ(error_of([&] { cross_entropy(Tensor::zeros({4, 10, 5}), Tensor::zeros({4}, DType::i64)); }),
            "cross_entropy: expected a target of shape [4, 5] for logits of shape [4, 10, 5], got [4]");
  EXPECT_EQ(error_of([&] { cross_entropy(x, Tensor::zeros({4}, DType::i32)); }),
            "cross_entropy: expected a target of class indices (i64) or probabilities (f32/f64), got i32");
  EXPECT_EQ(error_of([&] { cross_entropy(x, Tensor::zeros({4, 9})); }),
            "cross_entropy: expected soft targets of the logits' shape [4, 10], got [4, 9]");
  EXPECT_EQ(error_of([&] { cross_entropy(x, Tensor::zeros({4, 10}, DType::f64)); }),
            "cross_entropy: soft targets must have the logits' dtype (f32), got f64");
  EXPECT_EQ(error_of([&] { cross_entropy(Tensor::zeros({4, 10}, DType::i64), Tensor::zeros({4}, DType::i64)); }),
            "cross_entropy: expected f32 or f64 logits, got i64");
  CrossEntropyOptions o;
  o.label_smoothing = 1.5;
  EXPECT_EQ(error_of([&] { cross_entropy(x, Tensor::zeros({4}, DType::i64), o); }),
            "cross_entropy: label_smoothing must be in [0, 1], got 1.5");
}

// ---------------------------------------------------------------- kl_div

TEST(KlDiv, MatchesTorch) {
  Generator g(411);
  const std::vector<std::pair<Shape, Shape>> cases = {{{4, 7}, {4, 7}}, {{4, 7}, {7}}, {{3, 1, 5}, {2, 1}},
                                                      {{}, {}}, {{13}, {13}}};
  for (DType dt : {DType::f32, DType::f64}) {
    for (const auto& [si, st] : cases) {
      for (bool log_target : {false, true}) {
        for (const char* red : {"none", "mean", "sum", "batchmean"}) {
          Tensor x = randn(si, g, dt) - 1.0;
          Tensor t;
          if (log_target) {
            t = randn(st, g, dt);
          } else {   // probabilities with some exact zeros (xlogy's 0 and torch's NaN target grad)
            t = rand(st, g, dt);
            t = where(lt(t, 0.2), Tensor::scalar(0.0, dt), t);
          }
          Tensor xx = x.clone().requires_grad_(), tt = t.clone().requires_grad_();
          const std::string r = red;
          Tensor y = r == "batchmean" ? kl_div_batchmean(xx, tt, log_target)
                                      : kl_div(xx, tt, r == "none" ? Reduction::none : r == "mean" ? Reduction::mean : Reduction::sum,
                                               log_target);
          Tensor gout = randn(y.shape(), g, dt);
          auto ref = torch_ref("loss.kl_div", {{"x", x}, {"t", t}, {"g", gout}}, {{"reduction", red}, {"log_target", log_target}});
          y.backward(gout);
          const std::string ctx = std::string(dtype_name(dt)) + " " + shape_str(si) + " " + shape_str(st) + " " + red +
                                  (log_target ? " log_target" : "");
          const Tol tl = tol(dt);
          EXPECT_TENSOR_NEAR(y, ref.at("out"), tl.atol, tl.rtol) << ctx;
          EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), tl.atol, tl.rtol) << ctx;
          EXPECT_TENSOR_NEAR(tt.grad(), ref.at("dt"), tl.atol, tl.rtol) << ctx;
        }
      }
    }
  }
}

TEST(KlDiv, FiniteDifferences) {
  Generator g(412);
  Tensor x = randn({3, 4}, g, DType::f64);
  Tensor p = add(rand({3, 4}, g, DType::f64), 0.1);
  Tensor lt_ = randn({4}, g, DType::f64);
  EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return kl_div(in[0], in[1], Reduction::none); }, {x, p}));
  EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return kl_div_batchmean(in[0], in[1], true); }, {x, lt_}));
}

TEST(KlDiv, Errors) {
  EXPECT_EQ(error_of([&] { kl_div(Tensor::zeros({3}), Tensor::zeros({3}, DType::f64)); }),
            "kl_div: input and target dtypes differ (f32 and f64); convert one with .to()");
  EXPECT_EQ(error_of([&] { kl_div(Tensor::zeros({3}), Tensor::zeros({4})); }),
            "kl_div: shapes [3] and [4] do not broadcast (dim 0: 3 vs 4)");
}

// ---------------------------------------------------------------- mse_loss

TEST(MseLoss, MatchesTorch) {
  Generator g(421);
  const std::vector<std::pair<Shape, Shape>> cases = {{{4, 7}, {4, 7}}, {{3, 1, 5}, {4, 5}}, {{}, {}}, {{37}, {1}},
                                                      {{0, 3}, {3}}};
  for (DType dt : {DType::f32, DType::f64}) {
    for (const auto& [si, st] : cases) {
      for (Reduction r : {Reduction::none, Reduction::mean, Reduction::sum}) {
        if (shape_numel(si) == 0 && r != Reduction::none) continue;   // torch's empty mean: checked below
        Tensor x = randn(si, g, dt), t = randn(st, g, dt);
        Tensor xx = x.clone().requires_grad_(), tt = t.clone().requires_grad_();
        Tensor y = mse_loss(xx, tt, r);
        Tensor gout = randn(y.shape(), g, dt);
        auto ref = torch_ref("loss.mse_loss", {{"x", x}, {"t", t}, {"g", gout}}, {{"reduction", red_name(r)}});
        y.backward(gout);
        const std::string ctx = std::string(dtype_name(dt)) + " " + shape_str(si) + " " + shape_str(st) + " " + red_name(r);
        const Tol tl = tol(dt);
        // The (0, 3) input: its loss and gradient have no elements, by design.
        const test::Empty empty = shape_numel(si) == 0 ? test::Empty::expected : test::Empty::fails;
        EXPECT_TRUE(test::near(y, ref.at("out"), tl.atol, tl.rtol, empty)) << ctx;
        EXPECT_TRUE(test::near(xx.grad(), ref.at("dx"), tl.atol, tl.rtol, empty)) << ctx;
        EXPECT_TENSOR_NEAR(tt.grad(), ref.at("dt"), tl.atol, tl.rtol) << ctx;
      }
    }
  }
}

TEST(MseLoss, SpecialValuesAndEmpty) {
  Tensor x = Tensor::from_vector<float>({INFINITY, INFINITY, NAN, 1e20f, -3.f}, {5});
  Tensor t = Tensor::from_vector<float>({1.f, INFINITY, 0.f, -1e20f, 2.f}, {5});
  for (Reduction r : {Reduction::none, Reduction::sum}) {
    Tensor g = r == Reduction::none ? Tensor::ones({5}) : Tensor::scalar(1.0);
    auto ref = torch_ref("loss.mse_loss", {{"x", x}, {"t", t}, {"g", g}}, {{"reduction", red_name(r)}});
    EXPECT_TENSOR_NEAR(mse_loss(x, t, r), ref.at("out"), 0, 1e-6) << red_name(r);
  }
  Tensor e = Tensor::zeros({0, 3});
  auto ref = torch_ref("loss.mse_loss", {{"x", e}, {"t", e}, {"g", Tensor::scalar(1.0)}}, {{"reduction", "mean"}});
  EXPECT_TENSOR_NEAR(mse_loss(e, e), ref.at("out"), 0, 0) << "mean of nothing";
}

TEST(MseLoss, FiniteDifferences) {
  Generator g(422);
  Tensor x = randn({3, 4}, g, DType::f64), t = randn({4}, g, DType::f64);
  for (Reduction r : {Reduction::none, Reduction::mean, Reduction::sum})
    EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return mse_loss(in[0], in[1], r); }, {x, t}))
        << red_name(r);
}

TEST(MseLoss, Errors) {
  EXPECT_EQ(error_of([&] { mse_loss(Tensor::zeros({3}), Tensor::zeros({3}, DType::f64)); }),
            "mse_loss: input and target dtypes differ (f32 and f64); convert one with .to()");
  EXPECT_EQ(error_of([&] { mse_loss(Tensor::zeros({2, 3}), Tensor::zeros({4})); }),
            "mse_loss: shapes [2, 3] and [4] do not broadcast (dim 1: 3 vs 4)");
  EXPECT_EQ(error_of([&] { mse_loss(Tensor::zeros({3}, DType::i64), Tensor::zeros({3}, DType::i64)); }),
            "mse_loss: expected a f32 or f64 input, got i64");
}

// Softmax and log-softmax: forward + backward against PyTorch on seeded inputs, every ISA path of
// the f32 kernels against the reference kernel at sizes around the vector widths, special
// values as PyTorch, gradients against finite differences in f64, error messages.
#include <gtest/gtest.h>

#include <cmath>

#include "attn/attn.h"
#include "attn/ops/softmax.h"
#include "backend/reference/norm_reference.h"
#include "errors.h"
#include "isa.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::torch_ref;

namespace {

Tensor apply(bool log, const Tensor& x, int64_t dim) { return log ? log_softmax(x, dim) : softmax(x, dim); }
const char* name(bool log) { return log ? "log_softmax" : "softmax"; }

// log_softmax' dx = dy - exp(y) sum(dy): exp(y) carries y's rounding (~1e-7 relative) times
// |sum(dy)| over the row, which grows with the row length.
double bwd_atol(bool log, const Tensor& dy) {
  if (!log) return 1e-6;
  Tensor s = abs(sum(dy, {-1}));
  return 1e-6 * (1.0 + max(s).item());
}

// Sizes below, at, between and above the 8- and 16-lane widths (primes among them).
const int64_t kSizes[] = {1, 2, 3, 5, 7, 8, 9, 13, 15, 16, 17, 23, 31, 32, 33, 47, 64, 97, 197, 768, 1023};

}  // namespace

TEST(Softmax, MatchesTorchLastDim) {
  Generator g(101);
  const std::vector<Shape> shapes = {{8, 197, 768}, {128, 50, 192}, {3, 7}, {4, 1}, {6, 5},
                                     {3, 17}, {2, 33}, {2, 1023}, {5}};
  for (bool log : {false, true})
    for (const Shape& s : shapes) {
      Tensor x = randn(s, g) * 3.0;
      Tensor gout = randn(s, g);
      auto ref = torch_ref("norm.softmax", {{"x", x}, {"g", gout}}, {{"log", log}, {"dim", -1}});
      Tensor xx = x.clone().requires_grad_();
      Tensor y = apply(log, xx, -1);
      y.backward(gout);
      EXPECT_TENSOR_NEAR(y, ref.at("out"), 1e-6, 1e-5) << name(log) << " " << shape_str(s);
      EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), bwd_atol(log, gout), 1e-5) << name(log) << " " << shape_str(s);
    }
}

TEST(Softmax, MatchesTorchAnyDim) {
  Generator g(102);
  for (DType dt : {DType::f32, DType::f64})
    for (bool log : {false, true})
      for (int64_t dim : {0, 1, 2, -2}) {
        Tensor x = randn({4, 5, 6}, g, dt) * 2.0;
        Tensor gout = randn({4, 5, 6}, g, dt);
        auto ref = torch_ref("norm.softmax", {{"x", x}, {"g", gout}}, {{"log", log}, {"dim", dim}});
        Tensor xx = x.clone().requires_grad_();
        Tensor y = apply(log, xx, dim);
        y.backward(gout);
        const double tol = dt == DType::f32 ? 1e-6 : 1e-12;
        EXPECT_TENSOR_NEAR(y, ref.at("out"), tol, tol) << name(log) << " dim " << dim;
        EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), tol, tol) << name(log) << " dim " << dim;
      }
}

TEST(Softmax, NonContiguousInput) {
  Generator g(103);
  Tensor x = randn({7, 9}, g).t();   // (9, 7), strided
  for (bool log : {false, true}) EXPECT_TENSOR_NEAR(apply(log, x, -1), apply(log, x.contiguous(), -1), 0, 0);
}

TEST(Softmax, EveryIsaMatchesReference) {
  test::IsaRestore restore;
  Generator g(104);
  for (int64_t n : kSizes) {
    const int64_t rows = 3;
    Tensor x = randn({rows, n}, g) * 4.0;
    Tensor dy = randn({rows, n}, g);
    for (bool log : {false, true}) {
      Tensor ry = Tensor::empty({rows, n}), rdx = Tensor::empty({rows, n});
      reference::softmax_forward<float>(x.data<float>(), ry.data<float>(), rows, n, 1, log);
      reference::softmax_backward<float>(dy.data<float>(), ry.data<float>(), rdx.data<float>(), rows, n, 1, log);
      for (Isa isa : test::supported_isas()) {
        set_isa(isa);
        Tensor xx = x.clone().requires_grad_();
        Tensor y = apply(log, xx, -1);
        y.backward(dy);
        // f32 rounds x - max (|x| up to ~15 here): ~1e-6 absolute in log_softmax, relative in softmax.
        EXPECT_TENSOR_NEAR(y, ry, log ? 4e-6 : 1e-7, 1e-5) << name(log) << " n=" << n << " isa " << isa_name(isa);
        EXPECT_TENSOR_NEAR(xx.grad(), rdx, bwd_atol(log, dy), 1e-5) << name(log) << " n=" << n << " isa " << isa_name(isa);
      }
    }
  }
}

TEST(Softmax, SpecialValuesAsTorch) {
  test::IsaRestore restore;
  const float inf = INFINITY, nan = NAN;
  // Rows of 19 (a vector and a tail at both widths): the special value sits in the body or tail.
  std::vector<std::vector<std::pair<int, float>>> rows = {
      {{0, inf}},                 // +inf: NaN row
      {{17, inf}},                // +inf in the tail
      {{3, nan}},                 // NaN: NaN row
      {{18, nan}},
      {{0, -inf}, {18, -inf}},    // some -inf: zero probability, finite row
      {{2, 1e30f}, {5, -1e30f}},  // huge values stay finite
      {{0, 3e38f}, {1, 3e38f}},
      {{4, -3e38f}},
  };
  std::vector<float> data;
  for (auto& r : rows) {
    std::vector<float> row(19);
    for (int i = 0; i < 19; ++i) row[size_t(i)] = float(i % 5) - 2.f;
    for (auto [i, v] : r) row[size_t(i)] = v;
    data.insert(data.end(), row.begin(), row.end());
  }
  std::vector<float> all_neg_inf(19, -inf);   // all -inf: NaN row
  data.insert(data.end(), all_neg_inf.begin(), all_neg_inf.end());
  const int64_t nrows = int64_t(rows.size()) + 1;
  Tensor x = Tensor::from_vector<float>(data, {nrows, 19});
  Tensor gout = Tensor::ones({nrows, 19});
  for (bool log : {false, true}) {
    auto ref = torch_ref("norm.softmax", {{"x", x}, {"g", gout}}, {{"log", log}, {"dim", -1}});
    for (Isa isa : test::supported_isas()) {
      set_isa(isa);
      EXPECT_TENSOR_NEAR(apply(log, x, -1), ref.at("out"), 1e-6, 1e-6) << name(log) << " isa " << isa_name(isa);
    }
  }
}

TEST(Softmax, LargeInputsStayFinite) {
  Generator g(105);
  Tensor x = randn({4, 37}, g) * 1e4;
  for (bool log : {false, true}) {
    std::vector<float> y = apply(log, x, -1).to_vector<float>();
    for (float v : y) EXPECT_TRUE(std::isfinite(v)) << name(log);
  }
  Tensor p = softmax(x, -1);
  Tensor s = sum(p, {-1});
  EXPECT_TENSOR_NEAR(s, Tensor::ones({4}), 1e-6, 0);
}

TEST(Softmax, EmptyAndScalar) {
  EXPECT_EQ(softmax(Tensor::zeros({0, 5}), -1).shape(), (Shape{0, 5}));
  EXPECT_EQ(softmax(Tensor::scalar(3.0), 0).item(), 1.0);
  EXPECT_EQ(log_softmax(Tensor::scalar(3.0), -1).item(), 0.0);
}

TEST(Softmax, FiniteDifferences) {
  Generator g(106);
  for (bool log : {false, true})
    for (int64_t dim : {-1, 0, 1}) {
      Tensor x = randn({3, 4, 5}, g, DType::f64);
      EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return apply(log, in[0], dim); }, {x}))
          << name(log) << " dim " << dim;
    }
}

TEST(Softmax, ErrorMessages) {
  EXPECT_EQ(error_of([&] { softmax(Tensor::zeros({3, 7}), 2); }), "softmax: dim 2 is out of range for shape [3, 7]");
  EXPECT_EQ(error_of([&] { log_softmax(Tensor::zeros({3, 7}), -3); }),
            "log_softmax: dim -3 is out of range for shape [3, 7]");
  EXPECT_EQ(error_of([&] { softmax(Tensor::zeros({3, 7}, DType::i64)); }),
            "softmax: expected a f32 or f64 tensor, got i64");
  EXPECT_EQ(error_of([&] { softmax(Tensor()); }), "softmax: expected a tensor, got an undefined one");
}

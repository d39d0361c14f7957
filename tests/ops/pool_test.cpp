// max_pool2d, avg_pool2d, adaptive_avg_pool2d against PyTorch (forward + backward) with padding,
// strides, overlapping windows, ties and special values; finite differences in f64; errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "attn/attn.h"
#include "attn/ops/pool.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::torch_ref;

namespace {

struct WinCase {
  Shape x;
  Pair kernel, stride, padding;
};

const WinCase kWin[] = {
    {{2, 3, 8, 8}, {2, 2}, {0, 0}, {0, 0}},      // stride = kernel
    {{2, 3, 13, 11}, {3, 3}, {2, 2}, {1, 1}},    // odd sizes, padding
    {{1, 5, 7, 9}, {3, 2}, {1, 2}, {1, 1}},      // overlapping rows
    {{3, 2, 5, 17}, {2, 5}, {3, 1}, {0, 2}},     // strides larger than kernel rows
    {{4, 9, 10}, {4, 4}, {3, 3}, {2, 2}},        // unbatched (C, H, W)
    {{2, 4, 31, 29}, {3, 3}, {1, 1}, {1, 1}},
};

nlohmann::json win_args(const char* op, const WinCase& c, bool cip = true) {
  nlohmann::json a;
  a["op"] = op;
  a["kernel"] = {c.kernel[0], c.kernel[1]};
  a["stride"] = {c.stride[0] == 0 ? c.kernel[0] : c.stride[0], c.stride[1] == 0 ? c.kernel[1] : c.stride[1]};
  a["padding"] = {c.padding[0], c.padding[1]};
  a["count_include_pad"] = cip;
  return a;
}

// Runs op on a grad-requiring copy of x, backward with g; returns {out, dx}.
template <class F>
std::pair<Tensor, Tensor> run(F&& op, const Tensor& x, Generator& gen) {
  Tensor xx = x.clone().requires_grad_();
  Tensor y = op(xx);
  Tensor g = randn(y.shape(), gen, x.dtype());
  y.backward(g);
  return {y, xx.grad()};
}

}  // namespace

TEST(Pool, MaxMatchesTorch) {
  Generator gen(201);
  for (const WinCase& c : kWin)
    for (DType dt : {DType::f32, DType::f64}) {
      Tensor x = randn(c.x, gen, dt);
      Tensor xx = x.clone().requires_grad_();
      Tensor y = max_pool2d(xx, c.kernel, c.stride, c.padding);
      Tensor g = randn(y.shape(), gen, dt);
      y.backward(g);
      auto ref = torch_ref("conv.pool", {{"x", x}, {"g", g}}, win_args("max", c));
      const std::string ctx = shape_str(c.x) + " " + dtype_name(dt);
      EXPECT_TENSOR_NEAR(y, ref.at("out"), 0, 0) << ctx;
      EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), 1e-6, 1e-6) << ctx;
    }
}

TEST(Pool, MaxTiesAndSpecialValuesAsTorch) {
  // Ties (integers in a small range), -inf windows, NaN (propagates; gradient to the last NaN),
  // +inf and huge values.
  Generator gen(202);
  Tensor x = (rand({2, 3, 9, 10}, gen) * 3.0).to(DType::i64).to(DType::f32);
  float* p = x.data<float>();
  p[0] = p[1] = p[10] = p[11] = -INFINITY;
  p[22] = NAN;
  p[23] = NAN;
  p[40] = INFINITY;
  p[60] = 3e38f;
  p[61] = -3e38f;
  for (const WinCase& c : {WinCase{{2, 3, 9, 10}, {2, 2}, {0, 0}, {0, 0}}, WinCase{{2, 3, 9, 10}, {3, 3}, {2, 2}, {1, 1}}}) {
    Tensor xx = x.clone().requires_grad_();
    Tensor y = max_pool2d(xx, c.kernel, c.stride, c.padding);
    Tensor g = randn(y.shape(), gen);
    y.backward(g);
    auto ref = torch_ref("conv.pool", {{"x", x}, {"g", g}}, win_args("max", c));
    EXPECT_TENSOR_NEAR(y, ref.at("out"), 0, 0);
    EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), 1e-6, 1e-6);
  }
}

TEST(Pool, AvgMatchesTorch) {
  Generator gen(203);
  for (const WinCase& c : kWin)
    for (bool cip : {true, false})
      for (DType dt : {DType::f32, DType::f64}) {
        Tensor x = randn(c.x, gen, dt);
        Tensor xx = x.clone().requires_grad_();
        Tensor y = avg_pool2d(xx, c.kernel, c.stride, c.padding, cip);
        Tensor g = randn(y.shape(), gen, dt);
        y.backward(g);
        auto ref = torch_ref("conv.pool", {{"x", x}, {"g", g}}, win_args("avg", c, cip));
        const double tol = dt == DType::f32 ? 1e-6 : 1e-12;
        const std::string ctx = shape_str(c.x) + " " + dtype_name(dt) + (cip ? " count_include_pad" : "");
        EXPECT_TENSOR_NEAR(y, ref.at("out"), tol, tol) << ctx;
        EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), tol, tol) << ctx;
      }
}

TEST(Pool, AvgSpecialValuesAsTorch) {
  Generator gen(204);
  Tensor x = randn({1, 2, 7, 7}, gen);
  float* p = x.data<float>();
  p[3] = NAN;
  p[20] = INFINITY;
  p[21] = -INFINITY;
  p[60] = 3e38f;
  p[61] = 3e38f;   // the window sum overflows f32: inf, as torch (which sums in f32)
  const WinCase c{{1, 2, 7, 7}, {3, 3}, {2, 2}, {1, 1}};
  Tensor g = Tensor::ones({1, 2, 4, 4});
  auto ref = torch_ref("conv.pool", {{"x", x}, {"g", g}}, win_args("avg", c));
  EXPECT_TENSOR_NEAR(avg_pool2d(x, c.kernel, c.stride, c.padding), ref.at("out"), 1e-6, 1e-6);
  nlohmann::json a;
  a["op"] = "adaptive_avg";
  a["output_size"] = {3, 4};
  auto ref2 = torch_ref("conv.pool", {{"x", x}, {"g", Tensor::ones({1, 2, 3, 4})}}, a);
  EXPECT_TENSOR_NEAR(adaptive_avg_pool2d(x, {3, 4}), ref2.at("out"), 1e-6, 1e-6);
}

TEST(Pool, AdaptiveAvgMatchesTorch) {
  Generator gen(205);
  struct A { Shape x; Pair out; };
  for (const A& c : {A{{2, 3, 8, 8}, {1, 1}}, A{{2, 3, 13, 11}, {5, 3}}, A{{1, 4, 7, 7}, {7, 7}},
                     A{{2, 2, 5, 6}, {8, 9}} /* upsampling: windows overlap */, A{{3, 10, 17}, {4, 6}}})
    for (DType dt : {DType::f32, DType::f64}) {
      Tensor x = randn(c.x, gen, dt);
      Tensor xx = x.clone().requires_grad_();
      Tensor y = adaptive_avg_pool2d(xx, c.out);
      Tensor g = randn(y.shape(), gen, dt);
      y.backward(g);
      nlohmann::json a;
      a["op"] = "adaptive_avg";
      a["output_size"] = {c.out[0], c.out[1]};
      auto ref = torch_ref("conv.pool", {{"x", x}, {"g", g}}, a);
      const double tol = dt == DType::f32 ? 1e-6 : 1e-12;
      const std::string ctx = shape_str(c.x) + " -> " + shape_str({c.out[0], c.out[1]}) + " " + dtype_name(dt);
      EXPECT_TENSOR_NEAR(y, ref.at("out"), tol, tol) << ctx;
      EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), tol, tol) << ctx;
    }
}

TEST(Pool, FiniteDifferencesF64) {
  Generator gen(206);
  // Distinct values so the max is not at a kink.
  Tensor x = randperm(2 * 3 * 7 * 6, gen).to(DType::f64).reshape({2, 3, 7, 6}) * 0.1;
  EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& in) { return max_pool2d(in[0], {3, 2}, {2, 1}, {1, 1}); }, {x}));
  Tensor z = randn({2, 3, 7, 6}, gen, DType::f64);
  EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& in) { return avg_pool2d(in[0], {3, 3}, {2, 2}, {1, 1}); }, {z}));
  EXPECT_TRUE(test::gradcheck(
      [](const std::vector<Tensor>& in) { return avg_pool2d(in[0], {3, 2}, {1, 2}, {1, 1}, false); }, {z}));
  EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& in) { return adaptive_avg_pool2d(in[0], {4, 5}); }, {z}));
}

TEST(Pool, ErrorMessages) {
  Tensor x = Tensor::zeros({2, 3, 4, 4});
  EXPECT_EQ(error_of([&] { max_pool2d(Tensor::zeros({28, 28}), {2, 2}); }),
            "max_pool2d: expected input with 3 dims (C, H, W) or 4 dims (N, C, H, W), got shape [28, 28]");
  EXPECT_EQ(error_of([&] { avg_pool2d(x, {3, 3}, {1, 1}, {2, 2}); }),
            "avg_pool2d: expected padding between 0 and half the kernel size, got padding [2, 2] for kernel [3, 3]");
  EXPECT_EQ(error_of([&] { max_pool2d(x, {5, 5}); }),
            "max_pool2d: kernel [5, 5] is larger than the padded input [4, 4] (input shape [2, 3, 4, 4], padding [0, 0])");
  EXPECT_EQ(error_of([&] { max_pool2d(x, {0, 2}); }), "max_pool2d: expected kernel >= 1, got [0, 2]");
  EXPECT_EQ(error_of([&] { avg_pool2d(x, {2, 2}, {-1, 1}); }),
            "avg_pool2d: expected stride >= 1 (or {0, 0} for the kernel size), got [-1, 1]");
  EXPECT_EQ(error_of([&] { adaptive_avg_pool2d(x, {0, 2}); }),
            "adaptive_avg_pool2d: expected output_size >= 1, got [0, 2]");
  EXPECT_EQ(error_of([&] { adaptive_avg_pool2d(Tensor::zeros({2, 3, 0, 4}), {1, 1}); }),
            "adaptive_avg_pool2d: expected non-empty spatial dims, got shape [2, 3, 0, 4]");
  EXPECT_EQ(error_of([&] { max_pool2d(Tensor::zeros({2, 3, 4, 4}, DType::i32), {2, 2}); }),
            "max_pool2d: expected a f32 or f64 input, got i32");
}

// conv2d: every path (oneDNN, im2col + GEMM, patch GEMM, naive reference) against PyTorch's
// F.conv2d (forward, dx, dw, db) with stride / padding / dilation / groups and odd sizes; the fast
// paths against the naive oracle at channel counts around the vector widths; finite differences
// in f64; special values; error messages word for word.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "attn/attn.h"
#include "attn/ops/conv.h"
#include "backend/cpu/conv_kernels.h"
#include "backend/reference/conv_reference.h"
#include "errors.h"
#include "isa.h"
#include "torch_ref.h"

using namespace attn;
using test::for_each_isa;
using test::error_of;
using kernels::ConvPath;
using test::torch_ref;

namespace {

struct Case {
  int64_t N, C, H, W, O, kh, kw;
  Pair stride, padding, dilation;
  int64_t groups;
  bool bias;
};

std::string describe(const Case& c) {
  return detail::cat("x [", c.N, ", ", c.C, ", ", c.H, ", ", c.W, "] w [", c.O, ", ", c.C / c.groups, ", ", c.kh,
                     ", ", c.kw, "] stride ", Shape{c.stride[0], c.stride[1]}, " padding ",
                     Shape{c.padding[0], c.padding[1]}, " dilation ", Shape{c.dilation[0], c.dilation[1]},
                     " groups ", c.groups, c.bias ? " bias" : "");
}

const Case kCases[] = {
    {2, 3, 11, 13, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
    {3, 4, 17, 10, 6, 3, 2, {2, 3}, {1, 0}, {1, 1}, 2, true},
    {1, 6, 13, 13, 9, 3, 3, {1, 1}, {2, 2}, {2, 2}, 3, false},
    {2, 5, 9, 7, 5, 3, 3, {2, 2}, {1, 1}, {1, 1}, 5, true},     // depthwise
    {2, 7, 5, 5, 3, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},     // 1x1
    {2, 3, 16, 19, 8, 4, 4, {4, 4}, {0, 0}, {1, 1}, 1, true},   // patch embedding, W cropped
    {2, 3, 23, 29, 4, 5, 5, {2, 2}, {2, 2}, {1, 1}, 1, false},
    {3, 13, 19, 17, 11, 3, 5, {1, 2}, {2, 1}, {2, 1}, 1, true},
    {2, 3, 5, 5, 4, 5, 5, {1, 1}, {0, 0}, {1, 1}, 1, true},     // kernel covers the input: 1x1 output
    {4, 16, 28, 28, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
};

const ConvPath kPaths[] = {ConvPath::automatic, ConvPath::onednn, ConvPath::im2col, ConvPath::patch,
                           ConvPath::reference};
const char* path_name(ConvPath p) {
  switch (p) {
    case ConvPath::automatic: return "automatic";
    case ConvPath::onednn: return "onednn";
    case ConvPath::im2col: return "im2col";
    case ConvPath::patch: return "patch";
    case ConvPath::reference: return "reference";
  }
  return "?";
}

// Forces a conv path for the scope.
struct PathGuard {
  explicit PathGuard(ConvPath p) { kernels::set_conv_path(p); }
  ~PathGuard() { kernels::set_conv_path(ConvPath::automatic); }
};

nlohmann::json conv_args(const Case& c) {
  nlohmann::json a;
  a["stride"] = {c.stride[0], c.stride[1]};
  a["padding"] = {c.padding[0], c.padding[1]};
  a["dilation"] = {c.dilation[0], c.dilation[1]};
  a["groups"] = c.groups;
  return a;
}

Shape out_shape(const Case& c) {
  auto p = kernels::conv_params({c.N, c.C, c.H, c.W}, {c.O, c.C / c.groups, c.kh, c.kw}, c.stride, c.padding,
                                c.dilation, c.groups);
  return {p.N, p.O, p.Ho, p.Wo};
}

}  // namespace

TEST(Conv2d, MatchesTorchOnEveryPath) {
  Generator g(101);
  for (const Case& c : kCases)
    for (DType dt : {DType::f32, DType::f64}) {
      Tensor x = randn({c.N, c.C, c.H, c.W}, g, dt);
      Tensor w = randn({c.O, c.C / c.groups, c.kh, c.kw}, g, dt) * 0.3;
      Tensor b = c.bias ? randn({c.O}, g, dt) : Tensor();
      Tensor gout = randn(out_shape(c), g, dt);
      test::Tensors in{{"x", x}, {"w", w}, {"g", gout}};
      if (c.bias) in["b"] = b;
      auto ref = torch_ref("conv.conv2d", in, conv_args(c));
      const double tol = dt == DType::f32 ? 2e-4 : 1e-10;
      for (ConvPath path : kPaths) {
        PathGuard pg(path);
        Tensor xx = x.clone().requires_grad_(), ww = w.clone().requires_grad_();
        Tensor bb = c.bias ? b.clone().requires_grad_() : Tensor();
        Tensor y = conv2d(xx, ww, bb, c.stride, c.padding, c.dilation, c.groups);
        y.backward(gout);
        const std::string ctx = describe(c) + " " + dtype_name(dt) + " path " + path_name(path);
        EXPECT_TENSOR_NEAR(y, ref.at("out"), tol, tol) << ctx;
        EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), tol, tol) << ctx;
        EXPECT_TENSOR_NEAR(ww.grad(), ref.at("dw"), tol, tol) << ctx;
        if (c.bias) EXPECT_TENSOR_NEAR(bb.grad(), ref.at("db"), tol, tol) << ctx;
      }
    }
}

// The fast paths against the naive oracle (no torch), at channel counts below, at, and above the
// 8- and 16-wide vectors (primes and multiples), on every ISA the CPU has.
TEST(Conv2d, FastPathsMatchNaiveReference) {
  Generator g(102);
  for_each_isa([&](Isa isa) {
    for (int64_t C : {1, 7, 8, 16, 17})
      for (int64_t O : {3, 8, 31, 32}) {
        const Case c{2, C, 9, 11, O, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true};
        Tensor x = randn({c.N, C, c.H, c.W}, g), w = randn({O, C, 3, 3}, g) * 0.2, b = randn({O}, g);
        auto p = kernels::conv_params(x.shape(), w.shape(), c.stride, c.padding, c.dilation, 1);
        Tensor gout = randn({p.N, p.O, p.Ho, p.Wo}, g);
        Tensor y_ref = reference::conv2d_forward_naive(x, w, b, p);
        Tensor dx_ref = reference::conv2d_backward_input_naive(gout, w, p);
        Tensor dw_ref = reference::conv2d_backward_weight_naive(gout, x, p);
        for (ConvPath path : {ConvPath::onednn, ConvPath::im2col}) {
          PathGuard pg(path);
          Tensor xx = x.clone().requires_grad_(), ww = w.clone().requires_grad_();
          Tensor y = conv2d(xx, ww, b, c.stride, c.padding, c.dilation, 1);
          y.backward(gout);
          const std::string ctx =
              detail::cat("C ", C, " O ", O, " path ", path_name(path), " isa ", isa_name(isa));
          EXPECT_TENSOR_NEAR(y, y_ref, 1e-4, 1e-4) << ctx;
          EXPECT_TENSOR_NEAR(xx.grad(), dx_ref, 1e-4, 1e-4) << ctx;
          EXPECT_TENSOR_NEAR(ww.grad(), dw_ref, 2e-4, 1e-4) << ctx;
        }
      }
  });
}

TEST(Conv2d, Im2colRoundTripIsAdjoint) {
  // <im2col(x), c> == <x, col2im(c)> for every geometry: col2im is im2col's transpose.
  Generator g(103);
  for (const Case& c : kCases) {
    auto p = kernels::conv_params({c.N, c.C, c.H, c.W}, {c.O, c.C / c.groups, c.kh, c.kw}, c.stride, c.padding,
                                  c.dilation, c.groups);
    Tensor x = randn({c.N, c.C, c.H, c.W}, g, DType::f64);
    Tensor col = randn({p.N, p.groups, p.K(), p.L()}, g, DType::f64);
    const double lhs = sum(kernels::im2col(x, p) * col).item();
    const double rhs = sum(x * kernels::col2im(col, p)).item();
    EXPECT_NEAR(lhs, rhs, 1e-9 * (std::abs(lhs) + 1)) << describe(c);
  }
}

TEST(Conv2d, FiniteDifferencesF64) {
  Generator g(104);
  const Case small[] = {
      {2, 4, 6, 5, 4, 3, 2, {2, 1}, {1, 1}, {1, 2}, 2, true},
      {1, 3, 8, 8, 5, 2, 2, {2, 2}, {0, 0}, {1, 1}, 1, true},   // patch
      {2, 2, 5, 7, 3, 3, 3, {1, 1}, {1, 0}, {1, 1}, 1, false},
  };
  for (const Case& c : small)
    for (ConvPath path : {ConvPath::automatic, ConvPath::im2col, ConvPath::reference}) {
      PathGuard pg(path);
      Tensor x = randn({c.N, c.C, c.H, c.W}, g, DType::f64);
      Tensor w = randn({c.O, c.C / c.groups, c.kh, c.kw}, g, DType::f64);
      Tensor b = c.bias ? randn({c.O}, g, DType::f64) : Tensor();
      EXPECT_TRUE(test::gradcheck(
          [&](const std::vector<Tensor>& in) {
            return conv2d(in[0], in[1], c.bias ? in[2] : Tensor(), c.stride, c.padding, c.dilation, c.groups);
          },
          c.bias ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x, w}))
          << describe(c) << " path " << path_name(path);
    }
}

TEST(Conv2d, SpecialValuesAsTorch) {
  Generator g(105);
  const Case c{2, 3, 7, 8, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true};
  Tensor x = randn({c.N, c.C, c.H, c.W}, g);
  float* px = x.data<float>();
  px[5] = NAN;
  px[40] = INFINITY;
  px[100] = -INFINITY;
  px[200] = 3e38f;   // overflows in the products
  Tensor w = randn({c.O, c.C, 3, 3}, g), b = randn({c.O}, g), gout = randn(out_shape(c), g);
  auto ref = torch_ref("conv.conv2d", {{"x", x}, {"w", w}, {"b", b}, {"g", gout}}, conv_args(c));
  for (ConvPath path : {ConvPath::onednn, ConvPath::im2col, ConvPath::reference}) {
    PathGuard pg(path);
    EXPECT_TENSOR_NEAR(conv2d(x, w, b, c.stride, c.padding), ref.at("out"), 1e-4, 1e-4) << path_name(path);
  }
}

TEST(Conv2d, NonContiguousInputs) {
  Generator g(106);
  Tensor xt = randn({2, 9, 8, 3}, g);   // NHWC storage viewed as NCHW
  Tensor x = xt.permute({0, 3, 1, 2});
  Tensor w = randn({5, 3, 3, 3}, g);
  auto p = kernels::conv_params(x.shape(), w.shape(), {1, 1}, {1, 1}, {1, 1}, 1);
  Tensor expect = reference::conv2d_forward_naive(x.contiguous(), w, Tensor(), p);
  for (ConvPath path : {ConvPath::onednn, ConvPath::im2col}) {
    PathGuard pg(path);
    EXPECT_TENSOR_NEAR(conv2d(x, w, Tensor(), {1, 1}, {1, 1}), expect, 1e-5, 1e-5) << path_name(path);
  }
}

// The ViT patch embedding's token layout: equal to conv2d with stride = kernel, flattened and
// transposed to (N, Ho Wo, O), in values and in every gradient (cropped edges, a non-square
// kernel, f64, an empty batch).
TEST(Conv2d, PatchTokensEqualConvFlattened) {
  Generator g(107);
  struct PCase { Shape x; int64_t O, kh, kw; DType dt; };
  for (const PCase& c : {PCase{{2, 3, 16, 19}, 8, 4, 4, DType::f32}, PCase{{3, 1, 28, 28}, 16, 4, 4, DType::f32},
                         PCase{{2, 5, 8, 9}, 6, 2, 4, DType::f64}, PCase{{0, 3, 8, 8}, 4, 4, 4, DType::f32}}) {
    Tensor x = randn(c.x, g, c.dt), w = randn({c.O, c.x[1], c.kh, c.kw}, g, c.dt) * 0.3, b = randn({c.O}, g, c.dt);
    Tensor x1 = x.clone().requires_grad_(), w1 = w.clone().requires_grad_(), b1 = b.clone().requires_grad_();
    Tensor x2 = x.clone().requires_grad_(), w2 = w.clone().requires_grad_(), b2 = b.clone().requires_grad_();
    Tensor want = conv2d(x1, w1, b1, {c.kh, c.kw}).flatten(2).transpose(1, 2);
    Tensor got = conv2d_patch_tokens(x2, w2, b2);
    const std::string ctx = detail::cat("x ", c.x, " k ", c.kh, "x", c.kw);
    ASSERT_EQ(got.shape(), want.shape()) << ctx;
    const test::Empty empty = c.x[0] == 0 ? test::Empty::expected : test::Empty::fails;   // the batch of 0 images
    EXPECT_TRUE(test::near(got, want, 0, 0, empty)) << ctx;
    Tensor gout = randn(want.shape(), g, c.dt);
    want.backward(gout);
    got.backward(gout);
    EXPECT_TRUE(test::near(x2.grad(), x1.grad(), 1e-6, 1e-6, empty)) << ctx;
    EXPECT_TENSOR_NEAR(w2.grad(), w1.grad(), 1e-6, 1e-6) << ctx;
    EXPECT_TENSOR_NEAR(b2.grad(), b1.grad(), 1e-6, 1e-6) << ctx;
  }
}

TEST(Conv2d, ErrorMessages) {
  Tensor w = Tensor::zeros({8, 4, 3, 3});
  EXPECT_EQ(error_of([&] { conv2d(Tensor::zeros({3, 28, 28}), w); }),
            "conv2d: expected input with 4 dims (N, C, H, W), got shape [3, 28, 28]");
  EXPECT_EQ(error_of([&] { conv2d(Tensor::zeros({2, 4, 5, 5}), Tensor::zeros({8, 4, 3})); }),
            "conv2d: expected weight with 4 dims (O, C/groups, kH, kW), got shape [8, 4, 3]");
  EXPECT_EQ(error_of([&] { conv2d(Tensor::zeros({2, 3, 28, 28}), w); }),
            "conv2d: expected input with 4 channels (weight shape [8, 4, 3, 3], groups 1), got shape [2, 3, 28, 28]");
  EXPECT_EQ(error_of([&] { conv2d(Tensor::zeros({2, 4, 28, 28}), Tensor::zeros({8, 2, 3, 3}), Tensor(), {1, 1},
                                 {0, 0}, {1, 1}, 3); }),
            "conv2d: expected out channels divisible by groups 3, got weight shape [8, 2, 3, 3]");
  EXPECT_EQ(error_of([&] { conv2d(Tensor::zeros({1, 4, 2, 2}), w); }),
            "conv2d: kernel size [3, 3] (dilated) is larger than the padded input [2, 2] (input shape [1, 4, 2, 2], "
            "padding [0, 0])");
  EXPECT_EQ(error_of([&] { conv2d(Tensor::zeros({1, 4, 5, 5}), w, Tensor(), {1, 1}, {0, 0}, {3, 3}); }),
            "conv2d: kernel size [7, 7] (dilated) is larger than the padded input [5, 5] (input shape [1, 4, 5, 5], "
            "padding [0, 0])");
  EXPECT_EQ(error_of([&] { conv2d(Tensor::zeros({1, 4, 5, 5}), w, Tensor::zeros({7})); }),
            "conv2d: expected bias of shape [8], got [7]");
  EXPECT_EQ(error_of([&] { conv2d(Tensor::zeros({1, 4, 5, 5}), w, Tensor(), {0, 1}); }),
            "conv2d: expected stride >= 1, got [0, 1]");
  EXPECT_EQ(error_of([&] { conv2d(Tensor::zeros({1, 4, 5, 5}), w, Tensor(), {1, 1}, {-1, 0}); }),
            "conv2d: expected padding >= 0, got [-1, 0]");
  EXPECT_EQ(error_of([&] { conv2d(Tensor::zeros({1, 4, 5, 5}, DType::f64), w); }),
            "conv2d: input is f64 but weight is f32");
  EXPECT_EQ(error_of([&] { conv2d(Tensor::zeros({1, 4, 5, 5}, DType::i64), w); }),
            "conv2d: expected a f32 or f64 input, got i64");
}

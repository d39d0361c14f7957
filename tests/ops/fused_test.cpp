// Fused bias + GELU and residual add + layer norm, and the vectorised GELU kernels behind
// attn::gelu: against PyTorch (forward + backward) on seeded inputs, every ISA path against the
// reference kernel at sizes around the vector widths, GELU accuracy against double precision,
// special values as PyTorch, finite differences in f64, error messages.
#include <gtest/gtest.h>

#include <cmath>

#include "attn/attn.h"
#include "attn/ops/fused.h"
#include "attn/ops/norm.h"
#include "backend/reference/norm_reference.h"
#include "errors.h"
#include "isa.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::torch_ref;

namespace {

const char* approx_name(GeluApprox a) { return a == GeluApprox::tanh ? "tanh" : "none"; }
const int64_t kSizes[] = {1, 2, 3, 5, 7, 8, 9, 13, 15, 16, 17, 23, 31, 32, 33, 47, 64, 97, 192, 768, 1023};

}  // namespace

TEST(BiasGelu, MatchesTorch) {
  Generator g(301);
  const std::vector<Shape> shapes = {{8, 197, 768}, {128, 50, 192}, {3, 7}, {4, 1}, {6, 5}, {3, 17}, {2, 33}, {2, 1023}};
  for (GeluApprox a : {GeluApprox::none, GeluApprox::tanh})
    for (const Shape& s : shapes) {
      const int64_t C = s.back();
      Tensor x = randn(s, g) * 2.0, b = randn({C}, g), gout = randn(s, g);
      auto ref = torch_ref("norm.bias_gelu", {{"x", x}, {"b", b}, {"g", gout}}, {{"approx", approx_name(a)}});
      Tensor xx = x.clone().requires_grad_(), bb = b.clone().requires_grad_();
      Tensor y = bias_gelu(xx, bb, a);
      y.backward(gout);
      const std::string ctx = shape_str(s) + " " + approx_name(a);
      EXPECT_TENSOR_NEAR(y, ref.at("out"), 1e-6, 1e-5) << ctx;
      // PyTorch's tanh-form derivative is 0 below x ~ -4.4 (1 + tanh rounds to 0); the true one
      // (and ours) is ~1e-6 there.
      EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), a == GeluApprox::tanh ? 1e-5 : 1e-6, 1e-5) << ctx;
      EXPECT_TENSOR_NEAR(bb.grad(), ref.at("db"), 2e-4, 1e-4) << ctx;   // sums over up to 6400 rows
    }
}

TEST(BiasGelu, NoBiasIsGelu) {
  Generator g(302);
  Tensor x = randn({5, 37}, g) * 3.0;
  for (GeluApprox a : {GeluApprox::none, GeluApprox::tanh}) {
    EXPECT_TENSOR_NEAR(bias_gelu(x, Tensor(), a), gelu(x, a), 0, 0) << approx_name(a);
    Tensor b = randn({37}, g);
    EXPECT_TENSOR_NEAR(bias_gelu(x, b, a), gelu(x + b, a), 0, 0) << approx_name(a);
  }
}

TEST(BiasGelu, EveryIsaMatchesReference) {
  test::IsaRestore restore;
  Generator g(303);
  for (int64_t C : kSizes)
    for (GeluApprox a : {GeluApprox::none, GeluApprox::tanh}) {
      const bool tanh = a == GeluApprox::tanh;
      const int64_t rows = 37;
      Tensor x = randn({rows, C}, g) * 3.0, b = randn({C}, g), dy = randn({rows, C}, g);
      Tensor ry = Tensor::empty({rows, C}), rdx = Tensor::empty({rows, C}), rdb = Tensor::empty({C});
      reference::gelu_forward<float>(x.data<float>(), b.data<float>(), ry.data<float>(), rows, C, tanh);
      reference::gelu_backward<float>(dy.data<float>(), x.data<float>(), b.data<float>(), rdx.data<float>(),
                                      rdb.data<float>(), rows, C, tanh);
      Tensor gy = Tensor::empty({rows, C}), gdx = Tensor::empty({rows, C});
      reference::gelu_forward<float>(x.data<float>(), nullptr, gy.data<float>(), rows, C, tanh);
      reference::gelu_backward<float>(dy.data<float>(), x.data<float>(), nullptr, gdx.data<float>(), nullptr, rows,
                                      C, tanh);
      for (Isa isa : test::supported_isas()) {
        set_isa(isa);
        const std::string ctx = "C=" + std::to_string(C) + " " + approx_name(a) + " isa " + isa_name(isa);
        Tensor xx = x.clone().requires_grad_(), bb = b.clone().requires_grad_();
        Tensor y = bias_gelu(xx, bb, a);
        y.backward(dy);
        // Absolute error of gelu' ~1e-7 (it crosses zero), times |dy| <= ~4.
        EXPECT_TENSOR_NEAR(y, ry, 3e-7, 1e-6) << ctx;
        EXPECT_TENSOR_NEAR(xx.grad(), rdx, 1e-6, 1e-6) << ctx;
        EXPECT_TENSOR_NEAR(bb.grad(), rdb, 1e-5, 1e-5) << ctx;
        // The unfused attn::gelu runs the same kernels.
        Tensor x2 = x.clone().requires_grad_();
        Tensor y2 = gelu(x2, a);
        y2.backward(dy);
        EXPECT_TENSOR_NEAR(y2, gy, 3e-7, 1e-6) << "gelu " << ctx;
        EXPECT_TENSOR_NEAR(x2.grad(), gdx, 1e-6, 1e-6) << "gelu " << ctx;
      }
    }
}

// A fine grid of f32 in [-12, 12] against double precision. Relative error of gelu within a few
// ulp where it is well conditioned (x >= -1, and x < -4 where the erfc form is used); on
// [-4, -1] 1/2 + x P(s) cancels (as 1 + erf does in PyTorch), so there the bound is on the
// absolute error. gelu' is bounded in absolute error (it crosses zero).
TEST(Gelu, AccuracyAgainstDouble) {
  test::IsaRestore restore;
  const int64_t n = 240001;
  std::vector<float> xs(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) xs[size_t(i)] = float(-12.0 + 24.0 * double(i) / double(n - 1));
  Tensor x = Tensor::from_vector<float>(xs, {n});
  for (GeluApprox a : {GeluApprox::none, GeluApprox::tanh}) {
    // The oracle in double, from erfc (1 + erf cancels in the tail even in double).
    std::vector<double> ye(xs.size()), ge(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) {
      const double v = xs[i];
      if (a == GeluApprox::none) {
        const double cdf = 0.5 * std::erfc(-v / std::sqrt(2.0)), pdf = std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
        ye[i] = v * cdf;
        ge[i] = cdf + v * pdf;
      } else {
        const double k = std::sqrt(2 / M_PI), u = k * (v + 0.044715 * v * v * v);
        const double s = 1 / (1 + std::exp(-2 * u)), du = k * (1 + 3 * 0.044715 * v * v);
        ye[i] = v * s;
        ge[i] = s + 2 * v * s * (1 - s) * du;
      }
    }
    for (Isa isa : test::supported_isas()) {
      set_isa(isa);
      Tensor xf = x.clone().requires_grad_();
      Tensor y = gelu(xf, a);
      y.backward(Tensor::ones({n}));
      std::vector<float> yf = y.to_vector<float>(), gf = xf.grad().to_vector<float>();
      double rel_core = 0, rel_tail = 0, abs_mid = 0, abs_grad = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double xv = xs[size_t(i)], e = ye[size_t(i)], eg = ge[size_t(i)];
        const double ay = std::abs(double(yf[size_t(i)]) - e), ag = std::abs(double(gf[size_t(i)]) - eg);
        const double rel = e != 0 ? ay / std::abs(e) : ay;
        if (xv >= -1) rel_core = std::max(rel_core, rel);
        else if (xv < -4 && std::abs(e) > 1e-30) rel_tail = std::max(rel_tail, rel);
        else abs_mid = std::max(abs_mid, ay / std::abs(xv));   // the error of Phi(x)
        abs_grad = std::max(abs_grad, ag / std::max(1.0, std::abs(xv)));
      }
      std::printf("gelu(%s) %s: rel err x>=-1 %.3g, x<-4 %.3g; abs err / |x| on [-4,-1] %.3g; grad abs err / max(1,|x|) %.3g\n",
                  approx_name(a), isa_name(isa), rel_core, rel_tail, abs_mid, abs_grad);
      const std::string ctx = std::string(approx_name(a)) + " isa " + isa_name(isa);
      EXPECT_LE(rel_core, 4e-7) << ctx;
      EXPECT_LE(abs_mid, 1.5e-7) << ctx;
      EXPECT_LE(abs_grad, 3e-7) << ctx;
      if (a == GeluApprox::none) EXPECT_LE(rel_tail, 1e-6) << ctx;   // the tanh form's u = k (x + c x^3) rounds
    }
  }
}

TEST(Gelu, SpecialValuesAsTorch) {
  test::IsaRestore restore;
  // 19 values: a vector body and a tail at both widths.
  Tensor x = Tensor::from_vector<float>({0.f, -0.f, INFINITY, -INFINITY, NAN, 100.f, -100.f, 1e30f, -1e30f, 5.f, -5.f,
                                         -6.f, -9.f, -13.f, -20.f, 3e38f, -3e38f, 1e-30f, -1e-30f},
                                        {19});
  Tensor g = Tensor::ones({19});
  for (GeluApprox a : {GeluApprox::none, GeluApprox::tanh}) {
    auto ref = torch_ref("norm.bias_gelu", {{"x", x}, {"g", g}}, {{"approx", approx_name(a)}});
    for (Isa isa : test::supported_isas()) {
      set_isa(isa);
      Tensor xx = x.clone().requires_grad_();
      Tensor y = gelu(xx, a);
      y.backward(g);
      EXPECT_TENSOR_NEAR(y, ref.at("out"), 1e-6, 1e-6) << approx_name(a) << " " << isa_name(isa);
      EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), 1e-6, 1e-6) << approx_name(a) << " " << isa_name(isa);
    }
  }
}

TEST(BiasGelu, FiniteDifferences) {
  Generator g(304);
  Tensor x = randn({3, 5}, g, DType::f64) * 2.0, b = randn({5}, g, DType::f64);
  for (GeluApprox a : {GeluApprox::none, GeluApprox::tanh})
    EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return bias_gelu(in[0], in[1], a); }, {x, b}))
        << approx_name(a);
}

TEST(BiasGelu, ErrorMessages) {
  EXPECT_EQ(error_of([] { bias_gelu(Tensor::zeros({4, 3072}), Tensor::zeros({768})); }),
            "bias_gelu: expected bias of shape [3072], got [768]");
  EXPECT_EQ(error_of([] { bias_gelu(Tensor::zeros({4, 8}), Tensor::zeros({8}, DType::f64)); }),
            "bias_gelu: expected bias of dtype f32, got f64");
  EXPECT_EQ(error_of([] { bias_gelu(Tensor::zeros({4, 8}, DType::i64), Tensor()); }),
            "bias_gelu: expected a f32 or f64 tensor, got i64");
  EXPECT_EQ(error_of([] { bias_gelu(Tensor::scalar(1.0), Tensor::zeros({1})); }),
            "bias_gelu: expected an input with at least 1 dim, got shape []");
}

TEST(AddLayerNorm, MatchesTorch) {
  Generator g(311);
  const std::vector<Shape> shapes = {{8, 197, 768}, {128, 50, 192}, {3, 7}, {4, 1}, {6, 5}, {3, 17}, {2, 33}, {2, 1023}};
  for (const Shape& s : shapes) {
    const int64_t C = s.back();
    Tensor x = randn(s, g), r = randn(s, g) * 2.0, w = randn({C}, g), b = randn({C}, g);
    Tensor gs = randn(s, g), gy = randn(s, g);
    auto ref = torch_ref("norm.add_layer_norm", {{"x", x}, {"r", r}, {"w", w}, {"b", b}, {"gs", gs}, {"gy", gy}},
                         {{"eps", 1e-5}});
    Tensor xx = x.clone().requires_grad_(), rr = r.clone().requires_grad_();
    Tensor ww = w.clone().requires_grad_(), bb = b.clone().requires_grad_();
    auto [sum_out, y] = add_layer_norm(xx, rr, ww, bb);
    (sum(sum_out * gs) + sum(y * gy)).backward();
    const std::string ctx = shape_str(s);
    // With C = 1, x - mean is 0 and rstd = 1/sqrt(eps) = 316 amplifies PyTorch's rounding.
    const double atol = C == 1 ? 2e-4 : 1e-5;
    EXPECT_TENSOR_NEAR(sum_out, ref.at("s"), 0, 0) << ctx;
    EXPECT_TENSOR_NEAR(y, ref.at("out"), atol, 1e-5) << ctx;
    EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), atol, 1e-4) << ctx;
    EXPECT_TENSOR_NEAR(rr.grad(), ref.at("dr"), atol, 1e-4) << ctx;
    EXPECT_TENSOR_NEAR(ww.grad(), ref.at("dw"), 2e-4, 1e-4) << ctx;
    EXPECT_TENSOR_NEAR(bb.grad(), ref.at("db"), 2e-4, 1e-4) << ctx;
  }
}

TEST(AddLayerNorm, EveryIsaMatchesUnfused) {
  test::IsaRestore restore;
  Generator g(312);
  for (int64_t C : kSizes) {
    Tensor x = randn({37, C}, g), r = randn({37, C}, g), w = randn({C}, g), b = randn({C}, g);
    Tensor gy = randn({37, C}, g);
    for (Isa isa : test::supported_isas()) {
      set_isa(isa);
      const std::string ctx = "C=" + std::to_string(C) + " isa " + isa_name(isa);
      Tensor x1 = x.clone().requires_grad_(), r1 = r.clone().requires_grad_(), w1 = w.clone().requires_grad_();
      auto [s1, y1] = add_layer_norm(x1, r1, w1, b);
      y1.backward(gy);
      Tensor x2 = x.clone().requires_grad_(), r2 = r.clone().requires_grad_(), w2 = w.clone().requires_grad_();
      Tensor s2 = x2 + r2;
      Tensor y2 = layer_norm(s2, w2, b);
      y2.backward(gy);
      EXPECT_TENSOR_NEAR(s1, s2, 0, 0) << ctx;
      EXPECT_TENSOR_NEAR(y1, y2, 0, 0) << ctx;   // same kernel on the same s
      EXPECT_TENSOR_NEAR(x1.grad(), x2.grad(), 0, 0) << ctx;
      EXPECT_TENSOR_NEAR(r1.grad(), r2.grad(), 0, 0) << ctx;
      EXPECT_TENSOR_NEAR(w1.grad(), w2.grad(), 0, 0) << ctx;
    }
  }
}

TEST(AddLayerNorm, FiniteDifferences) {
  Generator g(313);
  Tensor x = randn({3, 6}, g, DType::f64), r = randn({3, 6}, g, DType::f64);
  Tensor w = randn({6}, g, DType::f64), b = randn({6}, g, DType::f64);
  Tensor ws = randn({3, 6}, g, DType::f64);
  // Both outputs: f = s * ws + y.
  EXPECT_TRUE(test::gradcheck(
      [&](const std::vector<Tensor>& in) {
        auto [s, y] = add_layer_norm(in[0], in[1], in[2], in[3]);
        return s * ws + y;
      },
      {x, r, w, b}));
}

TEST(AddLayerNorm, ErrorMessages) {
  Tensor x = Tensor::zeros({2, 768});
  EXPECT_EQ(error_of([&] { add_layer_norm(x, Tensor::zeros({2, 512}), Tensor(), Tensor()); }),
            "add_layer_norm: expected residual of shape [2, 768], got [2, 512]");
  EXPECT_EQ(error_of([&] { add_layer_norm(x, Tensor::zeros({2, 768}, DType::f64), Tensor(), Tensor()); }),
            "add_layer_norm: expected residual of dtype f32, got f64");
  EXPECT_EQ(error_of([&] { add_layer_norm(x, x, Tensor::ones({512}), Tensor()); }),
            "add_layer_norm: expected weight of shape [768], got [512]");
  EXPECT_EQ(error_of([&] { add_layer_norm(x, Tensor(), Tensor(), Tensor()); }),
            "add_layer_norm: expected a residual, got an undefined tensor");
}

// The row-map forms equal a row gather and the plain ops, bit for bit (the same row kernel), on every
// ISA; their bf16 results equal the plain ops' bf16 results.
TEST(LayerNormRows, EqualGatherThenLayerNorm) {
  test::IsaRestore restore;
  Generator g(314);
  NoGradGuard ng;
  for (int64_t C : {int64_t(1), int64_t(7), int64_t(16), int64_t(33), int64_t(96), int64_t(768)}) {
    const int64_t n = 45;
    Tensor x = randn({5, 9, C}, g), p = randn({5, 9, C}, g), w = randn({C}, g), b = randn({C}, g);
    std::vector<int64_t> perm(static_cast<size_t>(n)), some = {3, 3, 0, 44, 17};
    for (int64_t i = 0; i < n; ++i) perm[size_t(i)] = (i * 17 + 5) % n;   // 17 is prime to 45
    const Tensor rows = Tensor::from_vector(perm, {n}), few = Tensor::from_vector(some, {5});
    for (Isa isa : test::supported_isas()) {
      set_isa(isa);
      const std::string ctx = "C=" + std::to_string(C) + " isa " + isa_name(isa);
      const Tensor flat = x.view({n, C}), s_ref = x + p;
      for (DType dt : {DType::f32, DType::bf16}) {
        const std::string c2 = ctx + " " + dtype_name(dt);
        auto [s1, y1] = layer_norm_rows(x, Tensor(), few, w, b, 1e-5, dt);
        EXPECT_TENSOR_NEAR(y1.to(DType::f32), layer_norm(index_select(flat, 0, few), w, b, 1e-5, dt).to(DType::f32),
                           0, 0) << c2;
        EXPECT_EQ(s1.data<float>(), x.data<float>()) << "without pending, s is x itself; " << c2;
        auto [s2, y2] = layer_norm_rows(x, p, rows, w, b, 1e-5, dt);
        EXPECT_TENSOR_NEAR(s2, s_ref, 0, 0) << c2;
        EXPECT_TENSOR_NEAR(y2.to(DType::f32),
                           layer_norm(index_select(s_ref.view({n, C}), 0, rows), w, b, 1e-5, dt).to(DType::f32), 0, 0)
            << c2;
        auto [s3, y3] = add_layer_norm_rows(x, y2.to(DType::f32), rows, w, b, 1e-5, dt);
        const auto [s4, y4] = add_layer_norm(x, index_select(y2.to(DType::f32), 0, rows).view(x.shape()), w, b, 1e-5, dt);
        EXPECT_EQ(s3.shape(), x.shape()) << c2;
        EXPECT_TENSOR_NEAR(s3, s4, 0, 0) << c2;
        EXPECT_TENSOR_NEAR(y3.to(DType::f32), y4.to(DType::f32), 0, 0) << c2;
        EXPECT_EQ(y3.dtype(), dt) << c2;
      }
    }
  }
}

TEST(LayerNormRows, ErrorMessages) {
  const Tensor x = Tensor::zeros({4, 8}), rows = Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 3}, {4});
  const Tensor xg = x.clone().requires_grad_();
  EXPECT_EQ(error_of([&] { layer_norm_rows(xg, Tensor(), rows, Tensor(), Tensor()); }),
            "layer_norm_rows: runs for inference, and no gradient flows through it; run under NoGradGuard");
  NoGradGuard ng;
  EXPECT_EQ(error_of([&] { layer_norm_rows(x, Tensor(), Tensor::from_vector(std::vector<int64_t>{0, 4}, {2}), Tensor(),
                                           Tensor()); }),
            "layer_norm_rows: expected row indices in [0, 4), got 4 at position 1");
  EXPECT_EQ(error_of([&] { layer_norm_rows(x, x, Tensor::from_vector(std::vector<int64_t>{0, 1, 1, 3}, {4}), Tensor(),
                                           Tensor()); }),
            "layer_norm_rows: with pending, rows must be a permutation of x's rows; row 1 appears twice");
  EXPECT_EQ(error_of([&] { layer_norm_rows(x, x, Tensor::from_vector(std::vector<int64_t>{0, 1}, {2}), Tensor(),
                                           Tensor()); }),
            "layer_norm_rows: with pending, rows must be a permutation of the 4 rows of x, got 2 indices");
  EXPECT_EQ(error_of([&] { layer_norm_rows(x, Tensor(), Tensor::zeros({4}), Tensor(), Tensor()); }),
            "layer_norm_rows: expected rows, a 1-D i64 tensor of row indices, got f32 of shape [4]");
  EXPECT_EQ(error_of([&] { add_layer_norm_rows(x, Tensor::zeros({3, 4}), rows, Tensor(), Tensor()); }),
            "add_layer_norm_rows: expected residual f32 with a last dim of 8, got f32 of shape [3, 4]");
  EXPECT_EQ(error_of([&] { add_layer_norm_rows(x, Tensor::zeros({2, 8}), rows, Tensor(), Tensor()); }),
            "add_layer_norm_rows: expected row indices in [0, 2), got 2 at position 2");
  EXPECT_EQ(error_of([&] { add_layer_norm_rows(x, x, rows.slice(0, 0, 3), Tensor(), Tensor()); }),
            "add_layer_norm_rows: expected one row index per row of x (4), got 3");
  EXPECT_EQ(error_of([&] { add_layer_norm_rows(x.to(DType::f64), x, rows, Tensor(), Tensor()); }),
            "add_layer_norm_rows: expected an f32 input, got f64");
}

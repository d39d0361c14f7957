// bf16 mixed precision (AutocastBf16Guard): linear and matmul of f32 operands run their GEMMs on
// bf16-rounded operands with f32 sums, forward and both backward products, and give f32 results and
// gradients. Checked against the f32 ops on the rounded operands (tight: the same products, only the
// summation order differs), against PyTorch's CPU autocast (within bf16's rounding: PyTorch's results
// are bf16), and, on a CPU without a native bf16 matmul, to be the plain f32 ops.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attn/attn.h"
#include "attn/autograd/grad_mode.h"
#include "attn/models/vit.h"
#include "attn/ops/matmul.h"
#include "torch_ref.h"

using namespace attn;

namespace {

Tensor rounded(const Tensor& t) { return t.to(DType::bf16).to(DType::f32); }
double max_abs(const Tensor& t) { return max(abs(t)).item(); }
double max_abs_diff(const Tensor& a, const Tensor& b) { return max(abs(a - b)).item(); }

struct LinearRun {
  Tensor y, dx, dw, db;
};

LinearRun run_linear(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& dy, bool mixed) {
  const Tensor xl = x.clone().requires_grad_(), wl = w.clone().requires_grad_(), bl = b.clone().requires_grad_();
  Tensor y;
  {
    const AutocastBf16Guard guard(mixed);
    y = linear(xl, wl, bl);
  }
  y.backward(dy);
  return {y.detach(), xl.grad(), wl.grad(), bl.grad()};
}

}  // namespace

TEST(Autocast, LinearIsTheProductOfRoundedOperands) {
  Generator g(41);
  // 197 x 768 -> 2304 (a ViT-B projection); 65 x 1024 -> 96 (a K of 1024: the backward's padded copy).
  for (auto [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{197, 768, 2304}, {65, 1024, 96}, {3, 5, 7}}) {
    const Tensor x = randn({M, K}, g), w = randn({N, K}, g) * 0.05, b = randn({N}, g), dy = randn({M, N}, g);
    const LinearRun mixed = run_linear(x, w, b, dy, true);
    const std::string ctx = std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N);
    EXPECT_EQ(mixed.y.dtype(), DType::f32) << ctx;
    EXPECT_EQ(mixed.dx.dtype(), DType::f32) << ctx;
    EXPECT_EQ(mixed.dw.dtype(), DType::f32) << ctx;
    if (!bf16_gemm_native_available()) {   // autocast is off here: the f32 op, bit for bit
      const LinearRun plain = run_linear(x, w, b, dy, false);
      EXPECT_TENSOR_NEAR(mixed.y, plain.y, 0, 0) << ctx;
      EXPECT_TENSOR_NEAR(mixed.dw, plain.dw, 0, 0) << ctx;
      continue;
    }
    // The same products in f32 on the rounded operands (dy rounded for the two backward products, not
    // for the bias gradient): equal up to the order of the f32 sums.
    const LinearRun ref = run_linear(rounded(x), rounded(w), b, rounded(dy), false);
    const double tol = 2e-5 * double(K);   // f32 sums of K products of magnitude ~1
    EXPECT_LE(max_abs_diff(mixed.y, ref.y), tol * 0.05 + 1e-5) << ctx;
    EXPECT_LE(max_abs_diff(mixed.dx, ref.dx), tol * 0.05 + 1e-5) << ctx;
    EXPECT_LE(max_abs_diff(mixed.dw, ref.dw), 2e-5 * double(M) + 1e-5) << ctx;
    EXPECT_TENSOR_NEAR(mixed.db, sum(dy, {0}), 1e-5, 1e-5) << ctx;
    // And not the f32 op's: the rounding is there (bf16 keeps 8 bits of mantissa).
    if (K >= 768) {
      const LinearRun plain = run_linear(x, w, b, dy, false);
      EXPECT_GT(max_abs_diff(mixed.y, plain.y), 1e-3 * max_abs(plain.y)) << ctx;
      EXPECT_GT(max_abs_diff(mixed.dw, plain.dw), 1e-3 * max_abs(plain.dw)) << ctx;
    }
  }
}

TEST(Autocast, MatmulIsTheProductOfRoundedOperands) {
  Generator g(42);
  const Tensor a = randn({2, 3, 49, 32}, g), b = randn({2, 3, 32, 49}, g), dy = randn({2, 3, 49, 49}, g);
  auto run = [&](const Tensor& a0, const Tensor& b0, const Tensor& g0, bool mixed) {
    const Tensor al = a0.clone().requires_grad_(), bl = b0.clone().requires_grad_();
    Tensor y;
    {
      const AutocastBf16Guard guard(mixed);
      y = matmul(al, bl);
    }
    y.backward(g0);
    return std::tuple<Tensor, Tensor, Tensor>{y.detach(), al.grad(), bl.grad()};
  };
  const auto [y, da, db] = run(a, b, dy, true);
  EXPECT_EQ(y.dtype(), DType::f32);
  const auto [ry, rda, rdb] = bf16_gemm_native_available() ? run(rounded(a), rounded(b), rounded(dy), false)
                                                           : run(a, b, dy, false);
  EXPECT_TENSOR_NEAR(y, ry, 1e-4, 1e-5);
  EXPECT_TENSOR_NEAR(da, rda, 1e-4, 1e-5);
  EXPECT_TENSOR_NEAR(db, rdb, 1e-4, 1e-5);
  // Off again after the guard: the f32 product.
  const Tensor plain = matmul(a, b);
  EXPECT_FALSE(autocast_bf16());
  EXPECT_TENSOR_NEAR(plain, matmul(a.to(DType::f64), b.to(DType::f64)).to(DType::f32), 1e-4, 1e-5);
}

TEST(Autocast, MatchesPyTorchAutocast) {
  if (!bf16_gemm_native_available()) GTEST_SKIP() << "no native bf16 matmul on this CPU: autocast stays f32";
  Generator g(43);
  const Tensor x = randn({4, 50, 192}, g), w = randn({576, 192}, g) * 0.07, b = randn({576}, g) * 0.1;
  const Tensor dy = randn({4, 50, 576}, g);
  auto ref = test::torch_ref("autocast.linear", {{"x", x}, {"w", w}, {"b", b}, {"g", dy}});
  EXPECT_EQ(ref.at("out_dtype").to_vector<int64_t>()[0], 1) << "PyTorch's autocast linear gives bf16";
  const LinearRun r = run_linear(x, w, b, dy, true);
  // PyTorch rounds its result and its input gradient to bf16 (relative 2^-8); attn keeps them f32.
  const double ry = max_abs(ref.at("out")), rdx = max_abs(ref.at("dx"));
  EXPECT_LE(max_abs_diff(r.y, ref.at("out")), 4e-3 * ry);
  EXPECT_LE(max_abs_diff(r.dx, ref.at("dx")), 4e-3 * rdx);
  EXPECT_LE(max_abs_diff(r.dw, ref.at("dw")), 4e-3 * max_abs(ref.at("dw")));
  EXPECT_LE(max_abs_diff(r.db, ref.at("db")), 4e-3 * max_abs(ref.at("db")));

  const Tensor a = randn({2, 4, 50, 48}, g), bm = randn({2, 4, 48, 50}, g), gm = randn({2, 4, 50, 50}, g);
  auto mref = test::torch_ref("autocast.matmul", {{"a", a}, {"b", bm}, {"g", gm}});
  const Tensor al = a.clone().requires_grad_(), bl = bm.clone().requires_grad_();
  Tensor y;
  {
    const AutocastBf16Guard guard;
    y = matmul(al, bl);
  }
  y.backward(gm);
  EXPECT_LE(max_abs_diff(y.detach(), mref.at("out")), 4e-3 * max_abs(mref.at("out")));
  EXPECT_LE(max_abs_diff(al.grad(), mref.at("da")), 4e-3 * max_abs(mref.at("da")));
  EXPECT_LE(max_abs_diff(bl.grad(), mref.at("db")), 4e-3 * max_abs(mref.at("db")));
}

// In training under autocast, attention runs its two products as bf16 GEMMs (the naive path, whose
// matmuls autocast rounds) and its softmax in f32: close to the f32 attention, and not equal to it.
TEST(Autocast, AttentionInTrainingRunsItsProductsInBf16) {
  Generator g(44);
  const Tensor q = randn({4, 3, 50, 32}, g), k = randn({4, 3, 50, 32}, g), v = randn({4, 3, 50, 32}, g);
  const Tensor dy = randn({4, 3, 50, 32}, g);
  auto run = [&](bool mixed) {
    const Tensor ql = q.clone().requires_grad_(), kl = k.clone().requires_grad_(), vl = v.clone().requires_grad_();
    Tensor y;
    {
      const AutocastBf16Guard guard(mixed);
      y = scaled_dot_product_attention(ql, kl, vl).out;
    }
    y.backward(dy);
    return std::vector<Tensor>{y.detach(), ql.grad(), kl.grad(), vl.grad()};
  };
  const auto mixed = run(true), plain = run(false);
  const char* names[] = {"out", "dq", "dk", "dv"};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(mixed[i].dtype(), DType::f32) << names[i];
    const double diff = max_abs_diff(mixed[i], plain[i]), scale = max_abs(plain[i]);
    if (!bf16_gemm_native_available()) {   // autocast is off: the f32 attention, bit for bit
      EXPECT_EQ(diff, 0.0) << names[i];
      continue;
    }
    EXPECT_LE(diff, 3e-2 * scale) << names[i];
    EXPECT_GT(diff, 1e-4 * scale) << names[i] << ": no bf16 rounding visible";
  }
}

// Under autocast the producers of a Linear's input may write it in bf16 (the bits the Linear would round
// it to): bias_gelu and add_layer_norm with a bf16 result, gradients and all, equal the f32 forms exactly.
TEST(Autocast, Bf16ResultsOfGeluAndLayerNormAreTheRoundedF32Ones) {
  if (!bf16_gemm_native_available()) GTEST_SKIP() << "no native bf16 matmul on this CPU: autocast stays f32";
  Generator g(45);
  const Tensor x = randn({3, 37, 96}, g), r = randn({3, 37, 96}, g), b = randn({96}, g) * 0.1;
  const Tensor w = randn({96}, g) * 0.2 + 1.0, lb = randn({96}, g) * 0.1, dy = randn({3, 37, 96}, g);
  const Tensor fc = randn({40, 96}, g) * 0.1, dz = randn({3, 37, 40}, g);
  auto raw = [](const Tensor& t) {
    const Tensor c = t.contiguous();
    const auto* p = static_cast<const uint8_t*>(c.raw_data());
    return std::vector<uint8_t>(p, p + c.numel() * int64_t(dtype_size(c.dtype())));
  };
  // gelu(x + b), then a Linear under autocast: the bf16 result and the f32 one give the same bits.
  for (GeluApprox approx : {GeluApprox::none, GeluApprox::tanh}) {
    auto run = [&](DType result) {
      const Tensor xl = x.clone().requires_grad_(), bl = b.clone().requires_grad_(), fl = fc.clone().requires_grad_();
      const AutocastBf16Guard guard;
      const Tensor h = bias_gelu(xl, bl, approx, result);
      linear(h, fl).backward(dz);
      return std::vector<Tensor>{h.to(DType::bf16), xl.grad(), bl.grad(), fl.grad()};
    };
    const auto a = run(DType::bf16), f = run(DType::f32);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(raw(a[i]), raw(f[i])) << "bias_gelu, output " << i;
  }
  // add_layer_norm, likewise.
  auto run = [&](DType result) {
    const Tensor xl = x.clone().requires_grad_(), rl = r.clone().requires_grad_(), wl = w.clone().requires_grad_();
    const Tensor bl = lb.clone().requires_grad_(), fl = fc.clone().requires_grad_();
    const AutocastBf16Guard guard;
    const auto [s, y] = add_layer_norm(xl, rl, wl, bl, 1e-6, result);
    (sum(s * dy) + sum(linear(y, fl) * dz)).backward();
    return std::vector<Tensor>{y.to(DType::bf16), s.detach(), xl.grad(), rl.grad(), wl.grad(), bl.grad(), fl.grad()};
  };
  const auto a = run(DType::bf16), f = run(DType::f32);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(raw(a[i]), raw(f[i])) << "add_layer_norm, output " << i;
  // Outside autocast a bf16 result with a gradient wanted is still refused.
  const Tensor xl = x.clone().requires_grad_();
  EXPECT_THROW(add_layer_norm(xl, r, w, lb, 1e-6, DType::bf16), Error);
}

// A ViT block under autocast: its fused form (the norms writing bf16 for qkv and fc1) gives forward()'s
// result and gradients bit for bit.
TEST(Autocast, VitBlockFusedFormEqualsItsPlainFormBitForBit) {
  if (!bf16_gemm_native_available()) GTEST_SKIP() << "no native bf16 matmul on this CPU: autocast stays f32";
  manual_seed(3);
  models::VitConfig c;
  c.dim = 64;
  c.heads = 4;
  c.mlp_ratio = 4.0;
  models::VitBlock block(c, 0.0);
  block.train();
  Generator g(46);
  const Tensor x = randn({2, 17, 64}, g), dy = randn({2, 17, 64}, g);
  auto run = [&](bool fused) {
    const Tensor xl = x.clone().requires_grad_();
    for (auto p : block.parameters()) p.zero_grad();
    Tensor y;
    {
      const AutocastBf16Guard guard;
      if (fused) {
        const auto [s, m] = block.forward_fused(xl, Tensor());
        y = s + m;
      } else {
        y = block.forward(xl);
      }
    }
    y.backward(dy);
    std::vector<Tensor> out{y.detach(), xl.grad()};
    for (const auto& p : block.parameters()) out.push_back(p.grad().clone());
    return out;
  };
  const auto a = run(true), b = run(false);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].to_vector<float>(), b[i].to_vector<float>()) << "tensor " << i;
}

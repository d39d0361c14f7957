// Inference's fused GEMM paths against their unfused definitions: linear_bias_gelu (the GELU as the packed
// GEMM's epilogue, f32 or bf16 result), linear_bf16_out, and the bf16 attention that
// scaled_dot_product_attention_packed runs on a bf16 qkv (oneDNN's bf16 batched matmuls around an f32
// softmax) against the f32 attention of the same bf16 values; and the layer norms' bf16 results.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "attn/attn.h"
#include "attn/ops/fused.h"

namespace attn {
namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) {
  return max(abs(a.to(DType::f32) - b.to(DType::f32))).item();
}
double max_abs(const Tensor& a) { return max(abs(a.to(DType::f32))).item(); }

// A copy of w, packed where oneDNN has a blocked layout for it (AVX-512: brgemm; pack_linear_weight packs
// only a weight nothing else holds, and leaves it plain where packing does not pay).
Tensor packed(const Tensor& w) {
  Tensor p = w.clone();
  (void)pack_linear_weight(p);
  return p;
}

TEST(GemmEpilogue, LinearBiasGeluMatchesTheUnfusedOpsInF32) {
  Generator g(3);
  const Tensor x = randn({2, 37, 64}, g), w = randn({128, 64}, g) * 0.2, b = randn({128}, g);
  NoGradGuard ng;
  for (GeluApprox a : {GeluApprox::none, GeluApprox::tanh}) {
    SCOPED_TRACE(a == GeluApprox::none ? "erf" : "tanh");
    const Tensor want = bias_gelu(linear(x, w), b, a);
    const Tensor plain = linear_bias_gelu(x, w, b, a);   // unpacked: the unfused ops themselves
    EXPECT_EQ(max_abs_diff(plain, want), 0.0);
    const Tensor wp = packed(w);   // plain where packing does not pay: then the unfused ops again
    const Tensor fused = linear_bias_gelu(x, wp, b, a);
    EXPECT_EQ(fused.dtype(), DType::f32);
    EXPECT_EQ(fused.shape(), want.shape());
    EXPECT_LE(max_abs_diff(fused, want), 2e-5 * std::max(1.0, max_abs(want)));
  }
}

TEST(GemmEpilogue, GradientsTakeTheUnfusedPath) {
  Generator g(4);
  Tensor x = randn({5, 16}, g), w = randn({8, 16}, g), b = randn({8}, g);
  x.requires_grad_();
  const Tensor y = linear_bias_gelu(x, w, b);
  sum(y).backward();
  EXPECT_TRUE(x.grad().defined());
}

TEST(GemmEpilogue, Bf16ResultsAndTheBf16Attention) {
  if (!bf16_gemm_native_available()) GTEST_SKIP() << "no native bf16 matmul on this CPU: the bf16 paths fall back";
  Generator g(5);
  const int64_t B = 2, T = 45, NH = 2, HS = 64, C = NH * HS;
  const Tensor x = randn({B, T, C}, g), w = (randn({3 * C, C}, g) * 0.1).to(DType::bf16), b = randn({3 * C}, g);
  NoGradGuard ng;
  const Tensor wp = packed(w);
  // A CPU with a native bf16 matmul has oneDNN's brgemm kernels, whose blocked layout the weight takes.
  ASSERT_TRUE(wp.is_gemm_packed()) << "the bf16 weight did not pack";
  // linear_bf16_out: the packed bf16 GEMM's result, rounded to bf16.
  const Tensor y = linear_bf16_out(x, wp, b);
  ASSERT_EQ(y.dtype(), DType::bf16);
  const Tensor y32 = linear(x, wp, b);
  EXPECT_EQ(y32.dtype(), DType::f32);
  EXPECT_EQ(max_abs_diff(y, y32.to(DType::bf16)), 0.0);
  // linear_bias_gelu with a bf16 result: GELU of the same GEMM, rounded once.
  const Tensor h = linear_bias_gelu(x, wp, b, GeluApprox::none, DType::bf16);
  ASSERT_EQ(h.dtype(), DType::bf16);
  const Tensor hw = gelu(y32);
  EXPECT_LE(max_abs_diff(h, hw), 1e-2 * std::max(1.0, max_abs(hw)));
  // The bf16 attention on y against the f32 attention of y's values: P rounded to bf16 costs ~3 digits.
  const Tensor got = scaled_dot_product_attention_packed(y, NH);
  ASSERT_EQ(got.dtype(), DType::bf16);
  ASSERT_EQ(got.shape(), (Shape{B, T, C}));
  const Tensor want = scaled_dot_product_attention_packed(y.to(DType::f32), NH);
  EXPECT_LE(max_abs_diff(got, want), 2e-2 * std::max(1.0, max_abs(want)));
  // A mask sends a bf16 qkv to the f32 path: f32 out, the f32 attention of the same values.
  const Tensor mask = Tensor::zeros({B, 1, 1, T});
  const Tensor masked = scaled_dot_product_attention_packed(y, NH, mask);
  EXPECT_EQ(masked.dtype(), DType::f32);
  EXPECT_LE(max_abs_diff(masked, want), 1e-5 * std::max(1.0, max_abs(want)));
}

// layer_norm / add_layer_norm with a bf16 result: the f32 result rounded, bit for bit; inference only.
TEST(GemmEpilogue, LayerNormWritesItsResultInBf16) {
  Generator g(6);
  const Tensor x = randn({3, 70, 96}, g), r = randn({3, 70, 96}, g), w = randn({96}, g), b = randn({96}, g);
  {
    NoGradGuard ng;
    const Tensor y = layer_norm(x, w, b, 1e-6, DType::bf16);
    ASSERT_EQ(y.dtype(), DType::bf16);
    EXPECT_EQ(max_abs_diff(y, layer_norm(x, w, b, 1e-6).to(DType::bf16)), 0.0);
    const auto [s, y2] = add_layer_norm(x, r, w, b, 1e-5, DType::bf16);
    const auto [s32, y32] = add_layer_norm(x, r, w, b, 1e-5);
    ASSERT_EQ(y2.dtype(), DType::bf16);
    EXPECT_EQ(s.dtype(), DType::f32);
    EXPECT_EQ(max_abs_diff(s, s32), 0.0);
    EXPECT_EQ(max_abs_diff(y2, y32.to(DType::bf16)), 0.0);
  }
  Tensor xg = x.clone();
  xg.requires_grad_();
  EXPECT_THROW((void)layer_norm(xg, w, b, 1e-5, DType::bf16), Error);
  NoGradGuard ng;
  EXPECT_THROW((void)layer_norm(x.to(DType::f64), w.to(DType::f64), b.to(DType::f64), 1e-5, DType::bf16), Error);
}

}  // namespace
}  // namespace attn

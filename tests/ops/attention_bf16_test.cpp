// The bf16 attention of a bf16 qkv (scaled_dot_product_attention_packed on a bf16 model's projection):
// attn's own AVX512-BF16 kernel, where the CPU has one, against oneDNN's bf16 batched matmuls around an
// f32 softmax (the path with the avx512 kernels turned off) and against the f32 attention of the same
// bf16 values, over head sizes, odd and single-row sequences and batches; which path ran is read from
// the op profile (the kernel runs no oneDNN GEMM). Swin's window attention on a bf16 qkv: the kernel with
// the relative position bias and the shift mask added, against the f32 window attention.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "attn/attn.h"
#include "attn/core/profile.h"
#include "attn/ops/window_attention.h"

namespace attn {
namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) {
  return max(abs(a.to(DType::f32) - b.to(DType::f32))).item();
}
double max_abs(const Tensor& a) { return max(abs(a.to(DType::f32))).item(); }

struct IsaGuard {
  Isa saved = active_isa();
  ~IsaGuard() { set_isa(saved); }
};

// The attention and the number of oneDNN GEMM calls it made.
std::pair<Tensor, int64_t> run(const Tensor& qkv, int64_t NH) {
  profile::start();
  Tensor out = scaled_dot_product_attention_packed(qkv, NH);
  int64_t gemms = 0;
  for (const auto& op : profile::stop())
    if (std::strcmp(op.name, "gemm (oneDNN)") == 0) gemms += op.calls;
  return {out, gemms};
}

bool kernel_cpu() {
  return kernel_path_available(KernelPath::avx512_bf16) && !kernel_path_available(KernelPath::amx) &&
         bf16_gemm_native_available();
}

struct Case {
  int64_t B, NH, T, HS;
};

TEST(AttentionBf16, KernelMatchesOneDnnAndTheF32Attention) {
  if (!kernel_cpu()) GTEST_SKIP() << "no AVX512-BF16 (or AMX, where oneDNN's attention GEMMs are kept)";
  IsaGuard guard;
  // Head sizes 16 .. 128 (48: pairs not a multiple of 16, packed without the 16 x 16 transposes; 80 and
  // 128: output columns beyond one 64-wide tile); T = 1, odd, a tail of rows and of 16-key blocks.
  const Case cases[] = {{1, 3, 197, 64}, {2, 2, 45, 32}, {1, 1, 1, 64}, {3, 2, 17, 48},
                        {1, 2, 64, 16}, {2, 1, 70, 80}, {1, 2, 33, 128}, {4, 3, 49, 32}};
  Generator g(21);
  NoGradGuard ng;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "B " << c.B << " NH " << c.NH << " T " << c.T << " HS " << c.HS);
    // Scores of a few units, as a trained model's: a peaked softmax, a spread one, both.
    const Tensor qkv = (randn({c.B, c.T, 3 * c.NH * c.HS}, g) * 1.5).to(DType::bf16);
    set_isa(Isa::avx512);
    const auto [got, kernel_gemms] = run(qkv, c.NH);
    set_isa(Isa::avx2);   // the avx512 kernels off: oneDNN's batched matmuls
    const auto [onednn, onednn_gemms] = run(qkv, c.NH);
    set_isa(Isa::avx512);
    EXPECT_EQ(kernel_gemms, 0) << "the kernel did not run";
    EXPECT_EQ(onednn_gemms, 2);
    ASSERT_EQ(got.dtype(), DType::bf16);
    ASSERT_EQ(got.shape(), (Shape{c.B, c.T, c.NH * c.HS}));
    const Tensor want = scaled_dot_product_attention_packed(qkv.to(DType::f32), c.NH);
    const double scale = std::max(1.0, max_abs(want));
    // P and the output rounded to bf16 cost ~3 digits against f32; the two bf16 paths differ by where
    // they normalize (before rounding P, or on the output) and so where a weight rounds the other way.
    EXPECT_LE(max_abs_diff(got, want), 2e-2 * scale);
    EXPECT_LE(max_abs_diff(onednn, want), 2e-2 * scale);
    EXPECT_LE(max_abs_diff(got, onednn), 1.5e-2 * scale);
  }
}

TEST(AttentionBf16, ANonFiniteScoreGivesNaNRowsAsTheF32Attention) {
  if (!kernel_cpu()) GTEST_SKIP() << "no AVX512-BF16 (or AMX, where oneDNN's attention GEMMs are kept)";
  NoGradGuard ng;
  const int64_t B = 1, NH = 1, T = 20, HS = 32;
  Generator g(22);
  Tensor qkv32 = randn({B, T, 3 * HS}, g);
  qkv32.data<float>()[5 * 3 * HS + 3] = std::numeric_limits<float>::quiet_NaN();   // q of row 5
  const Tensor got = scaled_dot_product_attention_packed(qkv32.to(DType::bf16), NH).to(DType::f32);
  const float* p = got.data<float>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t d = 0; d < HS; ++d) EXPECT_EQ(std::isnan(p[t * HS + d]), t == 5) << "row " << t << " col " << d;
}

TEST(AttentionBf16, WindowAttentionWithBiasAndShiftMask) {
  if (!kernel_cpu()) GTEST_SKIP() << "no AVX512-BF16 (or AMX, where oneDNN's attention GEMMs are kept)";
  NoGradGuard ng;
  // Two images of 4 windows of 7 x 7 tokens, 3 heads of 32: the bias per head, the mask per window
  // (w mod 4), -100 across regions as Swin's shift mask.
  const int64_t nW = 4, Bw = 2 * nW, N = 49, NH = 3, HS = 32;
  Generator g(23);
  const Tensor qkv = (randn({Bw, N, 3 * NH * HS}, g) * 1.5).to(DType::bf16);
  const Tensor bias = randn({NH, N, N}, g);
  Tensor mask = Tensor::zeros({nW, N, N});
  float* pm = mask.data<float>();
  for (int64_t w = 1; w < nW; ++w)
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < N; ++j) pm[(w * N + i) * N + j] = (i % w == j % w) ? 0.f : -100.f;
  const Tensor got = window_attention_packed(qkv, NH, bias, mask).out;
  ASSERT_EQ(got.dtype(), DType::bf16) << "the bf16 kernel did not run";
  const Tensor want = window_attention_packed(qkv.to(DType::f32), NH, bias, mask).out;
  EXPECT_LE(max_abs_diff(got, want), 2e-2 * std::max(1.0, max_abs(want)));
  // Without the mask the result differs (the mask is applied), and a gradient or V2 takes the f32 path.
  EXPECT_GT(max_abs_diff(window_attention_packed(qkv, NH, bias).out, want), 0.1);
  WindowAttentionOptions v2;
  v2.logit_scale = Tensor::zeros({NH});
  EXPECT_EQ(window_attention_packed(qkv, NH, bias, mask, v2).out.dtype(), DType::f32);
}

}  // namespace
}  // namespace attn

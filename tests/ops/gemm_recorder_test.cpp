// GemmRecorder and time_gemm_calls (attn bench's GEMM time): a forward pass's linear() and matmul() calls
// are recorded with their shapes, dtypes and weights (f32, packed, int8), attention's two products too,
// nothing else is, recording ends with the recorder, and replaying them times each GEMM.
#include <gtest/gtest.h>

#include "attn/attn.h"
#include "attn/autograd/grad_mode.h"
#include "attn/nn/linear.h"
#include "attn/ops/attention.h"
#include "attn/ops/matmul.h"
#include "attn/ops/quantize.h"
#include "errors.h"

using namespace attn;

TEST(GemmRecorder, RecordsLinearAndMatmulCalls) {
  NoGradGuard ng;
  Generator g(3);
  const Tensor x = randn({2, 5, 16}, g), w = randn({24, 16}, g), b = randn({24}, g);
  Tensor wp = randn({64, 16}, g);
  pack_linear_weight(wp);
  Int8Weight q = quantize_weight_int8(randn({8, 16}, g));
  set_int8_weight_scale(q.weight, q.scale);
  const Tensor a3 = randn({3, 4, 6}, g), b3 = randn({3, 6, 7}, g);
  std::vector<GemmCall> calls;
  {
    GemmRecorder rec;
    linear(x, w, b);
    linear(x, wp);
    linear(x, q.weight);
    matmul(a3, b3);
    (void)(x + x);   // no GEMM
    calls = rec.calls();
    EXPECT_NE(test::error_of([] { GemmRecorder second; }).find("one at a time"), std::string::npos);
  }
  linear(x, w, b);   // after the recorder: not recorded anywhere
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[0].M, 10);
  EXPECT_EQ(calls[0].K, 16);
  EXPECT_EQ(calls[0].N, 24);
  EXPECT_TRUE(calls[0].bias);
  EXPECT_TRUE(calls[0].weight.is_same(w));
  EXPECT_EQ(calls[1].N, 64);
  EXPECT_FALSE(calls[1].bias);
  EXPECT_EQ(calls[2].weight.dtype(), DType::i8);
  EXPECT_FALSE(calls[3].weight.defined());
  EXPECT_EQ(calls[3].batch, 3);
  EXPECT_EQ(calls[3].M, 4);
  EXPECT_EQ(calls[3].K, 6);
  EXPECT_EQ(calls[3].N, 7);
  const double s = time_gemm_calls(calls, 0.01);
  EXPECT_GT(s, 0.0);
  EXPECT_LT(s, 1.0);
  EXPECT_EQ(time_gemm_calls({}, 0.0), 0.0);
}

// Attention's two products (inside the fused kernel, or the naive path's matmuls) count as GEMMs.
TEST(GemmRecorder, RecordsAttentionProducts) {
  NoGradGuard ng;
  Generator g(4);
  const Tensor qkv = randn({3, 10, 3 * 32}, g);
  std::vector<GemmCall> calls;
  {
    GemmRecorder rec;
    scaled_dot_product_attention_packed(qkv, 2, Tensor(), {});
    calls = rec.calls();
  }
  ASSERT_EQ(calls.size(), 2u);
  for (const GemmCall& c : calls) EXPECT_EQ(c.batch * c.M, 3 * 2 * 10);
  EXPECT_EQ(calls[0].K, 16);   // Q Kᵀ over the head size
  EXPECT_EQ(calls[0].N, 10);
  EXPECT_EQ(calls[1].K, 10);   // P V over the keys
  EXPECT_EQ(calls[1].N, 16);
}

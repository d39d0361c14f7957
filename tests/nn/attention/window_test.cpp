// Shifted-window attention against torchvision's ShiftedWindowAttention / ShiftedWindowAttentionV2
// modules in f64 (forward, the input's and every parameter's gradient; the buffers attn computes
// equal torchvision's), on maps that need padding, where the window covers one padded side (no shift
// along it) or both (no shift at all); roll_hw against torch.roll; window_partition / window_reverse.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attn/attn.h"
#include "attn/nn/attention/window.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using nlohmann::json;

namespace {

struct Case {
  int64_t h, w, window, shift;
  bool v2;
};

// f32: the module's fused path (window_attention_packed), against the same f64 reference.
void check(const Case& c, DType dt = DType::f64) {
  const int64_t dim = 12, heads = 3;
  const bool f32 = dt == DType::f32;
  const double atol = f32 ? 2e-4 : 1e-12, rtol = f32 ? 1e-3 : 1e-10;
  SCOPED_TRACE(std::to_string(c.h) + "x" + std::to_string(c.w) + " window " + std::to_string(c.window) + " shift " +
               std::to_string(c.shift) + (c.v2 ? " v2" : " v1"));
  manual_seed(uint64_t(c.h * 31 + c.w));
  const Tensor x = Tensor::randn({2, c.h, c.w, dim}, DType::f64), g = Tensor::randn({2, c.h, c.w, dim}, DType::f64);
  auto ref = test::torch_ref("swin.window_module", {{"x", x}, {"g", g}},
                             {{"seed", 3}, {"dim", dim}, {"heads", heads}, {"window", c.window},
                              {"shift", c.shift}, {"v2", c.v2}});
  nn::ShiftedWindowAttention m({.dim = dim, .num_heads = heads, .window_h = c.window, .window_w = c.window,
                                .shift_h = c.shift, .shift_w = c.shift, .v2 = c.v2});
  m.to(DType::f64);
  io::TensorList sd;
  for (const auto& [k, t] : ref)
    if (k.starts_with("s.")) sd.emplace_back(k.substr(2), t);
  for (const auto& [name, b] : m.named_buffers())
    EXPECT_TENSOR_NEAR(b.to(DType::f64), ref.at("s." + name).to(DType::f64), 0, 0) << name;
  m.load_state_dict(sd);
  m.to(dt);
  Tensor xi = x.to(dt).requires_grad_();
  const Tensor y = m.forward(xi);
  sum(y * g.to(dt)).backward();
  EXPECT_TENSOR_NEAR(y.to(DType::f64), ref.at("y"), atol, rtol);
  EXPECT_TENSOR_NEAR(xi.grad().to(DType::f64), ref.at("dx"), atol, rtol);
  for (const auto& [name, p] : m.named_parameters())
    EXPECT_TENSOR_NEAR(p.grad().to(DType::f64), ref.at("g." + name), atol, rtol) << name;
}

}  // namespace

TEST(WindowAttention, MatchesTorchvisionV1) {
  // 9 x 11: padded to 12 x 12 (window 4); 4 x 10: the window covers the height, so the shift is
  // dropped along it only; 3 x 3: padded to one window, no shift; 8 x 8 unshifted.
  for (const Case& c : std::vector<Case>{{9, 11, 4, 2, false}, {4, 10, 4, 2, false}, {3, 3, 4, 2, false},
                                         {8, 8, 4, 0, false}, {7, 14, 7, 3, false}})
    check(c);
}

TEST(WindowAttention, MatchesTorchvisionV2) {
  for (const Case& c : std::vector<Case>{{9, 11, 4, 2, true}, {4, 10, 4, 2, true}, {8, 8, 4, 0, true}}) check(c);
}

TEST(WindowAttention, FusedF32MatchesTorchvision) {
  for (const Case& c : std::vector<Case>{{9, 11, 4, 2, false}, {4, 10, 4, 2, false}, {7, 14, 7, 3, false},
                                         {9, 11, 4, 2, true}, {8, 8, 4, 0, true}})
    check(c, DType::f32);
}

TEST(WindowAttention, AttentionWeights) {
  // The fused path's probabilities: (B nW, NH, N, N) rows summing to 1; zero across the shift's regions.
  manual_seed(9);
  nn::ShiftedWindowAttention m({.dim = 12, .num_heads = 3, .window_h = 4, .window_w = 4, .shift_h = 2, .shift_w = 2});
  NoGradGuard ng;
  Tensor w;
  m.forward(Tensor::randn({2, 8, 8, 12}), true, &w);
  ASSERT_EQ(w.shape(), Shape({8, 3, 16, 16}));
  EXPECT_TENSOR_NEAR(sum(w, {-1}), Tensor::ones({8, 3, 16}), 1e-5, 0);
  // Window 3 (bottom right of image 0) mixes four regions: token 0 and token 15 lie in different ones.
  EXPECT_LT(w.at({3, 0, 0, 15}), 1e-30);
  // The unfused path (f64 here) gives the same probabilities.
  const Tensor x = Tensor::randn({2, 8, 8, 12});
  m.forward(x, true, &w);
  const Tensor w_again = w;
  m.to(DType::f64);
  Tensor w64;
  m.forward(x.to(DType::f64), true, &w64);
  EXPECT_TENSOR_NEAR(w64.to(DType::f32), w_again, 1e-5, 1e-5);
}

TEST(WindowAttention, Bf16LinearWeights) {
  // bf16 Linear weights keep f32 activations: the fused f32 path runs, close to the f32 module's result.
  manual_seed(4);
  nn::ShiftedWindowAttention m({.dim = 32, .num_heads = 2, .window_h = 7, .window_w = 7, .shift_h = 3, .shift_w = 3});
  NoGradGuard ng;
  const Tensor x = Tensor::randn({2, 14, 21, 32});
  Tensor w32, w16;
  const Tensor y32 = m.forward(x, true, &w32);
  nn::convert_linear_weights_to_bf16(m);
  ASSERT_EQ(m.qkv->weight.dtype(), DType::bf16);
  const Tensor y16 = m.forward(x, true, &w16);
  EXPECT_EQ(y16.dtype(), DType::f32);
  EXPECT_TENSOR_NEAR(y16, y32, 2e-2, 5e-2);
  EXPECT_TENSOR_NEAR(w16, w32, 1e-2, 0);
}

TEST(WindowAttention, RollAndPartition) {
  manual_seed(7);
  const Tensor x = Tensor::randn({2, 5, 7, 3});
  for (auto [a, b] : std::vector<std::pair<int64_t, int64_t>>{{-2, 3}, {4, -6}, {0, 9}}) {
    auto ref = test::torch_ref("swin.roll", {{"x", x}}, {{"shifts", {a, b}}});
    EXPECT_TENSOR_NEAR(nn::roll_hw(x, a, b), ref.at("out"), 0, 0) << a << ", " << b;
  }
  const Tensor z = Tensor::randn({2, 6, 9, 4});
  const Tensor w = nn::window_partition(z, 3, 3);
  EXPECT_EQ(w.shape(), Shape({12, 9, 4}));
  EXPECT_EQ(w.select(0, 7).select(0, 4).at({1}), z.at({1, 1, 4, 1}));   // batch 1, window (0, 1): centre (1, 4)
  EXPECT_TENSOR_NEAR(nn::window_reverse(w, 2, 6, 9, 3, 3), z, 0, 0);
  EXPECT_EQ(test::error_of([&] { nn::window_partition(z, 4, 3); }),
            "window_partition: expected (B, H, W, C) with H, W multiples of the window (4, 3), got shape [2, 6, 9, 4]");
}

TEST(WindowAttention, Bf16ModelInInference) {
  // Packed bf16 weights in inference: the projection's result in bf16 and (with AVX512-BF16) the bf16
  // attention kernel, from f32 windows or from bf16 ones (a bf16 layer norm's); close to the f32 module.
  manual_seed(5);
  nn::ShiftedWindowAttention m({.dim = 64, .num_heads = 2, .window_h = 7, .window_w = 7, .shift_h = 3, .shift_w = 3});
  NoGradGuard ng;
  const Tensor x = Tensor::randn({2, 14, 21, 64});
  const Tensor y32 = m.forward(x);
  nn::convert_linear_weights_to_bf16(m);
  nn::pack_linear_weights(m);
  if (bf16_gemm_native_available()) EXPECT_TRUE(linear_reads_bf16(m.qkv->weight)) << "qkv's weight did not pack";
  const Tensor y16 = m.forward(x);
  EXPECT_EQ(y16.dtype(), DType::f32);
  EXPECT_TENSOR_NEAR(y16, y32, 3e-2, 5e-2);
  if (linear_reads_bf16(m.qkv->weight)) {
    const Tensor yb = m.forward(x.to(DType::bf16));
    EXPECT_EQ(yb.dtype(), DType::f32);
    EXPECT_TENSOR_NEAR(yb, y32, 3e-2, 5e-2);
  }
  // The weights asked for: the f32 attention, the same result within bf16's rounding.
  Tensor w;
  EXPECT_TENSOR_NEAR(m.forward(x, true, &w), y32, 3e-2, 5e-2);
}

TEST(WindowAttention, RelativePositionBiasFollowsTheTableInInference) {
  // Inference reuses the gathered bias while the table holds the same values; a change in place is seen.
  manual_seed(6);
  nn::ShiftedWindowAttention m({.dim = 12, .num_heads = 3, .window_h = 4, .window_w = 4, .shift_h = 2, .shift_w = 2});
  Tensor table;
  for (auto& [name, p] : m.named_parameters())
    if (name == "relative_position_bias_table") table = p;
  ASSERT_TRUE(table.defined());
  NoGradGuard ng;
  const Tensor b1 = m.relative_position_bias().clone();
  EXPECT_TENSOR_NEAR(m.relative_position_bias(), b1, 0, 0);
  table.data<float>()[0] += 1.f;   // row 0 of the table, head 0
  const Tensor b2 = m.relative_position_bias();
  const int64_t N = 16;
  // Query token 0 (0, 0) and key token 15 (3, 3): row 0 of the table (torchvision's index
  // (0 - 3 + 3) * 7 + (0 - 3 + 3)); the other heads and pairs keep theirs.
  EXPECT_FLOAT_EQ(b2.at({0, 0, 15}), b1.at({0, 0, 15}) + 1.f);
  EXPECT_FLOAT_EQ(b2.at({1, 0, 15}), b1.at({1, 0, 15}));
  EXPECT_FLOAT_EQ(b2.at({0, 15, 0}), b1.at({0, 15, 0}));
  EXPECT_EQ(b2.shape(), Shape({3, N, N}));
}

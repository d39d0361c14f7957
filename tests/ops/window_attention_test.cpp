// The fused window-attention op against PyTorch (tests/golden/gen/swin.py window_op, f64), on every
// ISA this CPU runs (scalar and AVX2 included, the fallback paths): forward, weights and the gradients
// of qkv, the bias and V2's logit scale (one head above the clamp), V1 and V2, with and without
// torchvision's shift mask, batch 2, odd window counts (3 x 3, 3 x 1), N 49, 16 and 144, head sizes 32,
// 16 and 12 (not a multiple of the vector width: the packed output path); a zero query row (V2's norm
// clamp); the weights without a gradient; bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "attn/attn.h"
#include "attn/nn/attention/window.h"
#include "attn/ops/window_attention.h"
#include "errors.h"
#include "isa.h"
#include "torch_ref.h"

using namespace attn;

namespace {

struct Case {
  int64_t B, nwh, nww, win, NH, HS;
  bool shift, v2;
};

std::string describe(const Case& c) {
  return "B " + std::to_string(c.B) + " windows " + std::to_string(c.nwh) + "x" + std::to_string(c.nww) + " win " +
         std::to_string(c.win) + " NH " + std::to_string(c.NH) + " HS " + std::to_string(c.HS) +
         (c.shift ? " shifted" : "") + (c.v2 ? " v2" : " v1");
}

void check(const Case& c, bool zero_row = false) {
  const int64_t N = c.win * c.win, C = c.NH * c.HS, nW = c.nwh * c.nww, Bw = c.B * nW;
  manual_seed(uint64_t(N * 7 + C + (c.v2 ? 1 : 0)));
  Tensor qkv = Tensor::randn({Bw, N, 3 * C});
  if (zero_row) qkv.select(0, 1).select(0, 3).zero_();   // window 1, token 3: q, k, v all zero
  const Tensor bias = Tensor::randn({c.NH, N, N}) * 0.5, g = Tensor::randn({Bw, N, C});
  test::Tensors in = {{"qkv", qkv}, {"bias", bias}, {"g", g}};
  Tensor mask;
  if (c.shift) {
    mask = nn::swin_shift_mask(c.nwh * c.win, c.nww * c.win, c.win, c.win, c.win / 2, c.win / 2);
    in["mask"] = mask;
  }
  Tensor ls;
  if (c.v2) {
    ls = Tensor::randn({c.NH, 1, 1}) * 0.3 + std::log(10.0);
    ls.view({c.NH}).select(0, 0).fill_(std::log(100.0) + 0.5);   // clamped: no gradient
    in["logit_scale"] = ls;
  }
  const auto ref = test::torch_ref("swin.window_op", in, {{"heads", c.NH}});
  test::for_each_isa([&](Isa isa) {
    const std::string ctx = describe(c) + " isa " + isa_name(isa);
    Tensor q = qkv.clone().requires_grad_(), b = bias.clone().requires_grad_(), l;
    WindowAttentionOptions o;
    o.need_weights = true;
    if (c.v2) o.logit_scale = l = ls.clone().requires_grad_();
    const WindowAttentionResult r = window_attention_packed(q, c.NH, b, mask, o);
    sum(r.out * g).backward();
    EXPECT_TENSOR_NEAR(r.out.to(DType::f64), ref.at("out"), 2e-5, 1e-4) << ctx;
    EXPECT_TENSOR_NEAR(r.weights.to(DType::f64), ref.at("weights"), 2e-6, 1e-4) << ctx;
    EXPECT_TENSOR_NEAR(q.grad().to(DType::f64), ref.at("dqkv"), 1e-4, 1e-3) << ctx;
    EXPECT_TENSOR_NEAR(b.grad().to(DType::f64), ref.at("dbias"), 1e-4, 1e-3) << ctx;
    if (c.v2) EXPECT_TENSOR_NEAR(l.grad().to(DType::f64), ref.at("dlogit_scale"), 1e-3, 1e-3) << ctx;
  });
}

}  // namespace

TEST(WindowAttentionOp, V1MatchesTorch) {
  check({2, 3, 3, 7, 3, 32, true, false});
  check({2, 3, 3, 7, 3, 32, false, false});
  check({2, 3, 1, 4, 2, 12, true, false});
  check({2, 1, 2, 12, 2, 16, true, false});   // N = 144: more tokens than one 64-wide tile
}

TEST(WindowAttentionOp, V2MatchesTorch) {
  check({2, 3, 3, 7, 3, 32, true, true});
  check({2, 1, 3, 4, 2, 12, false, true});
  check({2, 3, 1, 4, 2, 12, true, true}, /*zero_row=*/true);
}

TEST(WindowAttentionOp, WeightsWithoutGradient) {
  manual_seed(5);
  const Tensor qkv = Tensor::randn({4, 16, 3 * 8}), bias = Tensor::randn({2, 16, 16});
  NoGradGuard ng;
  WindowAttentionOptions o;
  o.need_weights = true;
  const WindowAttentionResult r = window_attention_packed(qkv, 2, bias, Tensor(), o);
  ASSERT_EQ(r.weights.shape(), Shape({4, 2, 16, 16}));
  EXPECT_TENSOR_NEAR(sum(r.weights, {-1}), Tensor::ones({4, 2, 16}), 1e-5, 0);
  EXPECT_FALSE(window_attention_packed(qkv, 2, bias).weights.defined());
}

TEST(WindowAttentionOp, Errors) {
  const Tensor qkv = Tensor::zeros({4, 16, 24}), bias = Tensor::zeros({2, 16, 16});
  EXPECT_EQ(test::error_of([&] { window_attention_packed(qkv, 5, bias); }),
            "window_attention_packed: the last dim of qkv [4, 16, 24] is not 3 x num_heads (5) x a head size");
  EXPECT_EQ(test::error_of([&] { window_attention_packed(qkv, 2, Tensor::zeros({2, 16, 15})); }),
            "window_attention_packed: expected a f32 bias of shape [2, 16, 16], got f32 [2, 16, 15]");
  EXPECT_EQ(test::error_of([&] { window_attention_packed(qkv, 2, bias, Tensor::zeros({3, 16, 16})); }),
            "window_attention_packed: expected a f32 mask of shape (nW, 16, 16) with nW dividing the 4 windows, "
            "got f32 [3, 16, 16]");
  WindowAttentionOptions o;
  o.logit_scale = Tensor::zeros({3, 1, 1});
  EXPECT_EQ(test::error_of([&] { window_attention_packed(qkv, 2, bias, Tensor(), o); }),
            "window_attention_packed: expected a f32 logit_scale of 2 elements (one per head), got f32 [3, 1, 1]");
}

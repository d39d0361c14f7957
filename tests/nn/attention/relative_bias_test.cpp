// Relative position terms: Swin's relative_position_index and bias (against Swin's own torch
// code in the golden script), the 1-d bias table and ViT's 1-d relative embeddings (forward and
// gradients against torch, finite differences), and their use as an additive attention mask.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "attn/attn.h"
#include "attn/nn/attention/multi_head.h"
#include "attn/nn/attention/relative_bias.h"
#include "attn/nn/init.h"
#include "attn/ops/attention.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::torch_ref;

TEST(RelativeBias, SwinIndexAsSwin) {
  for (auto [wh, ww] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 2}, {7, 7}, {3, 5}, {4, 1}}) {
    auto ref = torch_ref("attention_modules.swin_index", {}, {{"wh", wh}, {"ww", ww}});
    EXPECT_TENSOR_NEAR(nn::swin_relative_position_index(wh, ww), ref.at("index"), 0, 0) << wh << "x" << ww;
  }
}

TEST(RelativeBias, BeitIndexAsBeit) {
  for (auto [wh, ww] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 3}, {7, 7}}) {
    auto ref = torch_ref("attention_modules.beit_index", {}, {{"wh", wh}, {"ww", ww}});
    EXPECT_TENSOR_NEAR(nn::beit_relative_position_index(wh, ww), ref.at("index"), 0, 0) << wh << "x" << ww;
  }
}

// With the class token: a (NH, N + 1, N + 1) bias from a table of 3 more rows, gradients included.
TEST(RelativeBias, ClassTokenBiasForwardBackward) {
  Generator g(83);
  const int64_t wh = 3, ww = 4, nh = 2, t = wh * ww + 1;
  nn::RelativePositionBias2D rpb({.window_h = wh, .window_w = ww, .num_heads = nh, .class_token = true}, g);
  EXPECT_EQ(rpb.relative_position_bias_table.shape(), Shape({(2 * wh - 1) * (2 * ww - 1) + 3, nh}));
  Tensor gout = randn({nh, t, t}, g);
  auto ref = torch_ref("attention_modules.swin_bias", {{"table", rpb.relative_position_bias_table}, {"g", gout}},
                       {{"wh", wh}, {"ww", ww}, {"class_token", 1}});
  Tensor b = rpb.forward();
  sum(b * gout).backward();
  EXPECT_TENSOR_NEAR(b, ref.at("bias"), 0, 0);
  EXPECT_TENSOR_NEAR(rpb.relative_position_bias_table.grad(), ref.at("dtable"), 1e-5, 1e-5);
}

TEST(RelativeBias, SwinBiasForwardBackward) {
  Generator g(81);
  for (auto [wh, ww, nh] : std::vector<std::array<int64_t, 3>>{{7, 7, 3}, {2, 5, 4}}) {
    nn::RelativePositionBias2D rpb({.window_h = wh, .window_w = ww, .num_heads = nh}, g);
    EXPECT_EQ(rpb.relative_position_bias_table.shape(), Shape({(2 * wh - 1) * (2 * ww - 1), nh}));
    const int64_t n = wh * ww;
    Tensor gout = randn({nh, n, n}, g);
    auto ref = torch_ref("attention_modules.swin_bias", {{"table", rpb.relative_position_bias_table}, {"g", gout}},
                         {{"wh", wh}, {"ww", ww}});
    Tensor b = rpb.forward();
    sum(b * gout).backward();
    EXPECT_TENSOR_NEAR(b, ref.at("bias"), 0, 0);
    EXPECT_TENSOR_NEAR(rpb.relative_position_bias_table.grad(), ref.at("dtable"), 1e-5, 1e-5);
  }
  // Names: the table is a parameter; the index a buffer, persistent only on request.
  nn::RelativePositionBias2D timm_like({.window_h = 2, .window_w = 2, .num_heads = 1});
  EXPECT_EQ(timm_like.state_dict().size(), 1u);
  EXPECT_EQ(timm_like.named_buffers().size(), 1u);
  nn::RelativePositionBias2D swin_like({.window_h = 2, .window_w = 2, .num_heads = 1, .persistent_index = true});
  std::vector<std::string> keys;
  for (auto& [k, t] : swin_like.state_dict()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"relative_position_bias_table", "relative_position_index"}));
}

TEST(RelativeBias, Bias1dForwardBackward) {
  Generator g(82);
  const int64_t L = 9, NH = 3;
  nn::RelativePositionBias1D rb({.max_len = L, .num_heads = NH}, g);
  for (int64_t T : {1, 5, 9}) {
    rb.zero_grad();
    Tensor gout = randn({NH, T, T}, g);
    auto ref = torch_ref("attention_modules.rel_bias_1d", {{"table", rb.relative_position_bias_table}, {"g", gout}},
                         {{"max_len", L}, {"t", T}});
    Tensor b = rb.forward(T);
    sum(b * gout).backward();
    EXPECT_TENSOR_NEAR(b, ref.at("bias"), 0, 0) << "T=" << T;
    EXPECT_TENSOR_NEAR(rb.relative_position_bias_table.grad(), ref.at("dtable"), 1e-5, 1e-5) << "T=" << T;
  }
  EXPECT_EQ(error_of([&] { rb.forward(10); }), "RelativePositionBias1D: expected a length in [1, 9], got 10");
}

TEST(RelativeBias, ViTRelativeEmbeddingForwardBackward) {
  Generator g(83);
  for (DType dt : {DType::f32, DType::f64}) {
    const int64_t L = 8, HS = 5, B = 2, NH = 3;
    nn::RelativePositionEmbedding1D re({.max_len = L, .head_dim = HS, .dtype = dt}, g);
    for (int64_t T : {3, 8}) {
      re.zero_grad();
      Tensor q = randn({B, NH, T, HS}, g, dt), gout = randn({B, NH, T, T}, g, dt);
      auto ref = torch_ref("attention_modules.rel_embed_1d", {{"q", q}, {"r", re.relative_embedding}, {"g", gout}},
                           {{"max_len", L}});
      Tensor qq = q.clone().requires_grad_();
      Tensor b = re.forward(qq);
      sum(b * gout).backward();
      const double tol = dt == DType::f32 ? 1e-5 : 1e-12;
      EXPECT_TENSOR_NEAR(b, ref.at("bias"), tol, tol) << "T=" << T;
      EXPECT_TENSOR_NEAR(qq.grad(), ref.at("dq"), tol, tol) << "T=" << T;
      EXPECT_TENSOR_NEAR(re.relative_embedding.grad(), ref.at("dr"), tol, tol) << "T=" << T;
    }
  }
  nn::RelativePositionEmbedding1D re({.max_len = 4, .head_dim = 3, .dtype = DType::f64}, g);
  EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return re.forward(in[0]); },
                              {randn({1, 2, 4, 3}, g, DType::f64)}));
  EXPECT_EQ(error_of([&] { re.forward(Tensor::zeros({1, 2, 4, 5}, DType::f64)); }),
            "RelativePositionEmbedding1D: expected q of shape (B, NH, T, 3), got [1, 2, 4, 5]");
}

TEST(RelativeBias, AsAnAdditiveMaskInSelfAttention) {
  // Swin-style use: the (NH, N, N) bias goes to SelfAttention as an additive float mask; its gradient
  // reaches the table through the attention (both attention paths).
  Generator g(84);
  const int64_t wh = 3, ww = 3, NH = 2, C = 8, N = wh * ww;
  nn::RelativePositionBias2D rpb({.window_h = wh, .window_w = ww, .num_heads = NH}, g);
  nn::init::normal_(rpb.relative_position_bias_table, g, 0.0, 1.0);
  nn::SelfAttention att({.dim = C, .num_heads = NH, .qkv_bias = true, .impl = SdpaImpl::naive}, g);
  Tensor x = randn({2, N, C}, g);
  auto with_bias = att.forward(x, rpb.forward(), true);
  auto without = att.forward(x, Tensor(), true);
  EXPECT_GT(max(abs(with_bias.out - without.out)).item(), 1e-3);
  // weights = softmax(logits + bias): log-ratio shift by the bias.
  Tensor lw = log(with_bias.weights) - log(without.weights);     // = bias - logsumexp shift per row
  Tensor bias = rpb.forward().detach().unsqueeze(0);
  Tensor d = lw - bias;                                          // constant along the last dim
  EXPECT_TENSOR_NEAR(d, d.slice(3, 0, 1).expand(d.shape()), 1e-4, 1e-4);
  sum(with_bias.out).backward();
  ASSERT_TRUE(rpb.relative_position_bias_table.grad().defined());
  EXPECT_GT(max(abs(rpb.relative_position_bias_table.grad())).item(), 0.0);
}

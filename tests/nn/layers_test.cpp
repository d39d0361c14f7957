// nn::LayerNorm, Embedding, Dropout and DropPath: against torch.nn (forward, backward) where the
// layer is deterministic, against their definitions (same generator draws) where it is random.
#include <gtest/gtest.h>

#include "attn/attn.h"
#include "attn/nn/drop_path.h"
#include "attn/nn/dropout.h"
#include "attn/nn/embedding.h"
#include "attn/nn/init.h"
#include "attn/nn/layer_norm.h"
#include "attn/ops/dropout.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::torch_ref;

class LayerNormVsTorch : public ::testing::TestWithParam<bool> {};

TEST_P(LayerNormVsTorch, ForwardBackward) {
  const bool affine = GetParam();
  Generator g(1);
  for (DType dt : {DType::f32, DType::f64}) {
    for (int64_t c : {3, 8, 33, 768}) {   // C = 1 is degenerate (x - mean is rounding noise times 1/sqrt(eps))
      nn::LayerNorm ln({.normalized_shape = c, .eps = 1e-6, .elementwise_affine = affine, .dtype = dt});
      EXPECT_EQ(ln.named_parameters().size(), affine ? 2u : 0u);
      if (affine) {   // non-trivial affine parameters
        nn::init::normal_(ln.weight, g, 1.0, 0.5);
        nn::init::normal_(ln.bias, g, 0.0, 0.5);
      }
      Tensor x = randn({3, 5, c}, g, dt) * 2.0 + 0.5;
      Tensor gout = randn({3, 5, c}, g, dt);
      test::Tensors in = {{"x", x}, {"g", gout}};
      for (auto& [k, p] : ln.named_parameters()) in["p." + k] = p;
      auto ref = torch_ref("nn.layer_norm", in, {{"eps", 1e-6}, {"affine", affine}});
      Tensor xx = x.clone().requires_grad_();
      Tensor y = ln.forward(xx);
      y.backward(gout);
      const double tol = dt == DType::f32 ? 2e-5 : 1e-10;
      EXPECT_TENSOR_NEAR(y, ref.at("out"), tol, tol) << "C=" << c;
      EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), tol, tol) << "C=" << c;
      for (auto& [k, p] : ln.named_parameters())
        EXPECT_TENSOR_NEAR(p.grad(), ref.at("d." + k), tol * 10, tol) << k << " C=" << c;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Affine, LayerNormVsTorch, ::testing::Bool());

TEST(LayerNorm, DefaultsAndMessages) {
  nn::LayerNorm ln(4);
  EXPECT_TENSOR_NEAR(ln.weight, Tensor::ones({4}), 0, 0);
  EXPECT_TENSOR_NEAR(ln.bias, Tensor::zeros({4}), 0, 0);
  EXPECT_EQ(ln.options().eps, 1e-5);
  EXPECT_EQ(error_of([&] { ln.forward(Tensor::zeros({2, 5})); }),
            "LayerNorm: expected input with last dim 4, got shape [2, 5]");
}

TEST(Embedding, ForwardBackwardVsTorch) {
  Generator g(2);
  nn::Embedding emb(17, 6, g);
  // Repeated indices: their gradients must accumulate.
  Tensor idx = Tensor::from_vector<int64_t>({3, 0, 16, 3, 5, 3, 9, 0}, {2, 4});
  Tensor gout = randn({2, 4, 6}, g);
  auto ref = torch_ref("nn.embedding", {{"idx", idx}, {"g", gout}, {"p.weight", emb.weight}});
  Tensor y = emb.forward(idx);
  y.backward(gout);
  EXPECT_TENSOR_NEAR(y, ref.at("out"), 0, 0);
  EXPECT_TENSOR_NEAR(emb.weight.grad(), ref.at("d.weight"), 1e-6, 1e-6);
}

TEST(Embedding, DefaultInitIsStandardNormal) {
  Generator g(3), g2(3);
  nn::Embedding emb(100, 50, g);
  EXPECT_TENSOR_NEAR(emb.weight, randn({100, 50}, g2), 0, 0);
  EXPECT_EQ(emb.named_parameters().front().first, "weight");
}

TEST(Dropout, TrainingUsesTheOpEvalIsIdentity) {
  Generator gx(4);
  Tensor x = randn({4, 37}, gx);
  Generator g(9), g_same(9);
  nn::Dropout drop(0.3, &g);
  Tensor y = drop.forward(x);
  EXPECT_TENSOR_NEAR(y, dropout(x, 0.3, true, g_same), 0, 0);
  EXPECT_EQ(g.offset(), g_same.offset());
  drop.eval();
  EXPECT_TRUE(drop.forward(x).is_same(x));
  nn::Dropout zero(0.0);
  EXPECT_TRUE(zero.forward(x).is_same(x));
  EXPECT_EQ(error_of([&] { nn::Dropout bad(1.5); }), "Dropout: expected p in [0, 1], got 1.5");
}

TEST(DropPath, PerSampleMaskScaledByKeep) {
  const double p = 0.25;
  Generator g(5), g_mask(5);
  nn::DropPath dp(p, &g);
  Generator gx(6);
  Tensor x = randn({64, 3, 5}, gx);
  Tensor xx = x.clone().requires_grad_();
  Tensor y = dp.forward(xx);
  // The definition (timm's drop_path): mask (B, 1, 1) ~ Bernoulli(1 - p), divided by 1 - p.
  Tensor mask = bernoulli({64, 1, 1}, 1.0 - p, g_mask) / Tensor::scalar(1.0 - p);
  EXPECT_TENSOR_NEAR(y, x * mask, 0, 0);
  // Each sample is either all kept (scaled) or all dropped; some of each at B = 64.
  auto mv = mask.to_vector<float>();
  int kept = 0;
  for (float v : mv) {
    EXPECT_TRUE(v == 0.0f || v == float(1.0 / (1.0 - p))) << v;
    kept += v != 0.0f;
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 64);
  // Backward: gradient is the mask, broadcast.
  Tensor gout = randn({64, 3, 5}, gx);
  y.backward(gout);
  EXPECT_TENSOR_NEAR(xx.grad(), gout * mask, 0, 0);
  // Eval and p = 0: identity.
  dp.eval();
  EXPECT_TRUE(dp.forward(x).is_same(x));
  nn::DropPath none(0.0);
  EXPECT_TRUE(none.forward(x).is_same(x));
  // p = 1: everything dropped.
  Generator g1(7);
  EXPECT_EQ(max(abs(nn::drop_path(x, 1.0, true, g1))).item(), 0.0);
}

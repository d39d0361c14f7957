// Inspecting a ViT as the ViT paper does (viz/inspect.h): the patch position embeddings of every
// pos_embed kind, their cosine similarity against torch, the similarity tiles, and the mean attention
// distance against the published probing code's formula (numpy) on real attention maps.
#include <gtest/gtest.h>

#include <cmath>

#include "attn/attn.h"
#include "attn/autograd/grad_mode.h"
#include "attn/models/vit.h"
#include "attn/nn/module.h"
#include "attn/nn/pos_embed.h"
#include "attn/viz/heatmap.h"
#include "attn/viz/inspect.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;

namespace {

Tensor param(const nn::Module& m, const std::string& name) {
  for (const auto& [k, v] : m.named_parameters())
    if (k == name) return v;
  ADD_FAILURE() << "no parameter " << name;
  return Tensor();
}

std::shared_ptr<models::VisionTransformer> small_vit(const std::string& pos, bool distilled = false) {
  manual_seed(3);
  auto m = models::create_model(distilled ? "deit_fmnist_distilled" : "vit_fmnist",
                                {{"dim", 16}, {"depth", 2}, {"heads", 2}, {"patch_size", 7}, {"pos_embed", pos}});
  return std::dynamic_pointer_cast<models::VisionTransformer>(m);
}

}  // namespace

TEST(Inspect, PatchPositionEmbeddingsOfEveryKind) {
  for (bool distilled : {false, true}) {
    auto vit = small_vit("learned", distilled);
    const Tensor pe = vit->patch_position_embeddings();
    ASSERT_EQ(pe.shape(), (Shape{16, 16}));
    const Tensor full = param(*vit, "pos_embed");   // (1, prefix + 16, 16)
    EXPECT_TENSOR_NEAR(pe, full.select(0, 0).slice(0, vit->num_prefix_tokens(), vit->num_prefix_tokens() + 16), 0, 0);
  }
  EXPECT_TENSOR_NEAR(small_vit("sincos2d")->patch_position_embeddings(), nn::sincos_2d_pos_embed(16, 4, 4, false), 0, 0);
  auto l2 = small_vit("learned2d");
  const Tensor pe2 = l2->patch_position_embeddings();
  ASSERT_EQ(pe2.shape(), (Shape{16, 16}));
  // [i, j]'s row: the column embedding of j, then the row embedding of i.
  const Tensor col = param(*l2, "pos_embed_2d.col_embed"), row = param(*l2, "pos_embed_2d.row_embed");
  EXPECT_TENSOR_NEAR(pe2.select(0, 1 * 4 + 2).slice(0, 0, 8), col.select(0, 2), 0, 0);
  EXPECT_TENSOR_NEAR(pe2.select(0, 1 * 4 + 2).slice(0, 8, 16), row.select(0, 1), 0, 0);
  EXPECT_FALSE(small_vit("none")->patch_position_embeddings().defined());
  EXPECT_EQ(error_of([] { viz::pos_embed_similarity(*small_vit("none")); }),
            "pos_embed_similarity: the model has no position embedding (pos_embed 'none')");
}

TEST(Inspect, CosineSimilarityAgainstTorch) {
  manual_seed(11);
  Tensor emb = Tensor::randn({12, 20});
  {
    Tensor row = emb.select(0, 3);
    row.copy_(row * 1e-3);   // a short row: the norm matters
  }
  const Tensor mine = viz::cosine_similarity_rows(emb);
  auto ref = test::torch_ref("vit_inspect.cosine", {{"emb", emb}});
  EXPECT_TENSOR_NEAR(mine, ref.at("out"), 1e-12, 1e-9);
  auto vit = small_vit("learned");
  EXPECT_TENSOR_NEAR(viz::pos_embed_similarity(*vit),
                     test::torch_ref("vit_inspect.cosine", {{"emb", vit->patch_position_embeddings()}}).at("out"), 1e-12, 1e-9);
  // sin-cos 2-D embeddings: every patch is most similar to itself.
  const Tensor s = viz::pos_embed_similarity(*small_vit("sincos2d"));
  for (int64_t i = 0; i < 16; ++i) {
    EXPECT_NEAR(s.at({i, i}), 1.0, 1e-12);
    for (int64_t j = 0; j < 16; ++j) EXPECT_LE(s.at({i, j}), s.at({i, i}) + 1e-12);
  }
}

TEST(Inspect, SimilarityTiles) {
  const Tensor s = viz::pos_embed_similarity(*small_vit("sincos2d"));
  const Tensor img = viz::render_pos_embed_similarity(s, 4, 3, 2);
  // 4 tiles of 4 x 3 = 12 pixels, 5 gaps of 2: 58 pixels a side.
  ASSERT_EQ(img.shape(), (Shape{58, 58, 3}));
  const auto top = viz::colormap_rgb("viridis", 1.0);
  // Patch (1, 2)'s tile starts at (2 + 14, 2 + 28); its own cell (1, 2) inside it is the brightest colour.
  for (int c = 0; c < 3; ++c) EXPECT_EQ(img.at({16 + 3 + 1, 30 + 6 + 1, c}), top[size_t(c)]);
  EXPECT_EQ(img.at({0, 0, 0}), 255);   // the white margin
  EXPECT_NE(error_of([&] { viz::render_pos_embed_similarity(s, 3); })
                .find("render_pos_embed_similarity: expected a (9, 9) similarity for a 3 x 3 grid, got shape"),
            std::string::npos);
}

TEST(Inspect, MeanAttentionDistanceAgainstTheProbingFormula) {
  for (bool distilled : {false, true}) {
    auto vit = small_vit("learned", distilled);
    vit->eval();
    manual_seed(4);
    const Tensor x = Tensor::randn({3, 1, 28, 28});
    Tensor maps;
    {
      NoGradGuard ng;
      maps = vit->attention_maps(x);   // (2, 3, 2, prefix + 16, prefix + 16)
    }
    const int64_t p = vit->num_prefix_tokens();
    const Tensor d = viz::mean_attention_distance(maps, p, 4, 7);
    ASSERT_EQ(d.shape(), (Shape{2, 2}));
    auto ref = test::torch_ref("vit_inspect.attention_distance", {{"maps", maps}},
                               {{"num_prefix", p}, {"grid", 4}, {"patch_size", 7}});
    EXPECT_TENSOR_NEAR(d, ref.at("out"), 1e-9, 1e-9) << "distilled " << distilled;
  }
  // Uniform attention over the patches alone (no prefix): the mean distance between patch centres.
  Tensor u = Tensor::full({1, 1, 1, 4, 4}, 0.25, DType::f64);
  const double mean_pair = (0 + 1 + 1 + std::sqrt(2.0)) / 4 * 10;   // a 2 x 2 grid, 10 px patches
  EXPECT_NEAR(viz::mean_attention_distance(u, 0, 2, 10).at({0, 0}), mean_pair, 1e-12);
  EXPECT_EQ(error_of([&] { viz::mean_attention_distance(u, 1, 2, 10); }),
            "mean_attention_distance: expected T = 1 prefix tokens + 4 patches (a 2 x 2 grid), got T = 4");
}

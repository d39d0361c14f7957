// Attention rollout and the class-token maps against a numpy implementation of Abnar & Zuidema's
// formula (tests/golden/gen/images.py) on random attention tensors; the explanation panel of a small
// ViT/DeiT; image preprocessing; heat-map drawing.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "attn/attn.h"
#include "attn/data/image.h"
#include "attn/data/preprocess.h"
#include "attn/io/checkpoint.h"
#include "attn/viz/explain.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::torch_ref;

namespace {

// Row-stochastic random attention (L, B, NH, T, T).
Tensor random_maps(int64_t l, int64_t b, int64_t h, int64_t t, Generator& g, DType dt) {
  return softmax(randn({l, b, h, t, t}, g, dt) * 2.0, -1);
}

std::string tmp(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() / ("attn_explain_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return (d / name).string();
}

}  // namespace

TEST(Rollout, MatchesNumpyFormula) {
  Generator g(81);
  for (DType dt : {DType::f64, DType::f32})
    for (auto [l, b, h, t, prefix] : std::vector<std::array<int64_t, 5>>{
             {1, 1, 1, 2, 1}, {3, 2, 4, 10, 1}, {6, 1, 3, 17, 1}, {4, 2, 2, 11, 2}, {2, 3, 5, 50, 1}})
      for (const char* fusion : {"mean", "max", "min"}) {
        Tensor maps = random_maps(l, b, h, t, g, dt);
        auto ref = torch_ref("images.rollout", {{"maps", maps}}, {{"fusion", fusion}, {"prefix", prefix}});
        const double tol = dt == DType::f64 ? 1e-12 : 1e-6;
        const auto f = viz::parse_head_fusion(fusion);
        const std::string ctx = std::string(fusion) + " " + shape_str(maps.shape()) + " " + dtype_name(dt);
        EXPECT_TENSOR_NEAR(viz::attention_rollout(maps, f), ref.at("rollout").to(dt), tol, tol) << ctx;
        EXPECT_TENSOR_NEAR(viz::cls_rollout(maps, prefix, f), ref.at("cls").to(dt), tol, tol) << ctx;
        EXPECT_TENSOR_NEAR(viz::last_layer_cls_attention(maps, prefix), ref.at("last").to(dt), tol, tol) << ctx;
      }
}

TEST(Rollout, Errors) {
  EXPECT_EQ(error_of([] { viz::attention_rollout(Tensor::zeros({2, 3, 4, 4})); }),
            "attention_rollout: expected attention maps (L, B, NH, T, T) f32 or f64, got f32 of shape [2, 3, 4, 4]");
  EXPECT_EQ(error_of([] { viz::cls_rollout(Tensor::zeros({1, 1, 1, 4, 4}), 4); }),
            "cls_rollout: expected 1 <= num_prefix < T = 4, got 4");
  EXPECT_EQ(error_of([] { viz::parse_head_fusion("median"); }),
            "explain: unknown head fusion 'median' (known: mean, max, min)");
}

TEST(Explain, PanelOfASmallVitAndDeit) {
  Generator g(82);
  for (bool distilled : {false, true}) {
    manual_seed(5);
    auto m = models::create_model(distilled ? "deit_fmnist_distilled" : "vit_fmnist",
                                  {{"dim", 24}, {"depth", 2}, {"heads", 2}, {"patch_size", 7}});
    auto* vit = dynamic_cast<models::VisionTransformer*>(m.get());
    ASSERT_NE(vit, nullptr);
    m->eval();
    Tensor px = Tensor::empty({28, 28, 1}, DType::u8);
    for (int64_t i = 0; i < px.numel(); ++i) px.data<uint8_t>()[i] = uint8_t(g.randint(256));
    const std::string path = tmp(distilled ? "deit.png" : "vit.png");
    data::write_png(path, px);
    viz::PreparedImage p = viz::prepare_image(path, 28, 1, {0.2860f}, {0.3530f});
    ASSERT_EQ(p.input.shape(), (Shape{1, 1, 28, 28}));
    EXPECT_NEAR(p.input.at({0, 0, 3, 5}), (px.at({3, 5, 0}) / 255.0 - 0.2860) / 0.3530, 1e-5);

    viz::Explanation e = viz::explain(*vit, p);
    EXPECT_EQ(e.rollout.shape(), (Shape{4, 4}));
    EXPECT_EQ(e.panel.shape(), (Shape{224, 3 * 224, 3}));
    Tensor maps = vit->attention_maps(p.input);
    EXPECT_TENSOR_NEAR(e.rollout.reshape({16}), viz::cls_rollout(maps, vit->num_prefix_tokens()).select(0, 0), 1e-6, 1e-6);
    EXPECT_TENSOR_NEAR(e.last_cls.reshape({16}),
                       viz::last_layer_cls_attention(maps, vit->num_prefix_tokens()).select(0, 0), 1e-6, 1e-6);
    // The rollout's class row sums to 1 over all tokens, so its patch part is in (0, 1].
    EXPECT_GT(sum(e.rollout).item(), 0.0);
    EXPECT_LE(sum(e.rollout).item(), 1.0 + 1e-6);
    // Panel 0 is the image upscaled 8x (nearest), in RGB.
    EXPECT_EQ(e.panel.at({8 * 3 + 7, 8 * 5, 0}), px.at({3, 5, 0}));
    EXPECT_EQ(e.panel.at({8 * 3, 8 * 5 + 7, 2}), px.at({3, 5, 0}));
    data::write_png(tmp("panel.png"), e.panel);
  }
}

// Foreign weights: the image through an eval transform (resize the shorter side, center crop). The
// input equals what predict / eval feed the model bit for bit; the panel image is the crop.
TEST(Explain, PrepareWithAnEvalTransform) {
  Generator g(7);
  Tensor px = Tensor::empty({40, 60, 3}, DType::u8);
  for (int64_t i = 0; i < px.numel(); ++i) px.data<uint8_t>()[i] = uint8_t(g.randint(256));
  const std::string path = tmp("wide.png");
  data::write_png(path, px);
  data::Preprocess pre = data::preset_for("vit", data::WeightSource::timm, 32);   // 35 bicubic -> crop 32
  pre.interpolation = data::Resample::bicubic;
  const viz::PreparedImage p = viz::prepare_image(path, pre);
  ASSERT_EQ(p.image.shape(), (Shape{32, 32, 3}));
  ASSERT_EQ(p.input.shape(), (Shape{1, 3, 32, 32}));
  const Tensor want = data::preprocess_file(path, pre);
  EXPECT_EQ(std::memcmp(p.input.data<float>(), want.data<float>(), size_t(want.numel()) * sizeof(float)), 0);
  // The crop: resized to 35 x 52 (shorter side 35), then rows 2..33 and columns 10..41.
  const Tensor resized = data::resize(px, 35, 52, data::Resample::bicubic);
  EXPECT_EQ(p.image.at({0, 0, 1}), resized.at({2, 10, 1}));
  EXPECT_EQ(p.image.at({31, 31, 2}), resized.at({33, 41, 2}));
}

TEST(Explain, HeatmapDrawing) {
  Tensor ramp = Tensor::arange(10, DType::f32).reshape({2, 5});
  Tensor c = viz::colorize(ramp);
  ASSERT_EQ(c.shape(), (Shape{2, 5, 3}));
  // jet: the minimum is dark blue, the maximum dark red.
  EXPECT_EQ(c.at({0, 0, 0}), 0);
  EXPECT_EQ(c.at({0, 0, 2}), 128);
  EXPECT_EQ(c.at({1, 4, 0}), 128);
  EXPECT_EQ(c.at({1, 4, 2}), 0);
  // A constant map is drawn as the minimum colour; NaN too.
  Tensor flat = viz::colorize(Tensor::full({3, 3}, 0.25));
  EXPECT_EQ(flat.at({1, 1, 2}), 128);
  Tensor img = Tensor::full({8, 8, 1}, 200, DType::u8);
  Tensor o = viz::overlay_heatmap(img, Tensor::zeros({2, 2}), 0.0);
  EXPECT_TENSOR_NEAR(o, Tensor::full({8, 8, 3}, 200, DType::u8), 0.0, 0.0);
  o = viz::overlay_heatmap(img, Tensor::zeros({2, 2}), 1.0);
  EXPECT_EQ(o.at({4, 4, 2}), 128);
  EXPECT_EQ(error_of([&] { viz::overlay_heatmap(img, Tensor::zeros({2, 2}), 1.5); }),
            "overlay_heatmap: expected alpha in [0, 1], got 1.5");
}

TEST(Explain, PrepareImageErrors) {
  EXPECT_EQ(error_of([] { viz::prepare_image("/nonexistent.png", 28, 1, {0.5f}, {0.5f}); }),
            "image: cannot open '/nonexistent.png'");
  EXPECT_EQ(error_of([] { viz::prepare_image("/nonexistent.png", 28, 2, {0.5f}, {0.5f}); }),
            "prepare_image: expected image_size > 0 and 1 or 3 channels, got 28 and 2");
}

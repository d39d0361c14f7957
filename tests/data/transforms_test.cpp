// Image transforms against torchvision 0.14: the random ones run torchvision's own classes fed
// with the same uniform draws (tests/golden/gen/data.py), the deterministic ones against
// torchvision.transforms.functional; plus special values and error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "attn/attn.h"
#include "attn/data/transforms.h"
#include "draws.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::upcoming_draws;
using test::torch_ref;

namespace {

const std::vector<Shape> kShapes = {{1, 28, 28}, {3, 7, 11}, {2, 13, 5}, {1, 1, 17}};

// Compares attn's result and draw count with torchvision's run on the same draws.
void expect_like_torchvision(const Tensor& mine, uint64_t used, const test::Tensors& ref, const std::string& ctx) {
  EXPECT_TENSOR_NEAR(mine, ref.at("out"), 0.0, 0.0) << ctx;
  EXPECT_EQ(int64_t(used), int64_t(ref.at("used").item())) << "draws consumed, " << ctx;
}

}  // namespace

TEST(Transforms, RandomCropMatchesTorchvision) {
  Generator g(21);
  int draws_seen = 0;
  for (const Shape& s : kShapes) {
    const int64_t h = s[1], w = s[2];
    for (int64_t padding : {0, 1, 4}) {
      // Crops smaller than, equal to and (with padding) larger than the image.
      for (auto [oh, ow] : std::vector<std::pair<int64_t, int64_t>>{{h, w}, {std::max<int64_t>(1, h - 3), w},
                                                                    {h, std::max<int64_t>(1, w / 2)},
                                                                    {h + padding, w + 2 * padding}}) {
        for (int rep = 0; rep < 3; ++rep) {
          Tensor img = randn(s, g);
          Tensor draws = upcoming_draws(g);
          const uint64_t before = g.offset();
          Tensor mine = data::random_crop(img, oh, ow, padding, g);
          const std::string ctx = shape_str(s) + " padding " + std::to_string(padding) + " crop " +
                                  shape_str({oh, ow});
          auto ref = torch_ref("data.random_crop", {{"img", img}, {"draws", draws}},
                               {{"size", {oh, ow}}, {"padding", padding}});
          expect_like_torchvision(mine, g.offset() - before, ref, ctx);
          draws_seen += int(g.offset() - before);
        }
      }
    }
  }
  EXPECT_GT(draws_seen, 0);
}

TEST(Transforms, RandomHorizontalFlipMatchesTorchvision) {
  Generator g(22);
  int flipped = 0, kept = 0;
  for (const Shape& s : kShapes)
    for (double p : {0.0, 0.5, 1.0})
      for (int rep = 0; rep < 4; ++rep) {
        Tensor img = randn(s, g);
        Tensor draws = upcoming_draws(g);
        const uint64_t before = g.offset();
        Tensor mine = data::random_hflip(img, p, g);
        auto ref = torch_ref("data.random_hflip", {{"img", img}, {"draws", draws}}, {{"p", p}});
        expect_like_torchvision(mine, g.offset() - before, ref, shape_str(s) + " p " + std::to_string(p));
        (test::compare(mine, img, 0, 0).ok ? kept : flipped) += 1;
      }
  EXPECT_GT(flipped, 0);
  EXPECT_GT(kept, 0);
}

TEST(Transforms, RandomErasingMatchesTorchvision) {
  Generator g(23);
  int erased = 0, skipped = 0, fallback = 0;
  struct Case { double p, s0, s1, r0, r1; };
  // The default, always-on, and a large-scale case where many attempts fail (10-attempt fallback).
  const std::vector<Case> cases = {{0.5, 0.02, 0.33, 0.3, 3.3}, {1.0, 0.02, 0.33, 0.3, 3.3},
                                   {1.0, 0.6, 0.99, 0.1, 10.0}, {1.0, 0.0, 0.05, 1.0, 1.0}};
  for (const Shape& s : kShapes)
    for (const Case& c : cases)
      for (int rep = 0; rep < 6; ++rep) {
        Tensor img = randn(s, g);
        Tensor draws = upcoming_draws(g);
        Generator probe = g;
        const data::ErasingOptions opt{c.p, c.s0, c.s1, c.r0, c.r1, 0.0f};
        const data::EraseParams e = data::erasing_params(s[1], s[2], opt, probe);
        const uint64_t before = g.offset();
        Tensor mine = data::random_erasing(img, g, opt);
        EXPECT_EQ(g.offset(), probe.offset()) << "random_erasing draws as erasing_params";
        auto ref = torch_ref("data.random_erasing", {{"img", img}, {"draws", draws}},
                             {{"p", c.p}, {"scale", {c.s0, c.s1}}, {"ratio", {c.r0, c.r1}}});
        expect_like_torchvision(mine, g.offset() - before, ref,
                                shape_str(s) + " p " + std::to_string(c.p) + " scale " + std::to_string(c.s0));
        if (e.erase) ++erased;
        else if (g.offset() - before == 1) ++skipped;
        else ++fallback;
      }
  EXPECT_GT(erased, 0);
  EXPECT_GT(skipped, 0);
  EXPECT_GT(fallback, 0);
}

TEST(Transforms, DeterministicOpsMatchFunctional) {
  Generator g(24);
  for (const Shape& s : kShapes) {
    Tensor img = randn(s, g);
    EXPECT_TENSOR_NEAR(data::hflip(img), torch_ref("data.hflip", {{"img", img}}).at("out"), 0.0, 0.0) << shape_str(s);
    const int64_t h = s[1], w = s[2];
    // Boxes inside, touching the padding, and past the padded image (zeros there too).
    for (auto [pad, top, left, oh, ow] : std::vector<std::array<int64_t, 5>>{
             {0, 0, 0, h, w}, {2, 0, 0, h, w}, {2, 4, 3, h, w}, {3, 1, 2, h + 1, w + 2}, {1, -2, -1, 3, 4},
             {0, h - 1, w - 1, 3, 3}}) {
      auto ref = torch_ref("data.pad_crop", {{"img", img}},
                           {{"padding", pad}, {"top", top}, {"left", left}, {"h", oh}, {"w", ow}});
      EXPECT_TENSOR_NEAR(data::pad_crop(img, pad, top, left, oh, ow), ref.at("out"), 0.0, 0.0)
          << shape_str(s) << " pad " << pad << " top " << top << " left " << left;
    }
    for (auto [top, left, eh, ew] : std::vector<std::array<int64_t, 4>>{{0, 0, 1, 1}, {0, 0, h, w}, {h / 2, w / 3, h - h / 2, 1}, {1, 0, 0, 3}}) {
      auto ref = torch_ref("data.erase", {{"img", img}}, {{"top", top}, {"left", left}, {"h", eh}, {"w", ew}, {"value", 0.5}});
      EXPECT_TENSOR_NEAR(data::erase(img, top, left, eh, ew, 0.5f), ref.at("out"), 0.0, 0.0) << shape_str(s);
    }
  }
}

TEST(Transforms, NormalizeMatchesTorchvisionWithSpecialValues) {
  Generator g(25);
  const float inf = std::numeric_limits<float>::infinity();
  for (const Shape& s : kShapes) {
    Tensor img = randn(s, g) * 100.0;
    float* p = img.data<float>();
    p[0] = inf;
    p[1 % img.numel()] = -inf;
    p[2 % img.numel()] = NAN;
    p[3 % img.numel()] = 3e38f;
    std::vector<float> mean, std;
    for (int64_t c = 0; c < s[0]; ++c) {
      mean.push_back(float(g.uniform()));
      std.push_back(float(0.1 + g.uniform()));
    }
    auto ref = torch_ref("data.normalize", {{"img", img}}, {{"mean", mean}, {"std", std}});
    EXPECT_TENSOR_NEAR(data::normalize(img, mean, std), ref.at("out"), 0.0, 0.0) << shape_str(s);
    auto ref1 = torch_ref("data.normalize", {{"img", img}}, {{"mean", std::vector<float>{0.2860f}}, {"std", std::vector<float>{0.3530f}}});
    EXPECT_TENSOR_NEAR(data::normalize(img, {0.2860f}, {0.3530f}), ref1.at("out"), 0.0, 0.0) << shape_str(s);
    // A tiny std overflows to inf as in torch.
    auto ref2 = torch_ref("data.normalize", {{"img", img}}, {{"mean", std::vector<float>{0.0f}}, {"std", std::vector<float>{1e-38f}}});
    EXPECT_TENSOR_NEAR(data::normalize(img, {0.0f}, {1e-38f}), ref2.at("out"), 0.0, 0.0) << shape_str(s);
  }
}

TEST(Transforms, InputIsNotModifiedAndViewsWork) {
  Generator g(26);
  Tensor base = randn({2, 9, 10}, g);
  Tensor view = base.transpose(1, 2);   // (2, 10, 9), not contiguous
  Tensor keep = base.clone();
  Tensor out = data::hflip(view);
  EXPECT_TENSOR_NEAR(out, torch_ref("data.hflip", {{"img", view.contiguous()}}).at("out"), 0.0, 0.0);
  data::random_erasing(view, g, {1.0, 0.1, 0.3, 0.3, 3.3, 0.0f});
  data::normalize(view, {1.0f}, {2.0f});
  data::random_crop(view, 10, 9, 2, g);
  EXPECT_TENSOR_NEAR(base, keep, 0.0, 0.0);
}

TEST(Transforms, ErrorMessages) {
  Generator g(27);
  Tensor img = Tensor::zeros({1, 28, 28});
  EXPECT_EQ(error_of([&] { data::random_crop(img, 40, 40, 4, g); }),
            "random_crop: crop size [40, 40] is larger than the padded image [36, 36]");
  EXPECT_EQ(error_of([&] { data::random_crop(img, 28, 28, -1, g); }), "random_crop: expected padding >= 0, got -1");
  EXPECT_EQ(error_of([&] { data::random_crop(Tensor::zeros({28, 28}), 28, 28, 0, g); }),
            "random_crop: expected a (C, H, W) f32 image, got a f32 tensor of shape [28, 28]");
  EXPECT_EQ(error_of([&] { data::hflip(Tensor::zeros({1, 2, 2}, DType::f64)); }),
            "hflip: expected a (C, H, W) f32 image, got a f64 tensor of shape [1, 2, 2]");
  EXPECT_EQ(error_of([&] { data::random_hflip(img, 1.5, g); }), "random_hflip: expected p in [0, 1], got 1.5");
  EXPECT_EQ(error_of([&] { data::erase(img, 20, 0, 10, 5, 0.0f); }),
            "erase: expected the box (top 20, left 0, h 10, w 5) inside the image of size [28, 28]");
  EXPECT_EQ(error_of([&] { data::random_erasing(img, g, {1.0, 0.5, 0.1, 0.3, 3.3, 0.0f}); }),
            "random_erasing: expected 0 <= scale_lo <= scale_hi <= 1, got scale (0.5, 0.1)");
  EXPECT_EQ(error_of([&] { data::random_erasing(img, g, {-0.1, 0.02, 0.33, 0.3, 3.3, 0.0f}); }),
            "random_erasing: expected p in [0, 1], got -0.1");
  EXPECT_EQ(error_of([&] { data::random_erasing(img, g, {0.5, 0.02, 0.33, 0.0, 3.3, 0.0f}); }),
            "random_erasing: expected 0 < ratio_lo <= ratio_hi, got ratio (0, 3.3)");
  Tensor rgb = Tensor::zeros({3, 4, 4});
  EXPECT_EQ(error_of([&] { data::normalize(rgb, {0.f, 0.f}, {1.f}); }),
            "normalize: expected 1 or 3 mean values, got 2");
  EXPECT_EQ(error_of([&] { data::normalize(rgb, {0.f}, {1.f, 0.f, 1.f}); }),
            "normalize: expected non-zero std, got std[1] = 0");
}

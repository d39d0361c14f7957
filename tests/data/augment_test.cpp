// RandAugment against torchvision 0.14 (each op through _apply_op on the same u8 tensor; the whole
// transform through torchvision's RandAugment fed attn's draws), Mixup/CutMix against timm's
// formulas given the same lam and box centre, the Beta sampler's moments, and the repeated-
// augmentation order.
#include <gtest/gtest.h>

#include <cmath>

#include "attn/attn.h"
#include "attn/data/augment.h"
#include "draws.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::upcoming_draws;
using test::torch_ref;

namespace {

// A u8 (C, H, W) image: a blob on a background plus noise (some saturated pixels).
Tensor image(int64_t c, int64_t h, int64_t w, Generator& g) {
  Tensor t = Tensor::empty({c, h, w}, DType::u8);
  uint8_t* p = t.data<uint8_t>();
  const double cy = g.uniform() * double(h), cx = g.uniform() * double(w), r = 0.3 * double(std::min(h, w)) + 1;
  for (int64_t k = 0; k < c; ++k)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        const double d = std::hypot(double(y) - cy, double(x) - cx);
        const double v = (d < r ? 200.0 - 40.0 * double(k) : 30.0) + 80.0 * (g.uniform() - 0.5);
        p[(k * h + y) * w + x] = uint8_t(std::clamp(std::round(v), 0.0, 255.0));
      }
  return t;
}

const std::vector<Shape> kShapes = {{1, 28, 28}, {3, 13, 17}, {1, 5, 7}, {1, 2, 2}, {3, 1, 9}};

}  // namespace

TEST(RandAugment, MagnitudeTablesMatchTorchvision) {
  for (int64_t bins : {31, 10, 2, 17, 40, 100})
    for (auto [h, w] : std::vector<std::pair<int64_t, int64_t>>{{28, 28}, {13, 7}, {224, 224}}) {
      auto ref = torch_ref("images.aug_space", {}, {{"num_bins", bins}, {"h", h}, {"w", w}});
      const auto& ops = data::rand_augment_ops();
      ASSERT_EQ(int64_t(ops.size()), ref.at("out").size(1));
      std::string names;
      for (auto op : ops) names += (names.empty() ? "" : "\n") + std::string(data::aug_op_name(op));
      const auto nb = ref.at("names").to_vector<uint8_t>();
      EXPECT_EQ(names, std::string(nb.begin(), nb.end()));
      std::vector<double> mine;
      for (int64_t b = 0; b < bins; ++b)
        for (auto op : ops) mine.push_back(data::aug_op_magnitude(op, b, bins, h, w));
      EXPECT_TENSOR_NEAR(Tensor::from_vector<double>(mine, {bins, int64_t(ops.size())}), ref.at("out"), 0.0, 0.0)
          << bins << " bins, " << h << " x " << w;
      for (size_t k = 0; k < ops.size(); ++k)
        EXPECT_EQ(data::aug_op_signed(ops[k]), ref.at("signed").at({int64_t(k)}) != 0) << data::aug_op_name(ops[k]);
    }
}

TEST(RandAugment, EveryOpMatchesTorchvision) {
  Generator g(31);
  int compared = 0;
  for (const Shape& s : kShapes)
    for (auto op : data::rand_augment_ops())
      for (int64_t bin : {0, 3, 9, 17, 30}) {
        for (double sign : {1.0, -1.0}) {
          if (sign < 0 && !data::aug_op_signed(op)) continue;
          const double mag = sign * data::aug_op_magnitude(op, bin, 31, s[1], s[2]);
          Tensor img = image(s[0], s[1], s[2], g);
          Tensor mine = data::apply_aug_op(img, op, mag);
          auto ref = torch_ref("images.aug_op", {{"img", img}}, {{"op", data::aug_op_name(op)}, {"magnitude", mag}});
          EXPECT_TENSOR_NEAR(mine, ref.at("out"), 0.0, 0.0)
              << data::aug_op_name(op) << " magnitude " << mag << " on " << shape_str(s);
          ++compared;
        }
      }
  EXPECT_GT(compared, 500);
}

TEST(RandAugment, SpecialImages) {
  // Constant images (autocontrast's infinite scale, equalize's zero step), all-black/white, tiny.
  for (int v : {0, 77, 255})
    for (const Shape& s : std::vector<Shape>{{1, 6, 6}, {3, 4, 5}})
      for (auto op : data::rand_augment_ops()) {
        Tensor img = Tensor::full(s, v, DType::u8);
        const double mag = data::aug_op_magnitude(op, 12, 31, s[1], s[2]);
        auto ref = torch_ref("images.aug_op", {{"img", img}}, {{"op", data::aug_op_name(op)}, {"magnitude", mag}});
        EXPECT_TENSOR_NEAR(data::apply_aug_op(img, op, mag), ref.at("out"), 0.0, 0.0)
            << data::aug_op_name(op) << " on constant " << v;
      }
}

TEST(RandAugment, WholeTransformMatchesTorchvisionDraws) {
  Generator g(32);
  for (const Shape& s : kShapes)
    for (auto [n, m] : std::vector<std::pair<int64_t, int64_t>>{{2, 9}, {1, 30}, {4, 5}, {0, 9}})
      for (int rep = 0; rep < 4; ++rep) {
        Tensor img = image(s[0], s[1], s[2], g);
        Tensor draws = upcoming_draws(g);
        const uint64_t before = g.offset();
        Tensor mine = data::rand_augment(img, {.num_ops = n, .magnitude = m, .num_bins = 31}, g);
        auto ref = torch_ref("images.rand_augment", {{"img", img}, {"draws", draws}},
                             {{"num_ops", n}, {"magnitude", m}, {"num_bins", 31}});
        EXPECT_TENSOR_NEAR(mine, ref.at("out"), 0.0, 0.0) << shape_str(s) << " N " << n << " M " << m;
        EXPECT_EQ(int64_t(g.offset() - before), int64_t(ref.at("used").item())) << "draws";
      }
}

TEST(RandAugment, FloatImagesGoThroughU8) {
  Generator g(33);
  Tensor u = image(1, 28, 28, g);
  Tensor f = u.to(DType::f32);
  {
    float* p = f.data<float>();
    for (int64_t i = 0; i < f.numel(); ++i) p[i] /= 255.0f;
  }
  Generator g1(99), g2(99);
  Tensor ru = data::rand_augment(u, {}, g1);
  Tensor rf = data::rand_augment(f, {}, g2);
  Tensor expect = ru.to(DType::f32);
  float* p = expect.data<float>();
  for (int64_t i = 0; i < expect.numel(); ++i) p[i] /= 255.0f;
  EXPECT_TENSOR_NEAR(rf, expect, 0.0, 0.0);
  EXPECT_EQ(g1.offset(), g2.offset());
  EXPECT_EQ(error_of([&] { data::rand_augment(u, {.num_ops = 2, .magnitude = 31, .num_bins = 31}, g); }),
            "rand_augment: expected num_ops >= 0, num_bins >= 2 and 0 <= magnitude < num_bins, got num_ops 2, magnitude 31, "
            "num_bins 31");
  EXPECT_EQ(error_of([&] { data::rand_augment(Tensor::zeros({2, 4, 4}, DType::u8), {}, g); }),
            "rand_augment: expected a u8 or f32 (C, H, W) image with C = 1 or 3, got u8 of shape [2, 4, 4]");
  EXPECT_EQ(error_of([] { data::parse_aug_op("Invert"); }),
            "rand_augment: unknown op 'Invert' (known: Identity, ShearX, ShearY, TranslateX, TranslateY, Rotate, "
            "Brightness, Color, Contrast, Sharpness, Posterize, Solarize, AutoContrast, Equalize)");
  EXPECT_EQ(data::parse_aug_op("ShearY"), data::AugOp::shear_y);
}

TEST(Mixup, MatchesTimmFormulas) {
  Generator g(41);
  int compared = 0;
  for (auto [b, c, h, w] : std::vector<std::array<int64_t, 4>>{{4, 1, 28, 28}, {6, 3, 7, 11}, {2, 1, 5, 5}})
    for (bool cutmix : {false, true})
      for (double lam : {1.0, 0.0, 0.13, 0.5, 0.77, 0.999})
        for (double smoothing : {0.0, 0.1}) {
          Tensor x = randn({b, c, h, w}, g);
          Tensor y = Tensor::from_vector<int64_t>([&, b = b] {
            std::vector<int64_t> v;
            for (int64_t i = 0; i < b; ++i) v.push_back(g.randint(10));
            return v;
          }(), {b});
          const int64_t cy = g.randint(h), cx = g.randint(w);
          data::MixupOptions opt;
          opt.label_smoothing = smoothing;
          opt.num_classes = 10;
          data::MixupParams p;
          if (lam != 1.0) {
            if (cutmix) {
              p = data::cutmix_box(lam, h, w, cy, cx);
            } else {
              p.lam = lam;
            }
          }
          data::MixedBatch mb = data::apply_mixup(x, y, p, opt);
          auto ref = torch_ref("images.mixup", {{"x", x}, {"target", y}},
                               {{"lam", lam}, {"cutmix", cutmix}, {"cy", cy}, {"cx", cx}, {"smoothing", smoothing},
                                {"num_classes", 10}});
          const std::string ctx = std::string(cutmix ? "cutmix" : "mixup") + " lam " + std::to_string(lam) + " " +
                                  shape_str({b, c, h, w});
          EXPECT_TENSOR_NEAR(mb.images, ref.at("x"), 0.0, 0.0) << ctx;
          EXPECT_TENSOR_NEAR(mb.targets, ref.at("target"), 0.0, 0.0) << ctx;
          EXPECT_DOUBLE_EQ(mb.params.lam, ref.at("lam").item()) << ctx;
          if (cutmix && lam != 1.0)
            EXPECT_EQ((std::vector<int64_t>{p.yl, p.yh, p.xl, p.xh}), ref.at("box").to_vector<int64_t>()) << ctx;
          ++compared;
        }
  EXPECT_EQ(compared, 72);
}

TEST(Mixup, ParamsAndBetaSampler) {
  Generator g(42);
  // Beta(a, a): mean 1/2, variance 1 / (4 (2a + 1)), for a < 1, = 1 and > 1.
  for (double a : {0.2, 0.8, 1.0, 3.0}) {
    const int n = 20000;
    double s = 0, s2 = 0;
    for (int i = 0; i < n; ++i) {
      const double v = data::sample_beta(a, a, g);
      ASSERT_TRUE(v >= 0 && v <= 1) << v;
      s += v;
      s2 += v * v;
    }
    const double mean = s / n, var = s2 / n - mean * mean, want_var = 1.0 / (4.0 * (2.0 * a + 1.0));
    EXPECT_NEAR(mean, 0.5, 5 * std::sqrt(want_var / n)) << "alpha " << a;
    EXPECT_NEAR(var, want_var, 0.05 * want_var + 0.002) << "alpha " << a;
  }
  data::MixupOptions opt;
  opt.prob = 0.0;
  data::MixupParams p = data::mixup_params(opt, 28, 28, g);
  EXPECT_EQ(p.lam, 1.0);
  EXPECT_FALSE(p.cutmix);
  opt.prob = 1.0;
  opt.mixup_alpha = 0.0;
  int cut = 0;
  for (int i = 0; i < 50; ++i) {
    p = data::mixup_params(opt, 28, 28, g);
    cut += p.cutmix;
    if (p.cutmix) {
      EXPECT_DOUBLE_EQ(p.lam, 1.0 - double((p.yh - p.yl) * (p.xh - p.xl)) / 784.0);
    }
  }
  EXPECT_EQ(cut, 50);
  opt.mixup_alpha = 0.8;
  opt.cutmix_alpha = 1.0;
  cut = 0;
  for (int i = 0; i < 400; ++i) cut += data::mixup_params(opt, 28, 28, g).cutmix;
  EXPECT_GT(cut, 150);
  EXPECT_LT(cut, 250);
  // mixup() = mixup_params + apply_mixup on the same draws.
  Tensor x = randn({4, 1, 6, 6}, g);
  Tensor y = Tensor::from_vector<int64_t>({1, 2, 3, 4}, {4});
  Generator a(7), b(7);
  data::MixedBatch m1 = data::mixup(x, y, opt, a);
  data::MixedBatch m2 = data::apply_mixup(x, y, data::mixup_params(opt, 6, 6, b), opt);
  EXPECT_TENSOR_NEAR(m1.images, m2.images, 0.0, 0.0);
  EXPECT_TENSOR_NEAR(m1.targets, m2.targets, 0.0, 0.0);

  EXPECT_EQ(error_of([&] { data::apply_mixup(randn({3, 1, 4, 4}, g), y.slice(0, 0, 3), {}, opt); }),
            "mixup: expected an even batch size, got 3");
  EXPECT_EQ(error_of([&] { data::apply_mixup(x, y.slice(0, 0, 2), {}, opt); }),
            "mixup: expected labels of shape [4], got [2]");
  EXPECT_EQ(error_of([&] { data::mixup_target(Tensor::from_vector<int64_t>({3, 10}, {2}), 10, 1.0, 0.1); }),
            "mixup_target: label 10 is outside [0, 10)");
  data::MixupOptions none;
  none.mixup_alpha = none.cutmix_alpha = 0;
  EXPECT_EQ(error_of([&] { data::mixup_params(none, 4, 4, g); }),
            "mixup: expected mixup_alpha or cutmix_alpha > 0, got 0 and 0");
}

TEST(RepeatedAugmentation, OrderIsRASamplers) {
  Generator g(51), g2(51);
  const int64_t n = 1000;
  auto order = data::repeated_augmentation_order(n, 3, g);
  const auto perm = randperm(n, g2).to_vector<int64_t>();
  ASSERT_EQ(int64_t(order.size()), n / 256 * 256);
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], perm[i / 3]) << i;
  Generator g3(1);
  auto plain = data::repeated_augmentation_order(10, 2, g3, false);
  EXPECT_EQ(plain, (std::vector<int64_t>{0, 0, 1, 1, 2, 2, 3, 3, 4, 4}));
  EXPECT_EQ(error_of([&] { data::repeated_augmentation_order(10, 0, g3); }),
            "repeated_augmentation_order: expected n >= 0 and repeats >= 1, got n 10, repeats 0");
}

// Bicubic resampling (align_corners=False) against torch.nn.functional.interpolate at sizes below,
// equal to and above the input (primes, non-square), with NaN / inf / large values, and the ViT
// position-embedding resize (prefix tokens kept apart) against the same done in torch.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "attn/attn.h"
#include "attn/nn/pos_embed.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using nlohmann::json;

TEST(Bicubic, MatchesTorchAcrossSizes) {
  struct Case { int64_t n, c, h, w, oh, ow; };
  const Case cases[] = {{1, 3, 5, 7, 11, 13}, {2, 2, 13, 11, 5, 3}, {1, 4, 4, 4, 7, 7}, {1, 2, 14, 14, 24, 24},
                        {1, 1, 1, 1, 3, 2},   {1, 2, 3, 17, 3, 5},   {1, 2, 6, 6, 6, 6}, {1, 5, 2, 3, 1, 1}};
  for (DType dt : {DType::f32, DType::f64}) {
    for (const Case& k : cases) {
      manual_seed(uint64_t(k.h * 100 + k.ow));
      const Tensor x = Tensor::randn({k.n, k.c, k.h, k.w}, dt);
      auto ref = test::torch_ref("pretrained.bicubic", {{"x", x}}, {{"h", k.oh}, {"w", k.ow}});
      const Tensor y = nn::interpolate_bicubic(x, k.oh, k.ow);
      EXPECT_EQ(y.dtype(), dt);
      const double tol = dt == DType::f32 ? 2e-6 : 1e-12;   // torch accumulates f32 in f32
      EXPECT_TENSOR_NEAR(y, ref.at("out"), tol, tol)
          << dtype_name(dt) << " " << k.h << "x" << k.w << " -> " << k.oh << "x" << k.ow;
    }
  }
}

TEST(Bicubic, SpecialValuesAsTorch) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  manual_seed(3);
  Tensor x = Tensor::randn({1, 3, 7, 5});
  float* p = x.data<float>();
  p[3] = nan;             // channel 0
  p[35 + 12] = inf;       // channel 1
  p[35 + 13] = -inf;
  for (int i = 0; i < 35; ++i) p[70 + i] *= 1e30f;   // channel 2: large, finite
  for (auto [oh, ow] : {std::pair<int64_t, int64_t>{11, 3}, {7, 5}, {3, 9}}) {
    auto ref = test::torch_ref("pretrained.bicubic", {{"x", x}}, {{"h", oh}, {"w", ow}});
    const Tensor y = nn::interpolate_bicubic(x, oh, ow), e = ref.at("out");
    // NaN and +-inf (channels 0, 1) land where torch puts them; the large channel agrees to rounding
    // relative to the input's scale (sums of +-1e30 terms cancel).
    EXPECT_TENSOR_NEAR(y.slice(1, 0, 2), e.slice(1, 0, 2), 2e-6, 2e-6) << oh << "x" << ow;
    EXPECT_TENSOR_NEAR(y.select(1, 2) * 1e-30, e.select(1, 2) * 1e-30, 2e-6, 2e-6) << oh << "x" << ow;
  }
}

TEST(PosEmbed, ResampleMatchesTorch) {
  struct Case { int64_t prefix, oh, ow, nh, nw, d; };
  const Case cases[] = {{1, 4, 4, 6, 6, 8}, {2, 3, 5, 7, 4, 6}, {0, 5, 5, 3, 3, 5}, {2, 14, 14, 24, 24, 3}};
  for (const Case& k : cases) {
    manual_seed(uint64_t(k.oh * 10 + k.nw));
    const Tensor pos = Tensor::randn({1, k.prefix + k.oh * k.ow, k.d});
    auto ref = test::torch_ref("pretrained.pos_embed", {{"pos", pos}},
                               {{"prefix", k.prefix}, {"old_h", k.oh}, {"old_w", k.ow}, {"new_h", k.nh},
                                {"new_w", k.nw}});
    const Tensor y = nn::resample_pos_embed(pos, {k.oh, k.ow}, {k.nh, k.nw}, k.prefix);
    EXPECT_TENSOR_NEAR(y, ref.at("out"), 2e-6, 2e-6) << k.oh << "x" << k.ow << " -> " << k.nh << "x" << k.nw;
    // The prefix tokens pass through unchanged (where there are any).
    if (k.prefix > 0) EXPECT_TENSOR_NEAR(y.slice(1, 0, k.prefix), pos.slice(1, 0, k.prefix), 0, 0);
  }
  manual_seed(5);
  const Tensor pos = Tensor::randn({1, 2 + 9, 4});
  EXPECT_TENSOR_NEAR(nn::resample_pos_embed(pos, {3, 3}, {3, 3}, 2), pos, 0, 0);   // same grid: a copy
}

TEST(Bicubic, AntialiasMatchesTorch) {
  // Shrinking (where the filter widens: 2 * in/out taps each side), growing (a = -0.5 and the border
  // renormalised, not replicated), one side unchanged (that pass skipped), non-square, 1 x 1.
  struct Case { int64_t n, c, h, w, oh, ow; };
  const Case cases[] = {{1, 3, 24, 24, 14, 14}, {2, 2, 13, 11, 5, 3}, {1, 4, 4, 4, 7, 7}, {1, 2, 14, 14, 24, 24},
                        {1, 1, 1, 1, 3, 2},     {1, 2, 3, 17, 3, 5},  {1, 2, 9, 6, 4, 6}, {1, 5, 2, 3, 1, 1},
                        {1, 2, 37, 5, 3, 8}};
  for (DType dt : {DType::f32, DType::f64}) {
    for (const Case& k : cases) {
      manual_seed(uint64_t(k.h * 100 + k.ow + 7));
      const Tensor x = Tensor::randn({k.n, k.c, k.h, k.w}, dt);
      auto ref = test::torch_ref("pretrained.bicubic", {{"x", x}}, {{"h", k.oh}, {"w", k.ow}, {"antialias", true}});
      const Tensor y = nn::interpolate_bicubic(x, k.oh, k.ow, /*antialias=*/true);
      EXPECT_EQ(y.dtype(), dt);
      const double tol = dt == DType::f32 ? 2e-6 : 1e-12;
      EXPECT_TENSOR_NEAR(y, ref.at("out"), tol, tol)
          << "antialias " << dtype_name(dt) << " " << k.h << "x" << k.w << " -> " << k.oh << "x" << k.ow;
    }
  }
  // The two variants differ (the flag reaches the kernel), most when shrinking.
  manual_seed(11);
  const Tensor x = Tensor::randn({1, 2, 24, 24});
  const std::vector<float> a = nn::interpolate_bicubic(x, 14, 14, true).to_vector<float>(),
                           b = nn::interpolate_bicubic(x, 14, 14, false).to_vector<float>();
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, double(std::fabs(a[i] - b[i])));
  EXPECT_GT(d, 0.05);
}

TEST(PosEmbed, ResampleAntialiasMatchesTorch) {
  // timm's resample_abs_pos_embed(antialias=True): a 384 checkpoint's 24 x 24 grid to 224's 14 x 14,
  // and back up, with one and two prefix tokens; non-square.
  struct Case { int64_t prefix, oh, ow, nh, nw, d; };
  const Case cases[] = {{1, 24, 24, 14, 14, 4}, {2, 14, 14, 24, 24, 3}, {0, 5, 7, 3, 9, 5}};
  for (const Case& k : cases) {
    manual_seed(uint64_t(k.oh * 10 + k.nw + 1));
    const Tensor pos = Tensor::randn({1, k.prefix + k.oh * k.ow, k.d});
    auto ref = test::torch_ref("pretrained.pos_embed", {{"pos", pos}},
                               {{"prefix", k.prefix}, {"old_h", k.oh}, {"old_w", k.ow}, {"new_h", k.nh},
                                {"new_w", k.nw}, {"antialias", true}});
    const Tensor y = nn::resample_pos_embed(pos, {k.oh, k.ow}, {k.nh, k.nw}, k.prefix, /*antialias=*/true);
    EXPECT_TENSOR_NEAR(y, ref.at("out"), 2e-6, 2e-6) << k.oh << "x" << k.ow << " -> " << k.nh << "x" << k.nw;
    if (k.prefix > 0) EXPECT_TENSOR_NEAR(y.slice(1, 0, k.prefix), pos.slice(1, 0, k.prefix), 0, 0);
  }
}

TEST(PosEmbed, Errors) {
  EXPECT_EQ(error_of([] { nn::resample_pos_embed(Tensor::zeros({1, 10, 4}), {3, 3}, {4, 4}, 2); }),
            "resample_pos_embed: expected 2 prefix tokens + a 3x3 grid = 11 tokens, got [1, 10, 4]");
  EXPECT_EQ(error_of([] { nn::resample_pos_embed(Tensor::zeros({10, 4}), {3, 3}, {4, 4}, 1); }),
            "resample_pos_embed: expected a position embedding of shape (1, tokens, dim), got [10, 4]");
  EXPECT_EQ(error_of([] { nn::interpolate_bicubic(Tensor::zeros({2, 3, 4}), 5, 5); }),
            "interpolate_bicubic: expected a 4-d (N, C, H, W) tensor, got [2, 3, 4]");
  EXPECT_EQ(error_of([] { nn::interpolate_bicubic(Tensor::zeros({1, 1, 2, 2}, DType::i64), 5, 5); }),
            "interpolate_bicubic: expected a floating tensor, got i64");
  EXPECT_EQ(error_of([] { nn::interpolate_bicubic(Tensor::zeros({1, 1, 2, 2}), 0, 5); }),
            "interpolate_bicubic: expected a positive output size, got [0, 5]");
}

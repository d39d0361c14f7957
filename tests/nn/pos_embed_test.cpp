// Positional encodings: the sinusoidal table against the Annotated Transformer's torch code, the
// 2-d sin-cos table against MAE's numpy get_2d_sincos_pos_embed, the learned kinds (init, names,
// gradients against torch) and the PosEmbed module's checks.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "attn/attn.h"
#include "attn/nn/pos_embed.h"
#include "errors.h"
#include "params.h"
#include "torch_ref.h"

using namespace attn;
using test::param_listing;
using test::error_of;
using test::torch_ref;

TEST(PosEmbed, SinusoidalAsTheTransformerPaper) {
  for (auto [n, d] : std::vector<std::pair<int64_t, int64_t>>{{1, 2}, {50, 64}, {17, 31}, {128, 512}}) {
    auto ref = torch_ref("attention_modules.sinusoidal", {}, {{"n", n}, {"d", d}});
    EXPECT_TENSOR_NEAR(nn::sinusoidal_pos_embed(n, d, DType::f64), ref.at("pe"), 1e-12, 1e-12) << n << "x" << d;
    EXPECT_TENSOR_NEAR(nn::sinusoidal_pos_embed(n, d), ref.at("pe").to(DType::f32), 1e-7, 0) << n << "x" << d;
  }
  // PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...): spot values from the formula.
  Tensor pe = nn::sinusoidal_pos_embed(10, 8, DType::f64);
  EXPECT_DOUBLE_EQ(pe.at({3, 4}), std::sin(3.0 / std::pow(10000.0, 4.0 / 8.0)));
  EXPECT_DOUBLE_EQ(pe.at({7, 5}), std::cos(7.0 / std::pow(10000.0, 4.0 / 8.0)));
  EXPECT_DOUBLE_EQ(pe.at({0, 1}), 1.0);
}

TEST(PosEmbed, SinCos2dAsMae) {
  struct Case { int64_t d, gh, gw; bool cls; };
  for (Case c : {Case{16, 4, 4, false}, Case{768, 14, 14, true}, Case{32, 3, 5, true}, Case{8, 7, 2, false}}) {
    auto ref = torch_ref("attention_modules.sincos_2d", {},
                         {{"d", c.d}, {"gh", c.gh}, {"gw", c.gw}, {"cls_token", c.cls}});
    Tensor pe = nn::sincos_2d_pos_embed(c.d, c.gh, c.gw, c.cls, DType::f64);
    EXPECT_EQ(pe.shape(), Shape({c.gh * c.gw + (c.cls ? 1 : 0), c.d}));
    EXPECT_TENSOR_NEAR(pe, ref.at("pe"), 1e-12, 1e-12) << c.d << " " << c.gh << "x" << c.gw;
    EXPECT_TENSOR_NEAR(nn::sincos_2d_pos_embed(c.d, c.gh, c.gw, c.cls), ref.at("pe").to(DType::f32), 1e-7, 0);
  }
  EXPECT_EQ(error_of([] { nn::sincos_2d_pos_embed(10, 2, 2); }),
            "sincos_2d_pos_embed: expected a dim divisible by 4, got 10");
}

TEST(PosEmbed, LearnedAsTimm) {
  Generator g(71);
  nn::PosEmbed pos({.kind = nn::PosEmbedKind::learned, .dim = 64, .num_positions = 197}, g);
  ASSERT_EQ(pos.named_parameters().size(), 1u);
  EXPECT_EQ(pos.named_parameters()[0].first, "pos_embed");
  EXPECT_EQ(pos.pos_embed.shape(), Shape({1, 197, 64}));
  // trunc_normal(std .02) in [-2, 2]: the sample sd is close to .02.
  const auto v = pos.pos_embed.to_vector<double>();
  double ss = 0;
  for (double x : v) ss += x * x;
  EXPECT_NEAR(std::sqrt(ss / double(v.size())), 0.02, 0.001);
  Tensor x = randn({2, 197, 64}, g);
  Tensor y = pos.forward(x);
  EXPECT_TENSOR_NEAR(y, x + pos.pos_embed, 0, 0);
  sum(y * y).backward();
  EXPECT_TENSOR_NEAR(pos.pos_embed.grad(), sum(y.detach() * 2.0, {0}, true), 1e-5, 1e-5);
  // Fewer tokens take the first positions.
  Tensor x2 = randn({1, 50, 64}, g);
  EXPECT_TENSOR_NEAR(pos.forward(x2), x2 + pos.pos_embed.slice(1, 0, 50), 0, 0);
  EXPECT_EQ(error_of([&] { pos.forward(randn({1, 198, 64}, g)); }),
            "PosEmbed: expected at most 197 positions, got input of shape [1, 198, 64]");
  EXPECT_EQ(error_of([&] { pos.forward(randn({1, 5, 32}, g)); }),
            "PosEmbed: expected input of shape (B, T, 64), got [1, 5, 32]");
}

TEST(PosEmbed, FixedKindsAreBuffers) {
  nn::PosEmbed sc({.kind = nn::PosEmbedKind::sincos_2d, .dim = 32, .grid_h = 3, .grid_w = 5, .cls_token = true});
  EXPECT_EQ(sc.named_parameters().size(), 0u);
  auto sd = sc.state_dict();
  ASSERT_EQ(sd.size(), 1u);   // MAE's checkpoint key
  EXPECT_EQ(sd.begin()->first, "pos_embed");
  EXPECT_EQ(sc.num_positions(), 16);
  EXPECT_TENSOR_NEAR(sc.embedding(), nn::sincos_2d_pos_embed(32, 3, 5, true).unsqueeze(0), 0, 0);
  Tensor x = Tensor::ones({2, 16, 32});
  EXPECT_TENSOR_NEAR(sc.forward(x), x + sc.embedding(), 0, 0);
  EXPECT_EQ(error_of([&] { sc.forward(Tensor::ones({2, 15, 32})); }),
            "PosEmbed: expected input of shape (B, 16, 32), got [2, 15, 32]");
  nn::PosEmbed sn({.kind = nn::PosEmbedKind::sinusoidal, .dim = 6, .num_positions = 9});
  EXPECT_TENSOR_NEAR(sn.embedding(), nn::sinusoidal_pos_embed(9, 6).unsqueeze(0), 0, 0);
  nn::PosEmbed none({.kind = nn::PosEmbedKind::none, .dim = 6});
  EXPECT_EQ(none.state_dict().size(), 0u);
  EXPECT_FALSE(none.embedding().defined());
  Tensor z = Tensor::ones({1, 1000, 6});
  EXPECT_TRUE(none.forward(z).is_same(z));
}

TEST(PosEmbed, Learned2dAsViTAblation) {
  Generator g(72);
  for (bool cls : {false, true}) {
    const int64_t D = 10, gh = 3, gw = 4;
    nn::PosEmbed pos({.kind = nn::PosEmbedKind::learned_2d, .dim = D, .grid_h = gh, .grid_w = gw, .cls_token = cls},
                     g);
    std::vector<std::string> want = {"col_embed[4, 5]", "row_embed[3, 5]"};
    if (cls) want.insert(want.begin(), "cls_pos_embed[1, 1, 10]");
    EXPECT_EQ(param_listing(pos), want);
    const int64_t N = gh * gw + (cls ? 1 : 0);
    Tensor gout = randn({1, N, D}, g);
    test::Tensors in = {{"col", pos.col_embed}, {"row", pos.row_embed}, {"g", gout}};
    if (cls) in["cls"] = pos.cls_pos_embed;
    auto ref = torch_ref("attention_modules.learned_2d", in);
    Tensor e = pos.embedding();
    sum(e * gout).backward();
    EXPECT_TENSOR_NEAR(e, ref.at("pe"), 0, 0);
    EXPECT_TENSOR_NEAR(pos.col_embed.grad(), ref.at("dcol"), 1e-6, 1e-6);
    EXPECT_TENSOR_NEAR(pos.row_embed.grad(), ref.at("drow"), 1e-6, 1e-6);
    if (cls) EXPECT_TENSOR_NEAR(pos.cls_pos_embed.grad(), ref.at("dcls"), 0, 0);
  }
  EXPECT_EQ(error_of([] { nn::PosEmbed({.kind = nn::PosEmbedKind::learned_2d, .dim = 7, .grid_h = 2, .grid_w = 2}); }),
            "PosEmbed: learned_2d needs an even dim, got 7");
}

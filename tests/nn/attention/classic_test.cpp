// The classic attention family (scores.h, local.h, hard.h): every score function, local-m,
// local-p and hard attention against hand-written PyTorch (forward, input and parameter
// gradients), finite differences in f64, masking edge cases and error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "attn/attn.h"
#include "attn/nn/attention/hard.h"
#include "attn/nn/attention/local.h"
#include "attn/nn/attention/scores.h"
#include "attn/nn/init.h"
#include "attn/ops/combine.h"
#include "attn/ops/softmax.h"
#include "errors.h"
#include "params.h"
#include "torch_ref.h"

using namespace attn;
using test::param_listing;
using test::error_of;
using test::torch_ref;

namespace {

// (B, S) u8 padding masks: example b pads its last `pads[b]` keys.
Tensor tail_padding(const std::vector<int64_t>& pads, int64_t S) {
  const int64_t B = int64_t(pads.size());
  Tensor m = Tensor::zeros({B, S}, DType::u8);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = S - pads[size_t(b)]; j < S; ++j) m.data<uint8_t>()[b * S + j] = 1;
  return m;
}

void add_params(test::Tensors& in, const nn::Module& m, const std::string& skip_prefix = "") {
  for (auto& [k, p] : m.named_parameters()) {
    std::string name = k;
    if (!skip_prefix.empty() && name.rfind(skip_prefix, 0) == 0) name = name.substr(skip_prefix.size());
    in["p." + name] = p;
  }
}

void expect_param_grads(const nn::Module& m, const test::Tensors& ref, double tol,
                        const std::string& skip_prefix = "") {
  for (auto& [k, p] : m.named_parameters()) {
    std::string name = k;
    if (!skip_prefix.empty() && name.rfind(skip_prefix, 0) == 0) name = name.substr(skip_prefix.size());
    ASSERT_TRUE(p.grad().defined()) << k;
    EXPECT_TENSOR_NEAR(p.grad(), ref.at("d." + name), tol, tol) << k;
  }
}

void make_biases_nonzero(nn::Module& m, Generator& g) {
  for (auto& [k, p] : m.named_parameters())
    if (k.size() >= 4 && k.substr(k.size() - 4) == "bias") nn::init::normal_(p, g, 0.0, 0.5);
}

struct ScoreCase {
  nn::ScoreKind kind;
  int64_t dq, dk;
  bool bias;
  double beta;
};

std::string case_name(const ScoreCase& c) {
  return std::string(nn::score_kind_name(c.kind)) + "_q" + std::to_string(c.dq) + "_k" + std::to_string(c.dk) +
         (c.bias ? "_bias" : "") + (c.beta != 1.0 ? "_beta" : "");
}

const ScoreCase kCases[] = {
    {nn::ScoreKind::dot, 8, 8, false, 1.0},        {nn::ScoreKind::general, 6, 10, false, 1.0},
    {nn::ScoreKind::general, 6, 10, true, 1.0},    {nn::ScoreKind::concat, 7, 5, false, 1.0},
    {nn::ScoreKind::concat, 7, 5, true, 1.0},      {nn::ScoreKind::cosine, 9, 9, false, 1.0},
    {nn::ScoreKind::cosine, 9, 9, false, 4.0},     {nn::ScoreKind::cosine, 6, 9, true, 2.5},
    {nn::ScoreKind::location, 6, 4, true, 1.0},
};

void PrintTo(const ScoreCase& c, std::ostream* os) { *os << case_name(c); }

}  // namespace

class ScoreVsTorch : public ::testing::TestWithParam<ScoreCase> {};

TEST_P(ScoreVsTorch, ForwardBackward) {
  const ScoreCase c = GetParam();
  Generator g(21);
  for (DType dt : {DType::f32, DType::f64}) {
    for (bool masked : {false, true}) {
      for (bool separate_values : {false, true}) {
        const int64_t B = 3, S = 11, Dv = 5;
        nn::ScoreAttention att({.kind = c.kind, .query_dim = c.dq, .key_dim = c.dk, .attn_dim = 7,
                                .max_length = 13, .bias = c.bias, .beta = c.beta, .dtype = dt},
                               g);
        make_biases_nonzero(att, g);
        Tensor s = randn({B, c.dq}, g, dt), h = randn({B, S, c.dk}, g, dt);
        Tensor v = separate_values ? randn({B, S, Dv}, g, dt) : Tensor();
        Tensor mask = masked ? tail_padding({0, 3, 10}, S) : Tensor();
        const int64_t dv = separate_values ? Dv : c.dk;
        Tensor gc = randn({B, dv}, g, dt), gw = randn({B, S}, g, dt);
        test::Tensors in = {{"s", s}, {"h", h}, {"gc", gc}, {"gw", gw}};
        if (v.defined()) in["v"] = v;
        if (mask.defined()) in["mask"] = mask;
        add_params(in, att);
        auto ref = torch_ref("attention_modules.score", in,
                             {{"kind", nn::score_kind_name(c.kind)}, {"beta", c.beta}, {"eps", 1e-8}});
        Tensor ss = s.clone().requires_grad_(), hh = h.clone().requires_grad_();
        Tensor vv = v.defined() ? v.clone().requires_grad_() : Tensor();
        auto [ctx, w] = att.forward(ss, hh, mask, vv);
        EXPECT_EQ(ctx.shape(), Shape({B, dv}));
        EXPECT_EQ(w.shape(), Shape({B, S}));
        (sum(ctx * gc) + sum(w * gw)).backward();
        const double tol = dt == DType::f32 ? 3e-5 : 1e-10;
        const std::string ctxt = "dt=" + std::string(dtype_name(dt)) + " masked=" + std::to_string(masked);
        EXPECT_TENSOR_NEAR(att.score(s, h), ref.at("scores"), tol, tol) << ctxt;
        EXPECT_TENSOR_NEAR(ctx, ref.at("context"), tol, tol) << ctxt;
        EXPECT_TENSOR_NEAR(w, ref.at("weights"), tol, tol) << ctxt;
        EXPECT_TENSOR_NEAR(ss.grad(), ref.at("ds"), tol, tol) << ctxt;
        if (ref.count("dh")) EXPECT_TENSOR_NEAR(hh.grad(), ref.at("dh"), tol, tol) << ctxt;
        else EXPECT_FALSE(hh.grad().defined()) << ctxt;   // location scores with separate values: h unused
        if (vv.defined()) EXPECT_TENSOR_NEAR(vv.grad(), ref.at("dv"), tol, tol) << ctxt;
        expect_param_grads(att, ref, tol * 3);
      }
    }
  }
}

TEST_P(ScoreVsTorch, FiniteDifferences) {
  const ScoreCase c = GetParam();
  Generator g(22);
  nn::ScoreAttention att({.kind = c.kind, .query_dim = c.dq, .key_dim = c.dk, .attn_dim = 4, .max_length = 6,
                          .bias = c.bias, .beta = c.beta, .dtype = DType::f64},
                         g);
  const Tensor mask = tail_padding({1, 0}, 5);
  EXPECT_TRUE(test::gradcheck(
      [&](const std::vector<Tensor>& in) {
        auto r = att.forward(in[0], in[1], mask);
        return concat({r.context, r.weights}, 1);
      },
      {randn({2, c.dq}, g, DType::f64), randn({2, 5, c.dk}, g, DType::f64)}));
}

INSTANTIATE_TEST_SUITE_P(All, ScoreVsTorch, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return case_name(info.param); });

TEST(ScoreAttention, ParameterNames) {
  using V = std::vector<std::string>;
  EXPECT_EQ(param_listing(nn::ScoreAttention({.kind = nn::ScoreKind::dot, .query_dim = 4})), V{});
  EXPECT_EQ(param_listing(nn::ScoreAttention({.kind = nn::ScoreKind::general, .query_dim = 4, .key_dim = 6})),
            V{"W_a.weight[4, 6]"});
  EXPECT_EQ(param_listing(nn::ScoreAttention(
                {.kind = nn::ScoreKind::concat, .query_dim = 4, .key_dim = 6, .attn_dim = 3, .bias = true})),
            (V{"W_a.weight[3, 4]", "W_a.bias[3]", "U_a.weight[3, 6]", "U_a.bias[3]", "v_a.weight[1, 3]",
               "v_a.bias[1]"}));
  EXPECT_EQ(param_listing(nn::ScoreAttention({.kind = nn::ScoreKind::cosine, .query_dim = 4})), V{});
  EXPECT_EQ(param_listing(nn::ScoreAttention({.kind = nn::ScoreKind::location, .query_dim = 4, .max_length = 9})),
            V{"W_a.weight[9, 4]"});
}

TEST(ScoreAttention, CosinePerExampleBeta) {
  Generator g(23);
  nn::ScoreAttention att({.kind = nn::ScoreKind::cosine, .query_dim = 5, .beta = 3.0});
  Tensor s = randn({2, 5}, g), h = randn({2, 7, 5}, g);
  Tensor beta = Tensor::from_vector<float>({3.f, 0.5f}, {2});
  Tensor both = att.score(s, h, beta);
  Tensor fixed = att.score(s, h);   // beta = 3 for every example
  EXPECT_TENSOR_NEAR(both.select(0, 0), fixed.select(0, 0), 1e-6, 1e-6);
  EXPECT_TENSOR_NEAR(both.select(0, 1), fixed.select(0, 1) * (0.5 / 3.0), 1e-6, 1e-6);
}

TEST(ScoreAttention, AllPaddedRowGivesZerosNotNaN) {
  Generator g(24);
  nn::ScoreAttention att({.kind = nn::ScoreKind::general, .query_dim = 4}, g);
  Tensor s = randn({2, 4}, g).requires_grad_(), h = randn({2, 6, 4}, g).requires_grad_();
  Tensor mask = tail_padding({6, 2}, 6);   // example 0: every key is padding
  auto [ctx, w] = att.forward(s, h, mask);
  EXPECT_TENSOR_NEAR(w.select(0, 0), Tensor::zeros({6}), 0, 0);
  EXPECT_TENSOR_NEAR(ctx.select(0, 0), Tensor::zeros({4}), 0, 0);
  EXPECT_NEAR(sum(w.select(0, 1)).item(), 1.0, 1e-6);
  EXPECT_TENSOR_NEAR(w.select(0, 1).slice(0, 4, 6), Tensor::zeros({2}), 0, 0);
  (sum(ctx * ctx) + sum(w)).backward();
  EXPECT_TENSOR_NEAR(s.grad().select(0, 0), Tensor::zeros({4}), 0, 0);
  EXPECT_TENSOR_NEAR(h.grad().select(0, 0), Tensor::zeros({6, 4}), 0, 0);
  EXPECT_TRUE(std::isfinite(sum(abs(att.W_a->weight.grad())).item()));
}

TEST(ScoreAttention, MaskedSoftmaxBroadcastsAndChecks) {
  Generator g(25);
  Tensor x = randn({2, 3, 5}, g);
  Tensor m = tail_padding({2, 5}, 5).unsqueeze(1);   // (2, 1, 5) over (2, 3, 5)
  Tensor a = nn::masked_softmax(x, m);
  EXPECT_TENSOR_NEAR(a.select(0, 1), Tensor::zeros({3, 5}), 0, 0);
  EXPECT_TENSOR_NEAR(sum(a.select(0, 0), {-1}), Tensor::ones({3}), 1e-6, 1e-6);
  EXPECT_TENSOR_NEAR(nn::masked_softmax(x, Tensor()), softmax(x, -1), 0, 0);
  EXPECT_EQ(error_of([&] { nn::masked_softmax(x, Tensor::zeros({4, 5}, DType::u8)); }),
            "masked_softmax: expected a mask broadcastable to [2, 3, 5], got [4, 5]");
  EXPECT_EQ(error_of([&] { nn::masked_softmax(x, Tensor::zeros({5})); }),
            "masked_softmax: expected a u8 mask, got f32");
}

TEST(ScoreAttention, BadInputMessages) {
  nn::ScoreAttention att({.kind = nn::ScoreKind::general, .query_dim = 4, .key_dim = 6});
  Tensor s = Tensor::zeros({2, 4}), h = Tensor::zeros({2, 5, 6});
  EXPECT_EQ(error_of([&] { att.forward(Tensor::zeros({2, 5}), h); }),
            "ScoreAttention: expected s of shape (B, 4), got [2, 5]");
  EXPECT_EQ(error_of([&] { att.forward(s, Tensor::zeros({2, 5, 4})); }),
            "ScoreAttention: expected h of shape (2, S, 6), got [2, 5, 4]");
  EXPECT_EQ(error_of([&] { att.forward(s, Tensor::zeros({3, 5, 6})); }),
            "ScoreAttention: expected h of shape (2, S, 6), got [3, 5, 6]");
  EXPECT_EQ(error_of([&] { att.forward(s, h.to(DType::f64)); }),
            "ScoreAttention: expected h of dtype f32 (as s), got f64");
  EXPECT_EQ(error_of([&] { att.forward(s, h, Tensor::zeros({2, 5})); }),
            "ScoreAttention: expected key_padding_mask of dtype u8 (bool), got f32");
  EXPECT_EQ(error_of([&] { att.forward(s, h, Tensor::zeros({2, 4}, DType::u8)); }),
            "ScoreAttention: expected key_padding_mask of shape [2, 5], got [2, 4]");
  EXPECT_EQ(error_of([&] { att.forward(s, h, Tensor(), Tensor::zeros({2, 4, 3})); }),
            "ScoreAttention: expected values of shape (2, 5, Dv), got [2, 4, 3]");
  EXPECT_EQ(error_of([&] { nn::ScoreAttention({.kind = nn::ScoreKind::dot, .query_dim = 4, .key_dim = 6}); }),
            "ScoreAttention: dot scores need query_dim == key_dim, got 4 and 6");
  nn::ScoreAttention loc({.kind = nn::ScoreKind::location, .query_dim = 4, .max_length = 3});
  EXPECT_EQ(error_of([&] { loc.forward(s, h); }),
            "ScoreAttention: location scores cover 3 positions, got a sequence of 5");
  EXPECT_EQ(error_of([&] { att.score(s, h, Tensor::ones({2})); }),
            "ScoreAttention: a per-example beta needs cosine scores, got general");
}

// ---------------------------------------------------------------- local attention

struct LocalCase {
  nn::LocalMode mode;
  nn::ScoreKind kind;
  int64_t window, t;
  bool masked;
};

void PrintTo(const LocalCase& c, std::ostream* os) {
  *os << (c.mode == nn::LocalMode::monotonic ? "local-m " : "local-p ") << nn::score_kind_name(c.kind)
      << " D=" << c.window << " t=" << c.t << (c.masked ? " masked" : "");
}

class LocalVsTorch : public ::testing::TestWithParam<LocalCase> {};

TEST_P(LocalVsTorch, ForwardBackward) {
  const LocalCase c = GetParam();
  Generator g(31);
  for (DType dt : {DType::f32, DType::f64}) {
    const int64_t B = 4, S = 13, D = 6;
    nn::LocalAttention att({.mode = c.mode,
                            .score = {.kind = c.kind, .query_dim = D, .attn_dim = 5, .bias = true, .dtype = dt},
                            .window = c.window,
                            .predict_dim = 7},
                           g);
    make_biases_nonzero(att, g);
    if (att.W_p) nn::init::normal_(att.W_p->weight, g, 0.0, 1.0);   // spread the predicted positions
    Tensor s = randn({B, D}, g, dt), h = randn({B, S, D}, g, dt);
    Tensor mask = c.masked ? tail_padding({0, 4, 1, 12}, S) : Tensor();
    Tensor gc = randn({B, D}, g, dt), gw = randn({B, S}, g, dt);
    test::Tensors in = {{"s", s}, {"h", h}, {"gc", gc}, {"gw", gw}};
    if (mask.defined()) in["mask"] = mask;
    for (auto& [k, p] : att.score->named_parameters()) in["p." + k] = p;
    if (att.W_p) {
      in["p.W_p.weight"] = att.W_p->weight;
      in["p.v_p.weight"] = att.v_p->weight;
    }
    auto ref = torch_ref("attention_modules.local", in,
                         {{"kind", nn::score_kind_name(c.kind)},
                          {"mode", c.mode == nn::LocalMode::monotonic ? "monotonic" : "predictive"},
                          {"window", c.window},
                          {"t", c.t}});
    Tensor ss = s.clone().requires_grad_(), hh = h.clone().requires_grad_();
    auto [ctx, w] = att.forward(ss, hh, c.t, mask);
    (sum(ctx * gc) + sum(w * gw)).backward();
    const double tol = dt == DType::f32 ? 3e-5 : 1e-10;
    EXPECT_TENSOR_NEAR(ctx, ref.at("context"), tol, tol);
    EXPECT_TENSOR_NEAR(w, ref.at("weights"), tol, tol);
    EXPECT_TENSOR_NEAR(ss.grad(), ref.at("ds"), tol, tol);
    EXPECT_TENSOR_NEAR(hh.grad(), ref.at("dh"), tol, tol);
    expect_param_grads(att, ref, tol * 3, "score.");
    if (c.mode == nn::LocalMode::predictive) EXPECT_TENSOR_NEAR(att.predict_position(s, S), ref.at("p"), tol, tol);
    // Outside the window the weights are exactly zero.
    const auto centre = c.mode == nn::LocalMode::predictive ? ref.at("p").to_vector<double>()
                                                            : std::vector<double>(size_t(B), double(c.t));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < S; ++j)
        if (std::abs(double(j) - centre[size_t(b)]) > double(c.window))
          EXPECT_EQ(w.at({b, j}), 0.0) << "b=" << b << " j=" << j;
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, LocalVsTorch,
    ::testing::Values(LocalCase{nn::LocalMode::monotonic, nn::ScoreKind::general, 2, 4, false},
                      LocalCase{nn::LocalMode::monotonic, nn::ScoreKind::dot, 3, 0, true},
                      LocalCase{nn::LocalMode::monotonic, nn::ScoreKind::concat, 1, 12, true},
                      LocalCase{nn::LocalMode::monotonic, nn::ScoreKind::general, 0, 6, false},
                      LocalCase{nn::LocalMode::predictive, nn::ScoreKind::general, 2, -1, false},
                      LocalCase{nn::LocalMode::predictive, nn::ScoreKind::concat, 3, -1, true},
                      LocalCase{nn::LocalMode::predictive, nn::ScoreKind::dot, 5, -1, true}));

TEST(LocalAttention, FiniteDifferencesPredictive) {
  Generator g(32);
  nn::LocalAttention att({.mode = nn::LocalMode::predictive,
                          .score = {.kind = nn::ScoreKind::general, .query_dim = 3, .dtype = DType::f64},
                          .window = 2},
                         g);
  EXPECT_TRUE(test::gradcheck(
      [&](const std::vector<Tensor>& in) {
        auto r = att.forward(in[0], in[1]);
        return concat({r.context, r.weights}, 1);
      },
      {randn({2, 3}, g, DType::f64), randn({2, 7, 3}, g, DType::f64)}));
}

TEST(LocalAttention, ParametersAndMessages) {
  nn::LocalAttention lp({.mode = nn::LocalMode::predictive,
                         .score = {.kind = nn::ScoreKind::general, .query_dim = 4},
                         .window = 2,
                         .predict_dim = 5});
  EXPECT_EQ(param_listing(lp),
            (std::vector<std::string>{"score.W_a.weight[4, 4]", "W_p.weight[5, 4]", "v_p.weight[1, 5]"}));
  nn::LocalAttention lm({.mode = nn::LocalMode::monotonic, .score = {.kind = nn::ScoreKind::dot, .query_dim = 4},
                         .window = 2});
  EXPECT_EQ(lm.named_parameters().size(), 0u);
  EXPECT_EQ(error_of([&] { lm.forward(Tensor::zeros({2, 4}), Tensor::zeros({2, 5, 4})); }),
            "LocalAttention: local-m needs the aligned position t >= 0, got -1");
  EXPECT_EQ(error_of([] {
              nn::LocalAttention({.mode = nn::LocalMode::predictive, .score = {.query_dim = 4}, .window = 0});
            }),
            "LocalAttention: local-p needs a window D >= 1 (sigma = D / 2), got 0");
  EXPECT_EQ(error_of([&] { lm.forward(Tensor::zeros({2, 4}), Tensor::zeros({2, 5, 3}), 1); }),
            "LocalAttention: expected h of shape (2, S, 4), got [2, 5, 3]");
  // A window entirely past the end: zero weights and context, not NaN.
  auto r = lm.forward(Tensor::ones({2, 4}), Tensor::ones({2, 5, 4}), 9);
  EXPECT_TENSOR_NEAR(r.weights, Tensor::zeros({2, 5}), 0, 0);
  EXPECT_TENSOR_NEAR(r.context, Tensor::zeros({2, 4}), 0, 0);
}

// ---------------------------------------------------------------- hard attention

TEST(HardAttention, EvalArgmaxStraightThroughVsTorch) {
  Generator g(41);
  for (DType dt : {DType::f32, DType::f64}) {
    for (nn::ScoreKind kind : {nn::ScoreKind::general, nn::ScoreKind::concat}) {
      const int64_t B = 5, S = 9, D = 6;
      nn::HardAttention att({.score = {.kind = kind, .query_dim = D, .bias = true, .dtype = dt}}, g);
      att.eval();
      Tensor s = randn({B, D}, g, dt) * 2.0, h = randn({B, S, D}, g, dt);
      Tensor mask = tail_padding({0, 2, 8, 0, 9}, S);   // the last row: every key padding
      Tensor ss = s.clone().requires_grad_(), hh = h.clone().requires_grad_();
      auto r = att.forward(ss, hh, mask);
      Tensor gc = randn({B, D}, g, dt);
      test::Tensors in = {{"s", s}, {"h", h}, {"gc", gc}, {"mask", mask}, {"idx", r.index}};
      add_params(in, att, "score.");
      auto ref = torch_ref("attention_modules.hard", in, {{"kind", nn::score_kind_name(kind)}});
      sum(r.context * gc).backward();
      const double tol = dt == DType::f32 ? 3e-5 : 1e-10;
      // The choice is the argmax of the soft weights (torch's, on the unpadded rows).
      std::vector<int64_t> idx = r.index.to_vector<int64_t>(), am = ref.at("argmax").to_vector<int64_t>();
      for (int64_t b = 0; b < B - 1; ++b) EXPECT_EQ(idx[size_t(b)], am[size_t(b)]) << "b=" << b;
      EXPECT_EQ(idx[size_t(B - 1)], -1);
      EXPECT_TENSOR_NEAR(r.probs, ref.at("probs"), tol, tol);
      EXPECT_TENSOR_NEAR(r.weights, ref.at("weights"), 0, 0);
      EXPECT_TENSOR_NEAR(r.context, ref.at("context"), tol, tol);
      for (int64_t b = 0; b < B - 1; ++b)   // the context is exactly the chosen key
        EXPECT_TENSOR_NEAR(r.context.select(0, b), h.select(0, b).select(0, idx[size_t(b)]), 0, 0);
      EXPECT_TENSOR_NEAR(ss.grad(), ref.at("ds"), tol, tol);
      EXPECT_TENSOR_NEAR(hh.grad(), ref.at("dh"), tol, tol);
      expect_param_grads(att, ref, tol * 3, "score.");
    }
  }
}

TEST(HardAttention, TrainingSamplesFromTheWeights) {
  Generator g(42);
  nn::HardAttention att({.score = {.kind = nn::ScoreKind::dot, .query_dim = 3}, .generator = &g});
  att.train();
  // One query against 4 keys with known softmax weights; a padded key is never chosen.
  Tensor s = Tensor::from_vector<float>({1.f, 0.f, 0.f}, {1, 3});
  Tensor h = Tensor::from_vector<float>({0.f, 0, 0, 1.f, 0, 0, 2.f, 0, 0, 5.f, 0, 0}, {1, 4, 3});
  Tensor mask = Tensor::from_vector<uint8_t>({0, 0, 0, 1}, {1, 4});
  const int n = 20000;
  std::vector<int> counts(4, 0);
  Tensor probs;
  for (int i = 0; i < n; ++i) {
    auto r = att.forward(s, h, mask);
    probs = r.probs;
    counts[size_t(r.index.at({0}))]++;
  }
  EXPECT_EQ(counts[3], 0);
  for (int j = 0; j < 3; ++j) {
    const double p = probs.at({0, j});
    const double sd = std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR(counts[size_t(j)] / double(n), p, 5 * sd) << "key " << j;
  }
  // Reproducible from the generator's state.
  Generator g1(7), g2(7);
  nn::HardAttention a1({.score = {.kind = nn::ScoreKind::dot, .query_dim = 3}, .generator = &g1});
  nn::HardAttention a2({.score = {.kind = nn::ScoreKind::dot, .query_dim = 3}, .generator = &g2});
  Tensor hs = randn({6, 10, 3}, g), qs = randn({6, 3}, g);
  EXPECT_TENSOR_NEAR(a1.forward(qs, hs).index, a2.forward(qs, hs).index, 0, 0);
}

TEST(HardAttention, StraightThroughPassesTheGradient) {
  Tensor hard = Tensor::from_vector<double>({0, 1, 0}, {3});
  Tensor soft = Tensor::from_vector<double>({0.2, 0.5, 0.3}, {3}).requires_grad_();
  Tensor y = nn::straight_through(hard, soft);
  EXPECT_TENSOR_NEAR(y, hard, 0, 0);
  Tensor gy = Tensor::from_vector<double>({1.5, -2, 3}, {3});
  sum(y * gy).backward();
  EXPECT_TENSOR_NEAR(soft.grad(), gy, 0, 0);
  EXPECT_EQ(error_of([&] { nn::straight_through(hard, Tensor::zeros({4}, DType::f64)); }),
            "straight_through: expected hard and soft of one shape and dtype, got [3] and [4]");
}

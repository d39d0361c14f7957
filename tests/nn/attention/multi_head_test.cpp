// nn::SelfAttention against timm's Attention (written in torch in the golden script) and
// nn::MultiheadAttention against torch.nn.MultiheadAttention 1.13: outputs, attention weights,
// input and parameter gradients, for packed / separate / shared-qk projections, self and cross
// attention, bool and float masks, batch_first and unbatched inputs; then the departures (all-
// masked rows), initialisation, parameter names and error messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "attn/attn.h"
#include "attn/nn/attention/multi_head.h"
#include "attn/nn/init.h"
#include "attn/ops/attention.h"
#include "attn/ops/indexing.h"
#include "errors.h"
#include "isa.h"
#include "params.h"
#include "torch_ref.h"

using namespace attn;
using test::param_listing;
using test::error_of;
using test::torch_ref;

namespace {

// A random u8 mask of `shape` (about 30% set) whose last-dim position 0 is never set, so no query
// row is fully masked (torch gives NaN there).
Tensor random_bool_mask(const Shape& shape, Generator& g) {
  Tensor m = lt(rand(shape, g), 0.3).contiguous();
  const int64_t S = shape.back();
  uint8_t* p = m.data<uint8_t>();
  for (int64_t i = 0; i < m.numel(); i += S) p[i] = 0;
  return m;
}

// Additive float mask: N(0, 2), with -inf where a random bool mask is set.
Tensor random_float_mask(const Shape& shape, Generator& g, DType dt) {
  Tensor b = random_bool_mask(shape, g);
  return masked_fill(randn(shape, g, dt) * 2.0, b, -INFINITY);
}

// (B, S) key padding: example b pads its last (b * 2) % (S - 1) keys (key 0 never).
Tensor tail_padding(int64_t B, int64_t S) {
  Tensor m = Tensor::zeros({B, S}, DType::u8);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = S - (b * 2) % (S - 1); j < S; ++j) m.data<uint8_t>()[b * S + j] = 1;
  return m;
}

void randomise(nn::Module& m, Generator& g) {
  for (auto& [k, p] : m.named_parameters()) nn::init::normal_(p, g, 0.0, 0.3);
}

struct MhaCase {
  const char* name;
  bool batch_first;
  bool self_attn;
  int64_t kdim, vdim;   // 0: E
  bool bias;
  const char* attn_mask;   // "", "bool2d", "float2d", "bool3d", "float3d"
  const char* kpm;         // "", "bool", "float"
  bool need_weights;
  bool average;
  bool share_qk;
  bool unbatched;
};

const MhaCase kMha[] = {
    {"packed_self_bf", true, true, 0, 0, true, "", "", true, true, false, false},
    {"packed_self_seqfirst_masks", false, true, 0, 0, true, "bool2d", "bool", true, false, false, false},
    {"packed_cross_float2d_boolkpm", true, false, 0, 0, true, "float2d", "bool", true, true, false, false},
    {"packed_cross_noweights", false, false, 0, 0, true, "bool2d", "", false, true, false, false},
    {"packed_cross_floatkpm", true, false, 0, 0, true, "", "float", true, false, false, false},
    {"packed_nobias_float3d", true, false, 0, 0, false, "float3d", "", true, false, false, false},
    {"separate_kv_bool3d_kpm", false, false, 5, 7, true, "bool3d", "bool", true, true, false, false},
    {"separate_nobias_floatkpm", true, false, 10, 3, false, "", "float", true, false, false, false},
    {"shareqk_self", true, true, 0, 0, true, "", "bool", true, false, true, false},
    {"shareqk_cross_vdim", false, false, 0, 6, true, "float2d", "", true, true, true, false},
    {"unbatched_cross", true, false, 0, 0, true, "bool2d", "bool", true, true, false, true},
    {"unbatched_float3d_separate", false, false, 4, 4, true, "float3d", "", true, false, false, true},
};

void PrintTo(const MhaCase& c, std::ostream* os) { *os << c.name; }

}  // namespace

class MhaVsTorch : public ::testing::TestWithParam<MhaCase> {};

TEST_P(MhaVsTorch, ForwardBackward) {
  const MhaCase c = GetParam();
  Generator g(51);
  const int64_t E = 8, NH = 2, B = c.unbatched ? 1 : 3, L = 5, S = c.self_attn ? 5 : 7;
  for (DType dt : {DType::f32, DType::f64}) {
    nn::MultiheadAttention mha({.embed_dim = E, .num_heads = NH, .bias = c.bias, .kdim = c.kdim, .vdim = c.vdim,
                                .batch_first = c.batch_first, .share_qk = c.share_qk, .dtype = dt},
                               g);
    randomise(mha, g);
    const int64_t kd = c.kdim ? c.kdim : E, vd = c.vdim ? c.vdim : E;
    auto layout = [&](int64_t T, int64_t F) {
      if (c.unbatched) return Shape{T, F};
      return c.batch_first ? Shape{B, T, F} : Shape{T, B, F};
    };
    Tensor query = randn(layout(L, E), g, dt);
    Tensor key = c.self_attn ? query : randn(layout(S, kd), g, dt);
    Tensor value = c.self_attn ? query : randn(layout(S, vd), g, dt);
    Tensor am, kpm;
    const std::string amk = c.attn_mask, kk = c.kpm;
    const Shape am3 = {c.unbatched ? NH : B * NH, L, S};
    if (amk == "bool2d") am = random_bool_mask({L, S}, g);
    if (amk == "float2d") am = random_float_mask({L, S}, g, dt);
    if (amk == "bool3d") am = random_bool_mask(am3, g);
    if (amk == "float3d") am = random_float_mask(am3, g, dt);
    if (kk == "bool") kpm = c.unbatched ? tail_padding(2, S).select(0, 1).contiguous() : tail_padding(B, S);
    if (kk == "float") kpm = randn(c.unbatched ? Shape{S} : Shape{B, S}, g, dt);
    Tensor gout = randn(layout(L, E), g, dt);
    Shape wshape = c.average ? Shape{B, L, S} : Shape{B, NH, L, S};
    if (c.unbatched) wshape.erase(wshape.begin());
    Tensor gw = randn(wshape, g, dt);

    test::Tensors in = {{"query", query}, {"key", key}, {"value", value}, {"g", gout}};
    if (c.need_weights) in["gw"] = gw;
    if (am.defined()) in["attn_mask"] = am;
    if (kpm.defined()) in["key_padding_mask"] = kpm;
    for (auto& [k, p] : mha.named_parameters()) in["p." + k] = p;
    auto ref = torch_ref("attention_modules.mha", in,
                         {{"num_heads", NH}, {"batch_first", c.batch_first}, {"self", c.self_attn},
                          {"share_qk", c.share_qk}, {"need_weights", c.need_weights},
                          {"average_attn_weights", c.average}});

    Tensor qq = query.clone().requires_grad_();
    Tensor kk2 = c.self_attn ? qq : key.clone().requires_grad_();
    Tensor vv = c.self_attn ? qq : value.clone().requires_grad_();
    auto r = mha.forward(qq, kk2, vv, kpm, c.need_weights, am, c.average);
    Tensor loss = sum(r.out * gout);
    if (c.need_weights) loss = loss + sum(r.weights * gw);
    loss.backward();
    const double tol = dt == DType::f32 ? 3e-5 : 1e-10;
    const std::string ctx = std::string("dt=") + dtype_name(dt);
    EXPECT_TENSOR_NEAR(r.out, ref.at("out"), tol, tol) << ctx;
    if (c.need_weights) {
      ASSERT_TRUE(r.weights.defined());
      EXPECT_TENSOR_NEAR(r.weights, ref.at("weights"), tol, tol) << ctx;
    } else {
      EXPECT_FALSE(r.weights.defined());
    }
    EXPECT_TENSOR_NEAR(qq.grad(), ref.at("dquery"), tol, tol) << ctx;
    if (!c.self_attn) {
      EXPECT_TENSOR_NEAR(kk2.grad(), ref.at("dkey"), tol, tol) << ctx;
      EXPECT_TENSOR_NEAR(vv.grad(), ref.at("dvalue"), tol, tol) << ctx;
    }
    for (auto& [k, p] : mha.named_parameters()) {
      ASSERT_TRUE(p.grad().defined()) << k;
      EXPECT_TENSOR_NEAR(p.grad(), ref.at("d." + k), tol * 3, tol) << k << " " << ctx;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, MhaVsTorch, ::testing::ValuesIn(kMha), [](const auto& info) {
  return std::string(info.param.name);
});

TEST(MultiheadAttention, FusedAndNaivePathsAgree) {
  // The same weights through both attention implementations (f32, no weights requested), on every
  // ISA path this CPU has.
  Generator g(52);
  const int64_t E = 32, NH = 4, B = 2, L = 37, S = 53;
  test::for_each_isa([&](Isa isa) {
    for (bool masked : {false, true}) {
      nn::MultiheadAttention fused({.embed_dim = E, .num_heads = NH, .batch_first = true, .impl = SdpaImpl::fused},
                                   g);
      nn::MultiheadAttention naive({.embed_dim = E, .num_heads = NH, .batch_first = true, .impl = SdpaImpl::naive},
                                   g);
      randomise(fused, g);
      naive.load_state_dict(fused.state_dict());
      Tensor q = randn({B, L, E}, g), kv = randn({B, S, E}, g), gout = randn({B, L, E}, g);
      Tensor kpm = masked ? tail_padding(B, S) : Tensor();
      Tensor q1 = q.clone().requires_grad_(), q2 = q.clone().requires_grad_();
      auto r1 = fused.forward(q1, kv, kv, kpm, false);
      auto r2 = naive.forward(q2, kv, kv, kpm, false);
      sum(r1.out * gout).backward();
      sum(r2.out * gout).backward();
      const std::string ctx = "masked=" + std::to_string(masked) + " isa=" + isa_name(isa);
      // Both paths run their projections through oneDNN, whose AVX-512 kernels sum in another order
      // than its AVX2 ones: q's gradient (three GEMMs deep) differs by up to 2.1e-5 there (Zen 4).
      EXPECT_TENSOR_NEAR(r1.out, r2.out, 1e-5, 1e-5) << ctx;
      EXPECT_TENSOR_NEAR(q1.grad(), q2.grad(), 1e-4, 1e-4) << ctx;
      EXPECT_TENSOR_NEAR(fused.in_proj_weight.grad(), naive.in_proj_weight.grad(), 1e-4, 1e-4) << ctx;
    }
  });
}

TEST(MultiheadAttention, AllMaskedRowsGiveZerosNotNaN) {
  Generator g(53);
  const int64_t E = 6, NH = 3, L = 4, S = 5;
  nn::MultiheadAttention mha({.embed_dim = E, .num_heads = NH, .batch_first = true}, g);
  randomise(mha, g);
  Tensor x = randn({2, L, E}, g).requires_grad_(), kv = randn({2, S, E}, g);
  Tensor kpm = Tensor::zeros({2, S}, DType::u8);
  for (int64_t j = 0; j < S; ++j) kpm.data<uint8_t>()[j] = 1;   // example 0: every key is padding
  auto r = mha.forward(x, kv, kv, kpm, true, Tensor(), false);
  EXPECT_TENSOR_NEAR(r.weights.select(0, 0), Tensor::zeros({NH, L, S}), 0, 0);
  // The attention output is zero, so out = out_proj.bias for every query of example 0.
  EXPECT_TENSOR_NEAR(r.out.select(0, 0), mha.out_proj->bias.detach().unsqueeze(0).expand({L, E}), 1e-6, 1e-6);
  sum(r.out * r.out).backward();
  EXPECT_TENSOR_NEAR(x.grad().select(0, 0), Tensor::zeros({L, E}), 0, 0);
  EXPECT_TRUE(std::isfinite(sum(abs(mha.in_proj_weight.grad())).item()));
}

TEST(MultiheadAttention, ParametersAndInitAsTorch) {
  using V = std::vector<std::string>;
  Generator g(54);
  nn::MultiheadAttention packed({.embed_dim = 64, .num_heads = 4}, g);
  EXPECT_EQ(param_listing(packed),
            (V{"in_proj_weight[192, 64]", "in_proj_bias[192]", "out_proj.weight[64, 64]", "out_proj.bias[64]"}));
  EXPECT_EQ(param_listing(
                nn::MultiheadAttention({.embed_dim = 8, .num_heads = 2, .bias = false, .kdim = 5, .vdim = 3})),
            (V{"q_proj_weight[8, 8]", "k_proj_weight[8, 5]", "v_proj_weight[8, 3]", "out_proj.weight[8, 8]"}));
  EXPECT_EQ(param_listing(nn::MultiheadAttention({.embed_dim = 8, .num_heads = 2, .share_qk = true})),
            (V{"qk_proj_weight[8, 8]", "v_proj_weight[8, 8]", "in_proj_bias[16]", "out_proj.weight[8, 8]",
               "out_proj.bias[8]"}));
  // torch's _reset_parameters: xavier_uniform on in_proj_weight, zero biases.
  const double bound = std::sqrt(6.0 / (64 + 192));
  EXPECT_LE(max(abs(packed.in_proj_weight)).item(), bound);
  EXPECT_GT(max(abs(packed.in_proj_weight)).item(), 0.95 * bound);
  const auto w = packed.in_proj_weight.to_vector<double>();
  double ss = 0;
  for (double x : w) ss += x * x;
  EXPECT_NEAR(std::sqrt(ss / double(w.size())), bound / std::sqrt(3.0), 0.03 * bound);   // U(-b, b): sd b/√3
  EXPECT_TENSOR_NEAR(packed.in_proj_bias, Tensor::zeros({192}), 0, 0);
  EXPECT_TENSOR_NEAR(packed.out_proj->bias, Tensor::zeros({64}), 0, 0);
  EXPECT_LE(max(abs(packed.out_proj->weight)).item(), 1.0 / 8.0);   // kaiming_uniform(a=√5): 1/√64
}

TEST(MultiheadAttention, ShareQkGivesSymmetricLogits) {
  // One head: log w_ij = l_ij - log Z_i. With W_Q = W_K (and their bias) the logits l are symmetric,
  // so lw_ij + c_i = lw_ji + c_j with c_j = log Z_j - log Z_0 = lw_0j - lw_j0. Without sharing, not.
  Generator g(55);
  const int64_t E = 4, T = 6;
  auto max_asymmetry = [&](bool share) {
    nn::MultiheadAttention mha({.embed_dim = E, .num_heads = 1, .batch_first = true, .share_qk = share,
                                .dtype = DType::f64},
                               g);
    randomise(mha, g);
    Tensor x = randn({1, T, E}, g, DType::f64);
    Tensor lw = log(mha.forward(x, x, x, Tensor(), true).weights.select(0, 0));   // (T, T)
    std::vector<double> c(static_cast<size_t>(T));
    for (int64_t j = 0; j < T; ++j) c[size_t(j)] = lw.at({0, j}) - lw.at({j, 0});
    double worst = 0;
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j)
        worst = std::max(worst, std::abs(lw.at({i, j}) + c[size_t(i)] - lw.at({j, i}) - c[size_t(j)]));
    return worst;
  };
  EXPECT_LT(max_asymmetry(true), 1e-9);
  EXPECT_GT(max_asymmetry(false), 1e-3);
}

TEST(MultiheadAttention, BadInputMessages) {
  nn::MultiheadAttention mha({.embed_dim = 8, .num_heads = 2, .batch_first = true});
  Tensor q = Tensor::zeros({2, 4, 8}), kv = Tensor::zeros({2, 6, 8});
  EXPECT_EQ(error_of([&] { mha.forward(Tensor::zeros({2, 4, 6}), kv, kv); }),
            "MultiheadAttention: expected query of embed dim 8, got shape [2, 4, 6]");
  EXPECT_EQ(error_of([&] { mha.forward(q, Tensor::zeros({2, 6, 5}), kv); }),
            "MultiheadAttention: expected key of feature dim 8, got shape [2, 6, 5]");
  EXPECT_EQ(error_of([&] { mha.forward(q, Tensor::zeros({6, 8}), kv); }),
            "MultiheadAttention: expected 3-D key and value for a 3-D query, got shapes [6, 8] and [2, 6, 8]");
  EXPECT_EQ(error_of([&] { mha.forward(q, kv, Tensor::zeros({2, 5, 8})); }),
            "MultiheadAttention: expected key and value with one sequence length, got shapes [2, 6, 8] and "
            "[2, 5, 8]");
  EXPECT_EQ(error_of([&] { mha.forward(q, Tensor::zeros({3, 6, 8}), Tensor::zeros({3, 6, 8})); }),
            "MultiheadAttention: expected query, key and value with one batch size, got shapes [2, 4, 8], "
            "[3, 6, 8] and [3, 6, 8]");
  EXPECT_EQ(error_of([&] { mha.forward(q, kv, kv, Tensor::zeros({2, 5}, DType::u8)); }),
            "MultiheadAttention: expected key_padding_mask of shape [2, 6], got [2, 5]");
  EXPECT_EQ(error_of([&] { mha.forward(q, kv, kv, Tensor::zeros({2, 6}, DType::i64)); }),
            "MultiheadAttention: expected key_padding_mask of dtype u8 (bool) or f32 (additive), got i64");
  EXPECT_EQ(error_of([&] { mha.forward(q, kv, kv, Tensor(), true, Tensor::zeros({4, 5}, DType::u8)); }),
            "MultiheadAttention: expected a 2-D attn_mask of shape [4, 6], got [4, 5]");
  EXPECT_EQ(error_of([&] { mha.forward(q, kv, kv, Tensor(), true, Tensor::zeros({2, 4, 6}, DType::u8)); }),
            "MultiheadAttention: expected a 3-D attn_mask of shape [4, 4, 6] (B·NH, L, S), got [2, 4, 6]");
  EXPECT_EQ(error_of([&] { mha.forward(q, kv, kv, Tensor(), true, Tensor::zeros({1, 1, 4, 6}, DType::u8)); }),
            "MultiheadAttention: expected a 2-D or 3-D attn_mask, got shape [1, 1, 4, 6]");
  EXPECT_EQ(error_of([&] { mha.forward(q, kv, kv, Tensor(), true, Tensor::zeros({4, 6}, DType::f64)); }),
            "MultiheadAttention: expected attn_mask of dtype u8 (bool) or f32 (additive), got f64");
  EXPECT_EQ(error_of([&] { mha.forward(q.to(DType::f64), kv, kv); }),
            "MultiheadAttention: expected query, key and value of dtype f32, got f64, f32, f32");
  EXPECT_EQ(error_of([&] { nn::MultiheadAttention({.embed_dim = 10, .num_heads = 4}); }),
            "MultiheadAttention: embed_dim 10 is not divisible by num_heads 4");
  EXPECT_EQ(error_of([&] { nn::MultiheadAttention({.embed_dim = 8, .num_heads = 2, .kdim = 4, .share_qk = true}); }),
            "MultiheadAttention: share_qk needs kdim == embed_dim, got kdim 4 and embed_dim 8");
}

// ---------------------------------------------------------------- SelfAttention (timm)

struct TimmCase {
  const char* name;
  bool qkv_bias;
  const char* mask;   // "", "bool", "float"
  bool need_weights;
  SdpaImpl impl;
  // the ablations' options
  int64_t head_dim = 0;
  bool share_qk = false;
  bool no_scale = false;
};

void PrintTo(const TimmCase& c, std::ostream* os) { *os << c.name; }

class TimmVsTorch : public ::testing::TestWithParam<TimmCase> {};

TEST_P(TimmVsTorch, ForwardBackward) {
  const TimmCase c = GetParam();
  Generator g(61);
  const int64_t B = 2, T = 11, C = 12, NH = 3;
  for (DType dt : {DType::f32, DType::f64}) {
    if (dt == DType::f64 && c.impl == SdpaImpl::fused) continue;   // the fused kernel is f32 only
    nn::SelfAttention att({.dim = C, .num_heads = NH, .head_dim = c.head_dim, .share_qk = c.share_qk,
                           .scale = c.no_scale ? 1.0 : double(NAN), .qkv_bias = c.qkv_bias, .impl = c.impl,
                           .dtype = dt}, g);
    randomise(att, g);
    Tensor x = randn({B, T, C}, g, dt), gout = randn({B, T, C}, g, dt);
    const std::string mk = c.mask;
    Tensor mask;
    if (mk == "bool") mask = random_bool_mask({B, 1, 1, T}, g);   // key padding
    if (mk == "float") mask = random_float_mask({NH, T, T}, g, dt);  // e.g. a relative position bias
    test::Tensors in = {{"x", x}, {"g", gout}};
    if (mask.defined()) in["mask"] = mask;
    for (auto& [k, p] : att.named_parameters()) in["p." + k] = p;
    auto ref = torch_ref("attention_modules.timm_attention", in,
                         {{"num_heads", NH}, {"head_dim", c.head_dim}, {"share_qk", int(c.share_qk)},
                          {"no_scale", int(c.no_scale)}});
    Tensor xx = x.clone().requires_grad_();
    auto r = att.forward(xx, mask, c.need_weights);
    sum(r.out * gout).backward();
    const double tol = dt == DType::f32 ? 3e-5 : 1e-10;
    EXPECT_TENSOR_NEAR(r.out, ref.at("out"), tol, tol);
    if (c.need_weights) EXPECT_TENSOR_NEAR(r.weights, ref.at("weights"), tol, tol);
    else EXPECT_FALSE(r.weights.defined());
    EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), tol, tol);
    for (auto& [k, p] : att.named_parameters()) EXPECT_TENSOR_NEAR(p.grad(), ref.at("d." + k), tol * 3, tol) << k;
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, TimmVsTorch,
    ::testing::Values(TimmCase{"plain", false, "", false, SdpaImpl::automatic},
                      TimmCase{"bias_weights", true, "", true, SdpaImpl::automatic},
                      TimmCase{"boolmask_fused", true, "bool", false, SdpaImpl::fused},
                      TimmCase{"boolmask_weights", true, "bool", true, SdpaImpl::fused},
                      TimmCase{"floatmask_naive", false, "float", true, SdpaImpl::naive},
                      TimmCase{"floatmask_fused", false, "float", false, SdpaImpl::fused},
                      TimmCase{"head_dim_fused", true, "", false, SdpaImpl::fused, 7},
                      TimmCase{"head_dim_weights", false, "bool", true, SdpaImpl::naive, 16},
                      TimmCase{"share_qk_fused", true, "", false, SdpaImpl::fused, 0, true},
                      TimmCase{"share_qk_weights", true, "float", true, SdpaImpl::naive, 0, true},
                      TimmCase{"no_scale_fused", true, "", false, SdpaImpl::fused, 0, false, true},
                      TimmCase{"no_scale_weights", false, "", true, SdpaImpl::naive, 0, false, true},
                      TimmCase{"all_three", true, "bool", false, SdpaImpl::automatic, 5, true, true}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(SelfAttention, NamesAsTimm) {
  nn::SelfAttention att({.dim = 12, .num_heads = 3, .qkv_bias = true});
  EXPECT_EQ(param_listing(att), (std::vector<std::string>{"qkv.weight[36, 12]", "qkv.bias[36]", "proj.weight[12, 12]",
                                             "proj.bias[12]"}));
  nn::SelfAttention nob({.dim = 12, .num_heads = 3});
  EXPECT_EQ(nob.named_parameters().size(), 3u);
  // The ablations' shapes: heads of width 5 (inner 15), and [qk; v] rows with shared queries and keys.
  nn::SelfAttention hd({.dim = 12, .num_heads = 3, .head_dim = 5, .share_qk = true, .qkv_bias = true});
  EXPECT_EQ(param_listing(hd), (std::vector<std::string>{"qkv.weight[30, 12]", "qkv.bias[30]", "proj.weight[12, 15]",
                                            "proj.bias[12]"}));
  EXPECT_NE(error_of([] { nn::SelfAttention({.dim = 10, .num_heads = 3}); }).find("set head_dim"), std::string::npos);
  EXPECT_NE(error_of([] { nn::SelfAttention({.dim = 12, .num_heads = 3, .scale = -1.0}); }).find("positive finite scale"),
            std::string::npos);
}

// Shared queries and keys: each head's logits S are a symmetric matrix. With L_i the log-sum-exp of row
// i, log w_ij - log w_ji = L_j - L_i, which token 0 gives apart: (log w_i0 - log w_0i) - (log w_j0 - log w_0j).
TEST(SelfAttention, SharedQueriesAndKeysGiveSymmetricLogits) {
  Generator g(63);
  nn::SelfAttention att({.dim = 8, .num_heads = 2, .share_qk = true, .qkv_bias = true, .impl = SdpaImpl::naive}, g);
  randomise(att, g);
  Tensor x = randn({1, 5, 8}, g);
  NoGradGuard ng;
  const Tensor lw = log(att.forward(x, Tensor(), true).weights);
  auto at = [&](int64_t h, int64_t i, int64_t j) { return lw.at({0, h, i, j}); };
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 5; ++j)
        EXPECT_NEAR(at(h, i, j) - at(h, j, i), (at(h, i, 0) - at(h, 0, i)) - (at(h, j, 0) - at(h, 0, j)), 1e-4)
            << h << " " << i << " " << j;
}

TEST(SelfAttention, DropoutAndCausal) {
  Generator g(62);
  const int64_t B = 2, T = 9, C = 8, NH = 2;
  Generator dg(5);
  nn::SelfAttention att({.dim = C, .num_heads = NH, .attn_drop = 0.3, .causal = true, .impl = SdpaImpl::naive}, g,
                        &dg);
  Tensor x = randn({B, T, C}, g);
  // Eval: no dropout, deterministic; weights are causal (zero above the diagonal).
  att.eval();
  auto e1 = att.forward(x, Tensor(), true);
  auto e2 = att.forward(x);
  EXPECT_TENSOR_NEAR(e1.out, e2.out, 1e-6, 1e-6);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = i + 1; j < T; ++j) EXPECT_EQ(e1.weights.at({1, 1, i, j}), 0.0);
  // Training: attention dropout from the module's generator, as scaled_dot_product_attention draws it.
  att.train();
  dg.set_state(5, 0);
  Tensor y = att.forward(x).out;
  EXPECT_GT(max(abs(y - e1.out)).item(), 1e-3);
  Generator ref_g(5);
  SdpaOptions so;
  so.causal = true;
  so.dropout_p = 0.3;
  so.generator = &ref_g;
  so.impl = SdpaImpl::naive;
  Tensor t = att.qkv->forward(x).view({B, T, 3, NH, C / NH}).permute({2, 0, 3, 1, 4});
  Tensor o = scaled_dot_product_attention(t.select(0, 0), t.select(0, 1), t.select(0, 2), Tensor(), so).out;
  Tensor expect = att.proj->forward(o.transpose(1, 2).reshape({B, T, C}));
  EXPECT_TENSOR_NEAR(y, expect, 1e-6, 1e-6);
}

TEST(SelfAttention, BadInputMessages) {
  nn::SelfAttention att({.dim = 8, .num_heads = 2});
  EXPECT_EQ(error_of([&] { att.forward(Tensor::zeros({2, 5, 6})); }),
            "SelfAttention: expected x of shape (B, T, 8), got [2, 5, 6]");
  EXPECT_EQ(error_of([&] { att.forward(Tensor::zeros({2, 5, 8}), Tensor::zeros({3, 5}, DType::u8)); }),
            "SelfAttention: expected a mask broadcastable to [2, 2, 5, 5] (B, NH, T, T), got [3, 5]");
  EXPECT_EQ(error_of([&] { att.forward(Tensor::zeros({2, 5, 8}), Tensor::zeros({5, 5}, DType::i32)); }),
            "SelfAttention: expected a u8 (bool) or f32 (additive) mask, got i32");
  EXPECT_EQ(error_of([&] { nn::SelfAttention({.dim = 10, .num_heads = 3}); }),
            "SelfAttention: dim 10 is not divisible by num_heads 3 (set head_dim for heads of another width)");
}

// scaled_dot_product_attention, the op's contract: the naive path (and the automatic choice)
// against PyTorch's softmax(q kᵀ · scale + mask) v with autograd (tests/golden/gen/attention.py),
// bool and additive masks in broadcast shapes, causal in both alignments, need_weights, a
// differentiable additive mask, all-masked rows as zeros, dropout on the shared counter-based
// stream, NaN propagation, gradients against finite differences in f64, error messages.
// The fused kernel against this naive path: attention_fused_test.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "attention_cases.h"
#include "attn/attn.h"
#include "attn/ops/attention.h"
#include "attn/ops/dropout.h"
#include "attn/ops/indexing.h"
#include "attn/ops/softmax.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::describe;
using test::make_mask;
using test::mask_name;
using test::MaskKind;
using test::torch_ref;

namespace {

struct Outs {
  Tensor out, weights, dq, dk, dv;
};

// Forward + backward of sum(out * gout) from fresh leaf copies.
Outs run_sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const SdpaOptions& o,
        const Tensor& gout) {
  Tensor qq = q.clone().requires_grad_(), kk = k.clone().requires_grad_(), vv = v.clone().requires_grad_();
  SdpaResult r = scaled_dot_product_attention(qq, kk, vv, mask, o);
  r.out.backward(gout);
  return {r.out.detach(), r.weights.defined() ? r.weights.detach() : Tensor(), qq.grad(), kk.grad(), vv.grad()};
}

using Case = test::SdpaCase;

nlohmann::json ref_args(const Case& c) {
  return {{"causal", c.causal}, {"align", test::align_name(c.align)}};
}

const std::vector<Case> kCases = {
    {2, 3, 7, 7, 16, 16, MaskKind::none, false, CausalAlign::top_left},
    {2, 2, 5, 9, 8, 12, MaskKind::bool_key_padding, false, CausalAlign::top_left},
    {1, 2, 9, 5, 8, 8, MaskKind::bool_tq_tk, false, CausalAlign::top_left},
    {2, 2, 6, 6, 8, 8, MaskKind::float_full, true, CausalAlign::top_left},
    {1, 3, 4, 11, 16, 8, MaskKind::float_tq_tk, true, CausalAlign::bottom_right},
    {2, 1, 11, 4, 8, 8, MaskKind::none, true, CausalAlign::bottom_right},   // Tq > Tk: dead rows
    {2, 2, 10, 10, 8, 8, MaskKind::float_key_padding, true, CausalAlign::top_left},
    {1, 2, 1, 17, 32, 32, MaskKind::bool_key_padding, true, CausalAlign::bottom_right},   // decoding
    {2, 2, 33, 33, 64, 64, MaskKind::bool_tq_tk, true, CausalAlign::top_left},
};

}  // namespace

TEST(Attention, NaiveMatchesTorch) {
  Generator g(301);
  for (DType dt : {DType::f32, DType::f64})
    for (const Case& c : kCases) {
      Tensor q = randn({c.B, c.NH, c.Tq, c.HS}, g, dt), k = randn({c.B, c.NH, c.Tk, c.HS}, g, dt);
      Tensor v = randn({c.B, c.NH, c.Tk, c.HSv}, g, dt), gout = randn({c.B, c.NH, c.Tq, c.HSv}, g, dt);
      Tensor mask = make_mask(c.mask, c.B, c.NH, c.Tq, c.Tk, dt, g);
      test::Tensors in = {{"q", q}, {"k", k}, {"v", v}, {"g", gout}};
      if (mask.defined()) in["mask"] = mask;
      auto ref = torch_ref("attention.sdpa", in, ref_args(c));
      SdpaOptions o;
      o.causal = c.causal;
      o.causal_align = c.align;
      o.impl = SdpaImpl::naive;
      Outs r = run_sdpa(q, k, v, mask, o, gout);
      const double tol = dt == DType::f32 ? 2e-5 : 1e-11;
      const std::string ctx = describe(c) + " " + dtype_name(dt);
      EXPECT_TENSOR_NEAR(r.out, ref.at("out"), tol, tol) << ctx;
      EXPECT_TENSOR_NEAR(r.dq, ref.at("dq"), tol, tol) << ctx;
      EXPECT_TENSOR_NEAR(r.dk, ref.at("dk"), tol, tol) << ctx;
      EXPECT_TENSOR_NEAR(r.dv, ref.at("dv"), tol, tol) << ctx;
      if (dt == DType::f32) {   // the automatic choice (fused here) against the same reference
        o.impl = SdpaImpl::automatic;
        Outs a = run_sdpa(q, k, v, mask, o, gout);
        EXPECT_TENSOR_NEAR(a.out, ref.at("out"), 2e-5, 1e-4) << ctx << " automatic";
        EXPECT_TENSOR_NEAR(a.dq, ref.at("dq"), 2e-5, 1e-4) << ctx << " automatic";
        EXPECT_TENSOR_NEAR(a.dk, ref.at("dk"), 2e-5, 1e-4) << ctx << " automatic";
        EXPECT_TENSOR_NEAR(a.dv, ref.at("dv"), 2e-5, 1e-4) << ctx << " automatic";
      }
    }
}

TEST(Attention, ExplicitScale) {
  Generator g(302);
  Tensor q = randn({1, 2, 5, 8}, g), k = randn({1, 2, 6, 8}, g), v = randn({1, 2, 6, 8}, g);
  Tensor gout = randn({1, 2, 5, 8}, g);
  for (double scale : {1.0, 0.37})
    for (SdpaImpl impl : {SdpaImpl::naive, SdpaImpl::fused}) {
      auto ref = torch_ref("attention.sdpa", {{"q", q}, {"k", k}, {"v", v}, {"g", gout}}, {{"scale", scale}});
      SdpaOptions o;
      o.scale = scale;
      o.impl = impl;
      Outs r = run_sdpa(q, k, v, Tensor(), o, gout);
      EXPECT_TENSOR_NEAR(r.out, ref.at("out"), 1e-5, 1e-5) << "scale " << scale;
      EXPECT_TENSOR_NEAR(r.dq, ref.at("dq"), 1e-5, 1e-4) << "scale " << scale;
      EXPECT_TENSOR_NEAR(r.dk, ref.at("dk"), 1e-5, 1e-4) << "scale " << scale;
    }
}

// need_weights: the (B, NH, Tq, Tk) weights before dropout, differentiable.
TEST(Attention, WeightsMatchTorch) {
  Generator g(303);
  for (DType dt : {DType::f32, DType::f64}) {
    const int64_t B = 2, NH = 2, Tq = 6, Tk = 9, HS = 8;
    Tensor q = randn({B, NH, Tq, HS}, g, dt), k = randn({B, NH, Tk, HS}, g, dt), v = randn({B, NH, Tk, HS}, g, dt);
    Tensor gout = randn({B, NH, Tq, HS}, g, dt), gw = randn({B, NH, Tq, Tk}, g, dt);
    Tensor mask = make_mask(MaskKind::bool_tq_tk, B, NH, Tq, Tk, dt, g);
    auto ref = torch_ref("attention.sdpa", {{"q", q}, {"k", k}, {"v", v}, {"g", gout}, {"gw", gw}, {"mask", mask}},
                         {{"causal", true}, {"align", "bottom_right"}});
    Tensor qq = q.clone().requires_grad_(), kk = k.clone().requires_grad_(), vv = v.clone().requires_grad_();
    SdpaOptions o;
    o.need_weights = true;
    o.causal = true;
    o.causal_align = CausalAlign::bottom_right;
    o.impl = SdpaImpl::fused;   // need_weights forces the naive path
    SdpaResult r = scaled_dot_product_attention(qq, kk, vv, mask, o);
    ASSERT_TRUE(r.weights.defined());
    EXPECT_EQ(r.weights.shape(), (Shape{B, NH, Tq, Tk}));
    (sum(r.out * gout) + sum(r.weights * gw)).backward();
    const double tol = dt == DType::f32 ? 1e-5 : 1e-12;
    EXPECT_TENSOR_NEAR(r.out, ref.at("out"), tol, tol);
    EXPECT_TENSOR_NEAR(r.weights, ref.at("weights"), tol, tol);
    EXPECT_TENSOR_NEAR(qq.grad(), ref.at("dq"), tol, tol);
    EXPECT_TENSOR_NEAR(kk.grad(), ref.at("dk"), tol, tol);
    EXPECT_TENSOR_NEAR(vv.grad(), ref.at("dv"), tol, tol);
  }
  // Without need_weights, no weights.
  Tensor q = randn({1, 1, 3, 4}, g);
  EXPECT_FALSE(scaled_dot_product_attention(q, q, q).weights.defined());
}

// An additive mask that requires grad (e.g. a learned bias): automatic takes the naive path.
TEST(Attention, DifferentiableAdditiveMask) {
  Generator g(304);
  const int64_t B = 2, NH = 3, T = 7, HS = 8;
  Tensor q = randn({B, NH, T, HS}, g), k = randn({B, NH, T, HS}, g), v = randn({B, NH, T, HS}, g);
  Tensor gout = randn({B, NH, T, HS}, g);
  Tensor bias = randn({NH, T, T}, g);
  auto ref = torch_ref("attention.sdpa", {{"q", q}, {"k", k}, {"v", v}, {"g", gout}, {"mask", bias}},
                       {{"mask_grad", true}, {"causal", true}});
  Tensor bb = bias.clone().requires_grad_();
  Tensor qq = q.clone().requires_grad_();
  SdpaOptions o;
  o.causal = true;
  Tensor out = scaled_dot_product_attention(qq, k, v, bb, o).out;
  out.backward(gout);
  EXPECT_TENSOR_NEAR(out, ref.at("out"), 1e-5, 1e-5);
  EXPECT_TENSOR_NEAR(qq.grad(), ref.at("dq"), 1e-5, 1e-5);
  EXPECT_TENSOR_NEAR(bb.grad(), ref.at("dmask"), 1e-5, 1e-5);
}

// A query row whose keys are all masked gives zeros and zero gradients (PyTorch: NaN).
TEST(Attention, AllMaskedRowsGiveZeros) {
  Generator g(305);
  const int64_t B = 2, NH = 2, Tq = 5, Tk = 6, HS = 8;
  Tensor q = randn({B, NH, Tq, HS}, g), k = randn({B, NH, Tk, HS}, g), v = randn({B, NH, Tk, HS}, g);
  Tensor gout = randn({B, NH, Tq, HS}, g);
  // Batch 1 has every key padded; in batch 0 only key 0 is visible.
  std::vector<uint8_t> pad(size_t(B * Tk), 1);
  pad[0] = 0;
  Tensor mask = Tensor::from_vector(pad, {B, 1, 1, Tk});
  for (SdpaImpl impl : {SdpaImpl::naive, SdpaImpl::fused}) {
    SdpaOptions o;
    o.impl = impl;
    Outs r = run_sdpa(q, k, v, mask, o, gout);
    const char* name = impl == SdpaImpl::naive ? "naive" : "fused";
    EXPECT_TENSOR_NEAR(r.out.select(0, 1), Tensor::zeros({NH, Tq, HS}), 0, 0) << name;
    EXPECT_TENSOR_NEAR(r.dq.select(0, 1), Tensor::zeros({NH, Tq, HS}), 0, 0) << name;
    EXPECT_TENSOR_NEAR(r.dk.select(0, 1), Tensor::zeros({NH, Tk, HS}), 0, 0) << name;
    EXPECT_TENSOR_NEAR(r.dv.select(0, 1), Tensor::zeros({NH, Tk, HS}), 0, 0) << name;
    // Batch 0: every query sees exactly key 0, so out = v[key 0] for every row.
    EXPECT_TENSOR_NEAR(r.out.select(0, 0), v.select(0, 0).narrow(1, 0, 1).expand({NH, Tq, HS}), 1e-6, 1e-6) << name;
    for (double x : r.out.to_vector<double>()) ASSERT_FALSE(std::isnan(x)) << name;
  }
}

TEST(Attention, GradcheckF64) {
  Generator g(306);
  struct G {
    int64_t Tq, Tk;
    MaskKind mask;
    bool causal;
    CausalAlign align;
    double p;
  };
  for (const G& c : {G{4, 5, MaskKind::none, false, CausalAlign::top_left, 0.0},
                     G{5, 5, MaskKind::bool_tq_tk, true, CausalAlign::top_left, 0.0},
                     G{3, 6, MaskKind::float_tq_tk, true, CausalAlign::bottom_right, 0.0},
                     G{6, 3, MaskKind::float_full, true, CausalAlign::bottom_right, 0.0},
                     G{4, 6, MaskKind::bool_key_padding, false, CausalAlign::top_left, 0.3}}) {
    const int64_t B = 2, NH = 2, HS = 3;
    Tensor q = randn({B, NH, c.Tq, HS}, g, DType::f64).requires_grad_();
    Tensor k = randn({B, NH, c.Tk, HS}, g, DType::f64).requires_grad_();
    Tensor v = randn({B, NH, c.Tk, 4}, g, DType::f64).requires_grad_();
    Tensor mask = make_mask(c.mask, B, NH, c.Tq, c.Tk, DType::f64, g);
    EXPECT_TRUE(test::gradcheck(
        [&](const std::vector<Tensor>& in) {
          SdpaOptions o;
          o.causal = c.causal;
          o.causal_align = c.align;
          o.dropout_p = c.p;
          Generator dg(7);   // the same dropout mask at every evaluation
          o.generator = &dg;
          return scaled_dot_product_attention(in[0], in[1], in[2], mask, o).out;
        },
        {q, k, v}))
        << "Tq " << c.Tq << " Tk " << c.Tk << " mask " << mask_name(c.mask) << " p " << c.p;
  }
}

// Dropout drops elements ((b*NH + h)*Tq + i)*Tk + j of one reserved stream: the naive path equals
// attn::dropout applied to the weights from the same generator state.
TEST(Attention, DropoutUsesTheSharedStream) {
  Generator g(307);
  const int64_t B = 2, NH = 3, Tq = 5, Tk = 7, HS = 4;
  Tensor q = randn({B, NH, Tq, HS}, g), k = randn({B, NH, Tk, HS}, g), v = randn({B, NH, Tk, HS}, g);
  SdpaOptions o;
  o.dropout_p = 0.4;
  o.need_weights = true;
  Generator g1(99), g2(99);
  o.generator = &g1;
  SdpaResult r = scaled_dot_product_attention(q, k, v, Tensor(), o);
  EXPECT_EQ(g1.offset(), uint64_t(B * NH * Tq * Tk));
  Tensor expect = matmul(dropout(r.weights, 0.4, true, g2), v);
  EXPECT_TENSOR_NEAR(r.out, expect, 0, 0);
  // and something was dropped
  Tensor nodrop = scaled_dot_product_attention(q, k, v).out;
  EXPECT_FALSE(test::near(r.out, nodrop, 1e-3, 1e-3));
}

TEST(Attention, NanPropagates) {
  Generator g(308);
  const int64_t B = 1, NH = 2, T = 9, HS = 8;
  for (SdpaImpl impl : {SdpaImpl::naive, SdpaImpl::fused}) {
    Tensor q = randn({B, NH, T, HS}, g), k = randn({B, NH, T, HS}, g), v = randn({B, NH, T, HS}, g);
    q.select(0, 0).select(0, 1).select(0, 3).select(0, 2).fill_(NAN);   // head 1, query 3
    k.select(0, 0).select(0, 0).select(0, 5).select(0, 0).fill_(NAN);   // head 0, key 5
    SdpaOptions o;
    o.impl = impl;
    o.causal = true;
    Tensor out = scaled_dot_product_attention(q, k, v, Tensor(), o).out;
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < T; ++i) {
        // head 0: queries >= 5 see key 5; head 1: query 3 only.
        const bool nan_row = h == 0 ? i >= 5 : i == 3;
        for (int64_t d = 0; d < HS; ++d)
          EXPECT_EQ(std::isnan(out.at({0, h, i, d})), nan_row)
              << (impl == SdpaImpl::naive ? "naive" : "fused") << " head " << h << " query " << i;
      }
  }
}

TEST(Attention, ErrorMessages) {
  Tensor q = Tensor::zeros({2, 4, 7, 16}), k = Tensor::zeros({2, 4, 9, 16}), v = Tensor::zeros({2, 4, 9, 8});
  EXPECT_EQ(error_of([&] { scaled_dot_product_attention(q, Tensor::zeros({2, 4, 9, 32}), v); }),
            "scaled_dot_product_attention: expected k of head size 16 (as q), got shape [2, 4, 9, 32]");
  EXPECT_EQ(error_of([&] { scaled_dot_product_attention(q, Tensor::zeros({3, 4, 9, 16}), v); }),
            "scaled_dot_product_attention: expected q, k, v with the same batch and head dims (B, NH), got "
            "[2, 4, 7, 16], [3, 4, 9, 16], [2, 4, 9, 8]");
  EXPECT_EQ(error_of([&] { scaled_dot_product_attention(q, k, Tensor::zeros({2, 4, 8, 8})); }),
            "scaled_dot_product_attention: expected v with as many keys as k (9), got shape [2, 4, 8, 8]");
  EXPECT_EQ(error_of([&] { scaled_dot_product_attention(q.select(0, 0), k, v); }),
            "scaled_dot_product_attention: expected 4-d q, k, v of shapes (B, NH, T, HS), got [4, 7, 16], "
            "[2, 4, 9, 16], [2, 4, 9, 8]");
  EXPECT_EQ(error_of([&] { scaled_dot_product_attention(q, k.to(DType::f64), v); }),
            "scaled_dot_product_attention: q, k, v dtypes differ (f32, f64, f32)");
  EXPECT_EQ(error_of([&] { scaled_dot_product_attention(q, k, v, Tensor::zeros({3, 9}, DType::u8)); }),
            "scaled_dot_product_attention: mask of shape [3, 9] is not broadcastable to [2, 4, 7, 9]");
  EXPECT_EQ(error_of([&] { scaled_dot_product_attention(q, k, v, Tensor::zeros({1, 2, 4, 7, 9}, DType::u8)); }),
            "scaled_dot_product_attention: mask of shape [1, 2, 4, 7, 9] is not broadcastable to [2, 4, 7, 9]");
  EXPECT_EQ(error_of([&] { scaled_dot_product_attention(q, k, v, Tensor::zeros({7, 9}, DType::i64)); }),
            "scaled_dot_product_attention: expected a u8 (boolean) or f32 (additive) mask, got i64");
  EXPECT_EQ(error_of([&] { scaled_dot_product_attention(q, k, v, Tensor::zeros({7, 9}, DType::f64)); }),
            "scaled_dot_product_attention: expected a u8 (boolean) or f32 (additive) mask, got f64");
  SdpaOptions o;
  o.dropout_p = 1.5;
  EXPECT_EQ(error_of([&] { scaled_dot_product_attention(q, k, v, Tensor(), o); }),
            "scaled_dot_product_attention: dropout_p must be in [0, 1], got 1.5");
  o = SdpaOptions();
  o.impl = SdpaImpl::fused;
  const Tensor q64 = q.to(DType::f64), k64 = k.to(DType::f64), v64 = v.to(DType::f64);
  EXPECT_EQ(error_of([&] { scaled_dot_product_attention(q64, k64, v64, Tensor(), o); }),
            "scaled_dot_product_attention: the fused kernel is f32 only, got f64 (use SdpaImpl::naive)");
  Tensor bias = Tensor::zeros({7, 9}).requires_grad_();
  EXPECT_EQ(error_of([&] { scaled_dot_product_attention(q, k, v, bias, o); }),
            "scaled_dot_product_attention: the fused kernel does not differentiate the additive mask (detach it "
            "or use SdpaImpl::naive)");
  EXPECT_EQ(error_of([&] { scaled_dot_product_attention(q.to(DType::i64), k.to(DType::i64), v.to(DType::i64)); }),
            "scaled_dot_product_attention: expected f32 or f64 q, k, v, got i64");
}

// The fused attention kernel against the naive path (the oracle), on every ISA this CPU runs:
// forward and dq/dk/dv for Tq, Tk in {1, 7, 64, 197, 1023}, HS in {32, 64, 80} (and odd sizes),
// bool and additive masks in broadcast shapes, causal in both alignments with Tq != Tk, dropout
// dropping exactly the same elements, all-masked rows, strided inputs, large inputs,
// bit-identical reruns, and the memory bound: no Tq × Tk buffer at T = 4096. The variable-length
// (packed sequences) entry point against the per-sequence packed call and the f64 naive path.
#include <gtest/gtest.h>

#include <cmath>

#include "attention_cases.h"
#include "attn/attn.h"
#include "attn/core/memory.h"
#include "attn/ops/attention.h"
#include "attn/ops/indexing.h"
#include "errors.h"
#include "isa.h"
#include "torch_ref.h"

using namespace attn;
using test::describe;
using test::make_mask;
using test::MaskKind;

namespace {

struct Outs {
  Tensor out, dq, dk, dv;
};

Outs run_sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, SdpaOptions o, SdpaImpl impl,
              const Tensor& gout, uint64_t dropout_seed = 0) {
  Tensor qq = q.clone().requires_grad_(), kk = k.clone().requires_grad_(), vv = v.clone().requires_grad_();
  Generator dg(dropout_seed);
  o.generator = &dg;
  o.impl = impl;
  Tensor out = scaled_dot_product_attention(qq, kk, vv, mask, o).out;
  out.backward(gout);
  return {out.detach(), qq.grad(), kk.grad(), vv.grad()};
}

using Case = test::SdpaCase;

void check_case(const Case& c, Generator& g, const std::string& isa) {
  Tensor q = randn({c.B, c.NH, c.Tq, c.HS}, g), k = randn({c.B, c.NH, c.Tk, c.HS}, g);
  Tensor v = randn({c.B, c.NH, c.Tk, c.HSv}, g), gout = randn({c.B, c.NH, c.Tq, c.HSv}, g);
  Tensor mask = make_mask(c.mask, c.B, c.NH, c.Tq, c.Tk, DType::f32, g);
  SdpaOptions o;
  o.causal = c.causal;
  o.causal_align = c.align;
  o.dropout_p = c.p;
  Outs f = run_sdpa(q, k, v, mask, o, SdpaImpl::fused, gout, 11);
  Outs n = run_sdpa(q, k, v, mask, o, SdpaImpl::naive, gout, 11);
  const std::string ctx = describe(c) + " isa " + isa;
  EXPECT_TENSOR_NEAR(f.out, n.out, 2e-5, 1e-4) << ctx;
  EXPECT_TENSOR_NEAR(f.dq, n.dq, 5e-5, 1e-3) << ctx;
  EXPECT_TENSOR_NEAR(f.dk, n.dk, 5e-5, 1e-3) << ctx;
  EXPECT_TENSOR_NEAR(f.dv, n.dv, 5e-5, 1e-3) << ctx;
}

using CA = CausalAlign;
using MK = MaskKind;

// Every value of Tq, Tk in {1, 7, 64, 197, 1023} and HS in {32, 64, 80} appears, with each mask
// kind and both causal alignments, square and not.
const std::vector<Case> kSweep = {
    {2, 2, 1, 1, 32, 32, MK::none, false, CA::top_left},
    {2, 2, 1, 1, 64, 64, MK::bool_key_padding, true, CA::bottom_right},
    {2, 3, 7, 7, 32, 32, MK::bool_key_padding, false, CA::top_left},
    {2, 2, 7, 64, 64, 64, MK::float_tq_tk, true, CA::bottom_right},
    {2, 2, 64, 7, 80, 80, MK::bool_tq_tk, true, CA::top_left},
    {1, 2, 64, 64, 64, 64, MK::none, true, CA::top_left},
    {2, 1, 64, 197, 32, 32, MK::float_key_padding, true, CA::bottom_right},
    {1, 2, 197, 197, 64, 64, MK::float_full, false, CA::top_left},
    {1, 1, 197, 64, 80, 80, MK::none, true, CA::bottom_right},   // Tq > Tk: leading rows all masked
    {1, 1, 197, 1023, 32, 32, MK::bool_key_padding, true, CA::bottom_right},
    {1, 1, 1023, 197, 80, 80, MK::bool_tq_tk, true, CA::top_left},
    // Work items of several query blocks sharing one packed key block (at 2 threads: 4 blocks per
    // item, the head's 5th block alone; 2 per item, Tq > Tk so whole blocks skip key blocks).
    {1, 4, 320, 320, 64, 64, MK::none, true, CA::top_left},
    {1, 2, 300, 150, 32, 32, MK::bool_tq_tk, true, CA::bottom_right},
    {1, 1, 1023, 1023, 64, 64, MK::float_tq_tk, true, CA::top_left},
    {2, 2, 1, 1023, 64, 64, MK::bool_key_padding, true, CA::bottom_right},   // decoding
    {1, 1, 1023, 1, 32, 32, MK::none, false, CA::top_left},
    {1, 2, 13, 29, 13, 7, MK::float_full, false, CA::top_left},   // odd head sizes (padding)
    {1, 2, 31, 17, 3, 19, MK::bool_tq_tk, true, CA::bottom_right},
    // Short sequences without mask, dropout or causality: the whole-row forward (fwd_short_item);
    // ViT on 28 × 28 images is T = 50, HS = 32. HSv not a multiple of the lanes: the tiled path.
    {2, 4, 50, 50, 32, 32, MK::none, false, CA::top_left},
    {1, 2, 64, 64, 64, 64, MK::none, false, CA::top_left},
    {2, 2, 7, 50, 13, 16, MK::none, false, CA::top_left},
    {1, 1, 64, 57, 80, 80, MK::none, false, CA::top_left},
    {1, 2, 13, 29, 16, 7, MK::none, false, CA::top_left},
};

}  // namespace

TEST(AttentionFused, MatchesNaiveEveryIsa) {
  test::for_each_isa([&](Isa isa) {
    Generator g(401);
    for (const Case& c : kSweep) check_case(c, g, isa_name(isa));
  });
}

// Dropout: the fused kernel draws from the same (seed, offset) stream at the same element index
// as the naive path, so the outputs and gradients agree; with v = I (Tk × Tk) the output IS the
// dropped weight matrix, whose zeros must coincide exactly.
TEST(AttentionFused, DropoutDropsTheSameElements) {
  test::for_each_isa([&](Isa isa) {
    Generator g(402);
    for (const Case& c : {Case{2, 3, 7, 7, 32, 32, MK::none, false, CA::top_left, 0.3},
                          Case{1, 2, 197, 64, 64, 64, MK::bool_key_padding, true, CA::bottom_right, 0.1},
                          Case{1, 1, 70, 197, 80, 80, MK::float_tq_tk, true, CA::top_left, 0.5}})
      check_case(c, g, isa_name(isa));
    for (int64_t Tk : {7, 64, 67}) {
      const int64_t B = 2, NH = 2, Tq = 9;
      Tensor q = randn({B, NH, Tq, 16}, g), k = randn({B, NH, Tk, 16}, g);
      Tensor eye = Tensor::zeros({Tk, Tk});
      for (int64_t j = 0; j < Tk; ++j) eye.select(0, j).select(0, j).fill_(1.0);
      Tensor v = eye.expand({B, NH, Tk, Tk}).contiguous();
      SdpaOptions o;
      o.dropout_p = 0.35;
      o.causal = true;
      Generator g1(1234), g2(1234);
      g1.set_state(1234, 17);
      g2.set_state(1234, 17);
      o.generator = &g1;
      o.impl = SdpaImpl::fused;
      Tensor wf = scaled_dot_product_attention(q, k, v, Tensor(), o).out;
      o.generator = &g2;
      o.impl = SdpaImpl::naive;
      Tensor wn = scaled_dot_product_attention(q, k, v, Tensor(), o).out;
      EXPECT_EQ(g1.offset(), g2.offset());
      EXPECT_EQ(g1.offset(), uint64_t(17 + B * NH * Tq * Tk));
      const auto vf = wf.to_vector<float>(), vn = wn.to_vector<float>();
      int64_t zeros = 0, dropped = 0;
      for (size_t i = 0; i < vf.size(); ++i) {
        ASSERT_EQ(vf[i] == 0.f, vn[i] == 0.f) << "element " << i << " Tk " << Tk << " isa " << isa_name(isa);
        zeros += vn[i] == 0.f;
      }
      // Causal hides Tq*Tk - (visible) elements; the rest of the zeros are drops (~35 %).
      int64_t visible = 0;
      for (int64_t i = 0; i < Tq; ++i) visible += std::min(Tk, i + 1);
      dropped = zeros - B * NH * (Tq * Tk - visible);
      EXPECT_GT(dropped, int64_t(0.2 * double(B * NH * visible))) << "Tk " << Tk;
      EXPECT_LT(dropped, int64_t(0.5 * double(B * NH * visible))) << "Tk " << Tk;
      EXPECT_TENSOR_NEAR(wf, wn, 1e-5, 1e-5) << "Tk " << Tk;
    }
  });
}

// p = 1 drops everything: zeros (as naive).
TEST(AttentionFused, DropoutPOne) {
  Generator g(403);
  Tensor q = randn({1, 2, 9, 8}, g), k = randn({1, 2, 9, 8}, g), v = randn({1, 2, 9, 8}, g);
  SdpaOptions o;
  o.dropout_p = 1.0;
  o.impl = SdpaImpl::fused;
  EXPECT_TENSOR_NEAR(scaled_dot_product_attention(q, k, v, Tensor(), o).out, Tensor::zeros({1, 2, 9, 8}), 0, 0);
}

// q, k, v split out of one (B, T, 3, NH, HS) projection as strided views: no copy needed, same result.
TEST(AttentionFused, StridedInputs) {
  Generator g(404);
  const int64_t B = 2, T = 37, NH = 3, HS = 16;
  Tensor qkv = randn({B, T, 3, NH, HS}, g);
  Tensor qkv_p = qkv.permute({2, 0, 3, 1, 4});   // (3, B, NH, T, HS)
  Tensor q = qkv_p.select(0, 0), k = qkv_p.select(0, 1), v = qkv_p.select(0, 2);
  ASSERT_FALSE(q.is_contiguous());
  for (bool causal : {true, false}) {   // not causal: the short-sequence forward reads q and v in place
    SCOPED_TRACE(causal ? "causal" : "not causal");
    SdpaOptions o;
    o.causal = causal;
    o.impl = SdpaImpl::fused;
    Tensor a = scaled_dot_product_attention(q, k, v, Tensor(), o).out;
    Tensor b = scaled_dot_product_attention(q.contiguous(), k.contiguous(), v.contiguous(), Tensor(), o).out;
    EXPECT_TENSOR_NEAR(a, b, 0, 0);
    // A transposed head dim (no unit stride) is copied and still right.
    Tensor qt = q.contiguous().transpose(2, 3).contiguous().transpose(2, 3);
    EXPECT_TENSOR_NEAR(scaled_dot_product_attention(qt, k, v, Tensor(), o).out, b, 0, 0);
    // Gradients reach the shared projection.
    Tensor leaf = qkv.clone().requires_grad_();
    Tensor lp = leaf.permute({2, 0, 3, 1, 4});
    sum(scaled_dot_product_attention(lp.select(0, 0), lp.select(0, 1), lp.select(0, 2), Tensor(), o).out).backward();
    ASSERT_TRUE(leaf.grad().defined());
    EXPECT_EQ(leaf.grad().shape(), qkv.shape());
  }
}

// The output is stored (B, T, NH, HS), so merging the heads is a view; a gradient in that layout (what
// merge_heads' backward hands back) gives the same dq/dk/dv as the naive path with a contiguous one.
TEST(AttentionFused, OutputInHeadsLastLayout) {
  test::IsaRestore restore;
  Generator g(405);
  const int64_t B = 2, T = 70, NH = 3, HS = 32;
  Tensor q = randn({B, NH, T, HS}, g), k = randn({B, NH, T, HS}, g), v = randn({B, NH, T, HS}, g);
  Tensor gout_bthd = randn({B, T, NH, HS}, g);
  Tensor gout = gout_bthd.permute({0, 2, 1, 3});   // (B, NH, T, HS) view of a (B, T, NH, HS) buffer
  ASSERT_FALSE(gout.is_contiguous());
  SdpaOptions o;
  o.causal = true;
  const Outs ref = run_sdpa(q, k, v, Tensor(), o, SdpaImpl::naive, gout.contiguous());
  for (Isa isa : test::supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    set_isa(isa);
    const Outs got = run_sdpa(q, k, v, Tensor(), o, SdpaImpl::fused, gout);
    EXPECT_TRUE(got.out.transpose(1, 2).is_contiguous());
    EXPECT_TRUE(got.out.transpose(1, 2).reshape({B, T, NH * HS}).shares_storage(got.out));
    EXPECT_TENSOR_NEAR(got.out, ref.out, 2e-6, 2e-5);
    EXPECT_TENSOR_NEAR(got.dq, ref.dq, 2e-5, 2e-4);
    EXPECT_TENSOR_NEAR(got.dk, ref.dk, 2e-5, 2e-4);
    EXPECT_TENSOR_NEAR(got.dv, ref.dv, 2e-5, 2e-4);
  }
}

// Large scores (online-softmax rescaling across tiles) and a huge additive mask stay finite and
// agree with the naive path.
TEST(AttentionFused, LargeInputs) {
  test::for_each_isa([&](Isa isa) {
    Generator g(405);
    const int64_t B = 1, NH = 2, T = 150, HS = 32;
    Tensor q = randn({B, NH, T, HS}, g) * 30.0, k = randn({B, NH, T, HS}, g) * 30.0, v = randn({B, NH, T, HS}, g);
    Tensor mask = randn({T, T}, g) * 1e4;
    Tensor gout = randn({B, NH, T, HS}, g);
    SdpaOptions o;
    Outs f = run_sdpa(q, k, v, mask, o, SdpaImpl::fused, gout), n = run_sdpa(q, k, v, mask, o, SdpaImpl::naive, gout);
    for (double x : f.out.to_vector<double>()) ASSERT_TRUE(std::isfinite(x)) << isa_name(isa);
    EXPECT_TENSOR_NEAR(f.out, n.out, 1e-4, 1e-4) << isa_name(isa);
    EXPECT_TENSOR_NEAR(f.dv, n.dv, 1e-4, 1e-4) << isa_name(isa);
  });
}

// Same inputs, same thread count: bit-identical forward and backward.
TEST(AttentionFused, Deterministic) {
  Generator g(406);
  const int64_t B = 1, NH = 3, T = 300, HS = 64;
  Tensor q = randn({B, NH, T, HS}, g), k = randn({B, NH, T, HS}, g), v = randn({B, NH, T, HS}, g);
  Tensor gout = randn({B, NH, T, HS}, g);
  SdpaOptions o;
  o.causal = true;
  o.dropout_p = 0.1;
  Outs a = run_sdpa(q, k, v, Tensor(), o, SdpaImpl::fused, gout, 5);
  for (int rep = 0; rep < 3; ++rep) {
    Outs b = run_sdpa(q, k, v, Tensor(), o, SdpaImpl::fused, gout, 5);
    EXPECT_TENSOR_NEAR(a.out, b.out, 0, 0);
    EXPECT_TENSOR_NEAR(a.dq, b.dq, 0, 0);
    EXPECT_TENSOR_NEAR(a.dk, b.dk, 0, 0);
    EXPECT_TENSOR_NEAR(a.dv, b.dv, 0, 0);
  }
}

// T = 4096: the fused forward allocates O(T) (output, log-sum-exp, per-thread tiles), nothing of
// size T × T; the naive path, measured the same way, does (so the measure can see it).
TEST(AttentionFused, NoQuadraticBufferAt4096) {
  Generator g(407);
  const int64_t B = 1, NH = 2, T = 4096, HS = 64;
  const int64_t quadratic = T * T * 4;   // one (T, T) f32 matrix: 64 MiB
  Tensor q = randn({B, NH, T, HS}, g), k = randn({B, NH, T, HS}, g), v = randn({B, NH, T, HS}, g);
  const int64_t qkv_bytes = B * NH * T * HS * 4;   // 2 MiB each
  SdpaOptions o;
  o.causal = true;
  o.impl = SdpaImpl::fused;
  int64_t fwd_extra = 0;
  {
    NoGradGuard ng;
    const int64_t live = memory_stats().live_bytes;
    reset_peak_memory();
    Tensor out = scaled_dot_product_attention(q, k, v, Tensor(), o).out;
    fwd_extra = memory_stats().peak_bytes - live;
  }
  EXPECT_LE(fwd_extra, qkv_bytes + (1 << 20)) << "fused forward peak extra bytes";   // out + lse + tiles
  EXPECT_LT(fwd_extra, quadratic / 16);
  // Forward + backward with grads: dq, dk, dv, the per-group dq partials: still O(T).
  {
    Tensor qq = q.clone().requires_grad_(), kk = k.clone().requires_grad_(), vv = v.clone().requires_grad_();
    const int64_t live = memory_stats().live_bytes;
    reset_peak_memory();
    sum(scaled_dot_product_attention(qq, kk, vv, Tensor(), o).out).backward();
    const int64_t extra = memory_stats().peak_bytes - live;
    EXPECT_LT(extra, 16 * qkv_bytes) << "fused forward + backward peak extra bytes";
    EXPECT_LT(extra, quadratic / 2);
  }
  // The naive path at NH = 1 holds at least one (T, T) matrix.
  {
    NoGradGuard ng;
    Tensor q1 = q.narrow(1, 0, 1), k1 = k.narrow(1, 0, 1), v1 = v.narrow(1, 0, 1);
    o.impl = SdpaImpl::naive;
    const int64_t live = memory_stats().live_bytes;
    reset_peak_memory();
    Tensor out = scaled_dot_product_attention(q1, k1, v1, Tensor(), o).out;
    EXPECT_GE(memory_stats().peak_bytes - live, quadratic) << "naive peak extra bytes";
  }
}

// scaled_dot_product_attention_packed: the same output and d(qkv), bit for bit, as splitting the
// packed projection into q, k, v views, calling scaled_dot_product_attention and merging the heads
// (the unpacked path runs the same kernels; only the gradient buffer differs). ViT's short sequence
// (T 50, HS 32), the tiled path (T 150) with a mask, causal with dropout, and HS 128 at T 16, where
// `automatic` takes the naive path (packed falls back through the views).
TEST(AttentionFused, PackedEqualsUnpacked) {
  test::IsaRestore restore;
  struct Case { int64_t B, T, NH, HS; bool causal, mask; double p; SdpaImpl impl; };
  const Case cases[] = {{4, 50, 4, 32, false, false, 0.0, SdpaImpl::automatic},
                        {2, 150, 3, 64, false, true, 0.0, SdpaImpl::fused},
                        {2, 90, 2, 32, true, false, 0.2, SdpaImpl::automatic},
                        {2, 16, 2, 128, false, false, 0.0, SdpaImpl::automatic}};
  for (Isa isa : test::supported_isas()) {
    set_isa(isa);
    for (const Case& c : cases) {
      Generator g(408);
      const int64_t C = c.NH * c.HS;
      Tensor x = randn({c.B, c.T, 3 * C}, g), gout = randn({c.B, c.T, C}, g);
      Tensor mask = c.mask ? randn({c.T, c.T}, g) : Tensor();
      SdpaOptions o;
      o.causal = c.causal;
      o.dropout_p = c.p;
      o.impl = c.impl;
      Generator d1(9), d2(9);
      Tensor xa = x.clone().requires_grad_();
      o.generator = &d1;
      Tensor ya = scaled_dot_product_attention_packed(xa, c.NH, mask, o);
      ya.backward(gout);
      Tensor xb = x.clone().requires_grad_();
      o.generator = &d2;
      Tensor t = xb.view({c.B, c.T, 3, c.NH, c.HS}).permute({2, 0, 3, 1, 4});
      Tensor yb = scaled_dot_product_attention(t.select(0, 0), t.select(0, 1), t.select(0, 2), mask, o)
                      .out.transpose(1, 2).reshape({c.B, c.T, C});
      yb.backward(gout);
      const std::string ctx = std::string(isa_name(isa)) + " T " + std::to_string(c.T) + " HS " + std::to_string(c.HS);
      ASSERT_EQ(ya.shape(), Shape({c.B, c.T, C})) << ctx;
      EXPECT_TENSOR_NEAR(ya, yb, 0, 0) << ctx;
      EXPECT_TENSOR_NEAR(xa.grad(), xb.grad(), 0, 0) << ctx;
    }
  }
  Tensor bad = Tensor::zeros({2, 5, 30});
  EXPECT_THROW(scaled_dot_product_attention_packed(bad, 4), Error);   // 30 is not 3 x 4 x HS
}

// scaled_dot_product_attention_varlen: sequences of 1, 16, 0, 63, 130 and 64 tokens packed one after
// another (the kernel's short path up to 64 tokens, its tiled path above, an empty sequence) give, row
// by row, what scaled_dot_product_attention_packed gives on each sequence alone (bit for bit: the same
// kernel on the same rows), and the f64 naive path's values (1e-5); causal too; the f64 entry point is
// that naive path. Its errors: gradients, offsets, dropout.
TEST(AttentionFused, VarlenEqualsEachSequenceAlone) {
  test::IsaRestore restore;
  const std::vector<int64_t> cu = {0, 1, 17, 17, 80, 210, 274};
  const int64_t NH = 4, N = cu.back();
  for (int64_t HS : {16, 24}) {
    const int64_t C = NH * HS;
    Generator g(77);
    const Tensor x = randn({N, 3 * C}, g);
    for (Isa isa : test::supported_isas()) {
      set_isa(isa);
      for (bool causal : {false, true}) {
        SdpaOptions o;
        o.causal = causal;
        const Tensor y = scaled_dot_product_attention_varlen(x, cu, NH, o);
        ASSERT_EQ(y.shape(), Shape({N, C}));
        SdpaOptions naive = o;
        naive.impl = SdpaImpl::naive;
        const Tensor y64 = scaled_dot_product_attention_varlen(x.to(DType::f64), cu, NH, o);
        for (size_t s = 0; s + 1 < cu.size(); ++s) {
          if (cu[s + 1] == cu[s]) continue;
          const std::string ctx = std::string(isa_name(isa)) + " HS " + std::to_string(HS) + " causal " +
                                  std::to_string(causal) + " sequence " + std::to_string(s);
          const Tensor xs = x.slice(0, cu[s], cu[s + 1]).unsqueeze(0);
          const Tensor alone = scaled_dot_product_attention_packed(xs, NH, Tensor(), o).squeeze(0);
          const Tensor ref = scaled_dot_product_attention_packed(xs.to(DType::f64), NH, Tensor(), naive).squeeze(0);
          EXPECT_TENSOR_NEAR(y.slice(0, cu[s], cu[s + 1]), alone, 0, 0) << ctx;
          EXPECT_TENSOR_NEAR(y.slice(0, cu[s], cu[s + 1]), ref.to(DType::f32), 1e-5, 1e-5) << ctx;
          EXPECT_TENSOR_NEAR(y64.slice(0, cu[s], cu[s + 1]), ref, 0, 0) << ctx;
        }
      }
    }
  }
  const Tensor x = Tensor::zeros({5, 24});
  EXPECT_EQ(scaled_dot_product_attention_varlen(Tensor::zeros({0, 24}), {0}, 2).shape(), Shape({0, 8}));
  EXPECT_EQ(test::error_of([&] { scaled_dot_product_attention_varlen(x, {0, 2, 4}, 2); }),
            "scaled_dot_product_attention_varlen: expected cu_seqlens from 0 to the 5 rows of qkv, got 3 offsets "
            "from 0 to 4");
  EXPECT_EQ(test::error_of([&] { scaled_dot_product_attention_varlen(x, {0, 3, 2, 5}, 2); }),
            "scaled_dot_product_attention_varlen: expected non-decreasing cu_seqlens, got 3 then 2 at offset 2");
  EXPECT_NE(test::error_of([&] { scaled_dot_product_attention_varlen(x, {0, 5}, 5); }).find("not 3 x num_heads (5)"),
            std::string::npos);
  SdpaOptions drop;
  drop.dropout_p = 0.1;
  EXPECT_EQ(test::error_of([&] { scaled_dot_product_attention_varlen(x, {0, 5}, 2, drop); }),
            "scaled_dot_product_attention_varlen: expected no dropout and no weights (an inference op), got "
            "dropout_p 0.1");
  const Tensor leaf = x.clone().requires_grad_();
  EXPECT_NE(test::error_of([&] { scaled_dot_product_attention_varlen(leaf, {0, 5}, 2); }).find("has no backward"),
            std::string::npos);
  NoGradGuard ng;
  EXPECT_EQ(scaled_dot_product_attention_varlen(leaf, {0, 5}, 2).shape(), Shape({5, 8}));
}

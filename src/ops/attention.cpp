// scaled_dot_product_attention: validation, the choice between the naive path
// (attention_naive.cpp, composed of differentiable ops) and the fused kernels (backend/cpu/attention_fused*),
// and the fused path's autograd node (backward beside forward, as every op here).
#include "attn/core/profile.h"
#include "attn/ops/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "attn/autograd/grad_mode.h"
#include "attn/autograd/node.h"
#include "attn/core/parallel.h"
#include "attn/ops/matmul.h"
#include "../backend/cpu/attention_bf16.h"
#include "../backend/cpu/attention_fused.h"
#include "../backend/cpu/convert_kernels.h"
#include "../backend/cpu/gemm.h"
#include "../backend/cpu/vec_dispatch.h"
#include "attention_naive.h"
#include "gemm_record.h"
#include "work_items.h"

namespace attn {

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

void validate(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const SdpaOptions& o) {
  ATTN_CHECK(q.defined() && k.defined() && v.defined(), kOp, ": expected q, k and v, got an undefined tensor");
  ATTN_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, kOp,
             ": expected 4-d q, k, v of shapes (B, NH, T, HS), got ", q.shape(), ", ", k.shape(), ", ", v.shape());
  ATTN_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), kOp, ": q, k, v dtypes differ (",
             dtype_name(q.dtype()), ", ", dtype_name(k.dtype()), ", ", dtype_name(v.dtype()), ")");
  ATTN_CHECK(q.dtype() == DType::f32 || q.dtype() == DType::f64, kOp, ": expected f32 or f64 q, k, v, got ",
             dtype_name(q.dtype()));
  ATTN_CHECK(q.size(0) == k.size(0) && q.size(0) == v.size(0) && q.size(1) == k.size(1) && q.size(1) == v.size(1),
             kOp, ": expected q, k, v with the same batch and head dims (B, NH), got ", q.shape(), ", ", k.shape(),
             ", ", v.shape());
  ATTN_CHECK(q.size(3) == k.size(3), kOp, ": expected k of head size ", q.size(3), " (as q), got shape ", k.shape());
  ATTN_CHECK(k.size(2) == v.size(2), kOp, ": expected v with as many keys as k (", k.size(2), "), got shape ",
             v.shape());
  if (mask.defined()) {
    ATTN_CHECK(mask.dtype() == DType::u8 || mask.dtype() == q.dtype(), kOp, ": expected a u8 (boolean) or ",
               dtype_name(q.dtype()), " (additive) mask, got ", dtype_name(mask.dtype()));
    const Shape target = {q.size(0), q.size(1), q.size(2), k.size(2)};
    bool ok = mask.dim() <= 4;
    for (int64_t d = 1; ok && d <= mask.dim(); ++d) {
      const int64_t m = mask.shape()[size_t(mask.dim() - d)], t = target[size_t(4 - d)];
      ok = m == t || m == 1;
    }
    ATTN_CHECK(ok, kOp, ": mask of shape ", mask.shape(), " is not broadcastable to ", target);
  }
  ATTN_CHECK(o.dropout_p >= 0.0 && o.dropout_p <= 1.0, kOp, ": dropout_p must be in [0, 1], got ", o.dropout_p);
}

// q, k, v as the kernels read them: any strides over (B, NH, T), unit stride along the head dim.
Tensor unit_last(const Tensor& t) { return t.stride(3) == 1 || t.size(3) <= 1 ? t : t.contiguous(); }

// Everything the fused kernels need besides the data pointers.
struct FusedSetup {
  kernels::AttnGeometry g;
  kernels::AttnDropout d;
  Tensor q, k, v, mask;   // detached; mask expanded to (B, NH, Tq, Tk) as a view (stride 0 where broadcast)

  kernels::AttnMask mask_args() const {
    kernels::AttnMask m;
    if (!mask.defined()) return m;
    if (mask.dtype() == DType::u8) m.b = mask.data<uint8_t>();
    else m.f = mask.data<float>();
    m.sb = mask.stride(0); m.sh = mask.stride(1); m.si = mask.stride(2); m.sj = mask.stride(3);
    return m;
  }
};

// Where the fused backward writes its gradients: (B, NH, T, HS) element strides, unit along HS.
struct GradOut {
  float* p = nullptr;
  int64_t sb = 0, sh = 0, st = 0;
};
GradOut grad_out(Tensor& t) { return {t.data<float>(), t.stride(0), t.stride(1), t.stride(2)}; }

// The fused backward: dq, dk, dv into the given buffers. dout_in: any strides over (B, NH, Tq).
void fused_backward(const FusedSetup& st, const Tensor& out, const Tensor& lse, const Tensor& dout_in, GradOut dq,
                    GradOut dk, GradOut dv) {
  const kernels::AttnGeometry& g = st.g;
  ATTN_CHECK(dout_in.dtype() == DType::f32, kOp, ": expected a f32 gradient, got ", dtype_name(dout_in.dtype()));
  // Any strides over (B, NH, Tq): the gradient of merge_heads(out) arrives as a (B, Tq, NH, HSv) buffer.
  const Tensor dout = unit_last(dout_in);
  const int64_t BH = g.B * g.NH, HSp = kernels::attn_pad(g.HS);
  // Key-block groups per (b, h): enough items for the threads, each group a partial dq.
  const int64_t nkb = kernels::attn_k_blocks(g);
  const int64_t groups =
      std::max<int64_t>(1, std::min<int64_t>(nkb, (2 * get_num_threads() + BH - 1) / std::max<int64_t>(BH, 1)));
  // One group per (b, h), the usual case in training (B·NH items at least twice the threads): each item
  // writes its dq (AttnBwdArgs). Otherwise dq is summed from the groups' partial products afterwards.
  const bool direct = groups == 1;
  Tensor dq_part;
  if (!direct) dq_part = Tensor::empty({BH * groups * g.Tq * HSp});
  kernels::AttnBwdArgs a;
  a.g = g;
  a.m = st.mask_args();
  a.d = st.d;
  a.q = st.q.data<float>(); a.k = st.k.data<float>(); a.v = st.v.data<float>();
  a.dout = dout.data<float>();
  a.do_sb = dout.stride(0); a.do_sh = dout.stride(1); a.do_st = dout.stride(2);
  a.rowmax = lse.data<float>();
  a.logsum = a.rowmax + BH * g.Tq;
  a.out = out.data<float>();
  a.o_sb = out.stride(0); a.o_sh = out.stride(1); a.o_st = out.stride(2);
  a.groups = groups;
  if (direct) {
    a.dq = dq.p; a.dq_sb = dq.sb; a.dq_sh = dq.sh; a.dq_st = dq.st;
  } else {
    a.dq_part = dq_part.data<float>();
  }
  a.dk = dk.p; a.dk_sb = dk.sb; a.dk_sh = dk.sh; a.dk_st = dk.st;
  a.dv = dv.p; a.dv_sb = dv.sb; a.dv_sh = dv.sh; a.dv_st = dv.st;
  detail::record_attention_backward_gemms(BH, g.Tq, g.Tk, g.HS);
  const auto& kern = kernels::attention_kernels();
  run_items(kernels::attention_bwd_items(g, groups), kernels::attention_bwd_scratch(g),
            [&](int64_t it, float* scratch) { kern.bwd(a, it, it + 1, scratch); });
  if (direct) return;
  // dq = scale * sum over groups, in group order.
  const float* pp = dq_part.data<float>();
  parallel_for(0, BH * g.Tq, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t bh = r / g.Tq, i = r % g.Tq;
      float* pq = dq.p + bh / g.NH * dq.sb + bh % g.NH * dq.sh + i * dq.st;
      for (int64_t d = 0; d < g.HS; ++d) {
        float s = 0.f;
        for (int64_t grp = 0; grp < groups; ++grp) s += pp[((bh * groups + grp) * g.Tq + i) * HSp + d];
        pq[d] = s * g.scale;
      }
    }
  });
}

// The fused path's node. Unpacked: inputs q, k, v, three (B, NH, T, HS) gradients. Packed
// (scaled_dot_product_attention_packed): one input, the projection (B, T, 3 C), and one gradient
// buffer (B, T, 3, NH, HS) that is d(qkv) as it is, where three head gradients would be added into a
// zeroed buffer through the select views and copied back through the permute.
struct SdpaFusedNode : autograd::Node {
  FusedSetup st;
  Tensor out, lse;   // lse: (2, B, NH, Tq), row max and log-sum
  bool packed = false;
  const char* name() const override { return "scaled_dot_product_attention"; }

  std::vector<Tensor> backward(const Tensor& dout_in) override {
    const kernels::AttnGeometry& g = st.g;
    if (!packed) {
      Tensor dq = Tensor::empty({g.B, g.NH, g.Tq, g.HS});
      Tensor dk = Tensor::empty({g.B, g.NH, g.Tk, g.HS});
      Tensor dv = Tensor::empty({g.B, g.NH, g.Tk, g.HSv});
      fused_backward(st, out, lse, dout_in, grad_out(dq), grad_out(dk), grad_out(dv));
      return {dq, dk, dv};
    }
    // dout_in: (B, T, C); the kernels read it as its (B, NH, T, HS) view.
    const Tensor dout = dout_in.contiguous().view({g.B, g.Tq, g.NH, g.HSv}).permute({0, 2, 1, 3});
    Tensor d = Tensor::empty({g.B, g.Tq, 3, g.NH, g.HS});
    Tensor t = d.permute({2, 0, 3, 1, 4});
    Tensor dq = t.select(0, 0), dk = t.select(0, 1), dv = t.select(0, 2);
    fused_backward(st, out, lse, dout, grad_out(dq), grad_out(dk), grad_out(dv));
    return {d.view({g.B, g.Tq, 3 * g.NH * g.HS})};
  }
  void release() override {
    st.q = Tensor(); st.k = Tensor(); st.v = Tensor(); st.mask = Tensor();
    out = Tensor(); lse = Tensor();
  }
};

// The fused forward on detached q, k, v: the setup for the backward, the output (its (B, NH, Tq, HSv)
// view of a (B, Tq, NH, HSv) buffer) and the row statistics.
struct FusedForward {
  FusedSetup st;
  Tensor out, lse;
};

// keep_lse: the backward will run (some input needs a gradient); without it the row statistics are
// neither computed nor stored (inference).
FusedForward fused_forward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& mask,
                           double scale, bool causal, int64_t shift, double p, Generator* gen, bool keep_lse) {
  FusedForward f;
  FusedSetup& st = f.st;
  st.q = unit_last(q_in.detach());
  st.k = unit_last(k_in.detach());
  st.v = unit_last(v_in.detach());
  kernels::AttnGeometry& g = st.g;
  g.B = q_in.size(0); g.NH = q_in.size(1); g.Tq = q_in.size(2); g.Tk = k_in.size(2);
  g.HS = q_in.size(3); g.HSv = v_in.size(3);
  g.q_sb = st.q.stride(0); g.q_sh = st.q.stride(1); g.q_st = st.q.stride(2);
  g.k_sb = st.k.stride(0); g.k_sh = st.k.stride(1); g.k_st = st.k.stride(2);
  g.v_sb = st.v.stride(0); g.v_sh = st.v.stride(1); g.v_st = st.v.stride(2);
  g.scale = float(scale);
  g.causal = causal;
  g.shift = shift;
  if (mask.defined()) st.mask = mask.detach().expand({g.B, g.NH, g.Tq, g.Tk});
  if (p > 0) {
    Generator& gr = gen ? *gen : default_generator();
    st.d.on = true;
    st.d.seed = gr.seed();
    st.d.offset = gr.reserve_batch(uint64_t(g.B * g.NH * g.Tq * g.Tk), 4);   // 4 elements a counter
    // philox_uniform = (word >> 8) / 2^24 >= p  <=>  (word >> 8) >= ceil(p * 2^24), as attn::dropout.
    st.d.threshold = uint32_t(std::ceil(p * 16777216.0));
    st.d.scale = p >= 1 ? 0.f : 1.f / float(1.0 - p);
  }
  // The output is stored (B, Tq, NH, HSv) and returned as its (B, NH, Tq, HSv) view, as PyTorch's flash
  // kernel does: merge_heads(out) is then a view, not a copy.
  f.out = Tensor::empty({g.B, g.Tq, g.NH, g.HSv}).permute({0, 2, 1, 3});
  if (keep_lse) f.lse = Tensor::empty({2, g.B, g.NH, g.Tq});   // row max, log-sum (see attention_fused.h)
  kernels::AttnFwdArgs a;
  a.g = g;
  a.m = st.mask_args();
  a.d = st.d;
  a.q = st.q.data<float>(); a.k = st.k.data<float>(); a.v = st.v.data<float>();
  a.out = f.out.data<float>();
  a.o_sb = f.out.stride(0); a.o_sh = f.out.stride(1); a.o_st = f.out.stride(2);
  if (keep_lse) {
    a.rowmax = f.lse.data<float>();
    a.logsum = a.rowmax + g.B * g.NH * g.Tq;
  }
  // Query blocks per work item: up to 4 (each key block is packed once per item), while leaving
  // at least two items per thread for balance.
  // Then evened out within a head: 4 blocks as 2 + 2, not 3 + 1 (the items stay equal).
  const int64_t nqb = kernels::attn_q_blocks(g), qblocks = g.B * g.NH * nqb;
  const int64_t qpi0 = std::clamp<int64_t>(qblocks / (2 * get_num_threads()), 1, 4);
  const int64_t per_head = (nqb + qpi0 - 1) / qpi0, qpi = (nqb + per_head - 1) / per_head;
  a.q_blocks_per_item = qpi;
  const auto& kern = kernels::attention_kernels();
  run_items(kernels::attention_fwd_items(g, qpi), kernels::attention_fwd_scratch(g, qpi),
            [&](int64_t it, float* scratch) { kern.fwd(a, it, it + 1, scratch); });
  return f;
}

// Attaches the fused path's node to `result` (f.out itself, or the packed path's (B, T, C) view of it);
// only for a forward run with keep_lse, i.e. where some input needs a gradient.
void attach_fused(Tensor& result, FusedForward& f, const std::vector<Tensor>& inputs, bool packed) {
  auto n = std::make_shared<SdpaFusedNode>();
  n->st = std::move(f.st);
  n->out = f.out.detach();
  n->lse = f.lse;
  n->packed = packed;
  autograd::attach(result, n, inputs);
}

// The automatic choice for f32 when both paths apply. Measured with
// `attention_bench --crossover` (B = 1, NH = 12, square T, 2 threads) on the 2-core AVX2 EPYC this
// was written on — a machine shared with other builds, so single numbers carry ±30 % noise:
//   HS 32, 64:  fused faster at every T tried, 8 .. 4096: forward naive/fused 1.2-3.2x (T = 197:
//               1.7x, 1024: 2.5x, 4096: 2.4x), forward+backward 1.0-2.6x (T = 1024: 1.95x).
//   HS 128:     naive ahead for small problems (T = 64: forward 0.55 vs 0.60-0.77 ms, its oneDNN GEMMs
//               use the long head dim better than the fused 4x24 micro-kernel), about even at
//               T = 128-256 (0.9-1.1x), fused ahead from T = 512 (1.3x, and O(T) memory).
// Rule: naive when HS > 96 and Tq * Tk <= 128 * 128 (its score matrix is small there anyway);
// fused otherwise.
bool prefer_fused(int64_t Tq, int64_t Tk, int64_t HS) { return !(HS > 96 && Tq * Tk <= 128 * 128); }

// In training (a gradient wanted) with a score matrix of at most kTrainScoresMax elements, the naive path
// where it is the faster: under bf16 autocast, whose GEMMs then run in bf16 (the fused kernel is f32),
// and with dropout on the weights, which the naive path draws as one vectorised mask. Forward + backward
// on the Zen 4 host (2 threads, 2026-12-04), fused against naive: B 32, 4 heads, T 128, HS 64, dropout
// 0.1: 23.5 against 16.2 ms in f32, 13.0 ms naive under autocast; B 128, 3 heads, T 50, HS 64, no
// dropout: 9.8 ms fused against 7.4 ms naive under autocast (naive f32: 9.2 ms).
constexpr int64_t kTrainScoresMax = int64_t(1) << 24;

bool naive_for_training(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& opts) {
  if (!autograd::needs_grad({q, k, v}) || q.size(0) * q.size(1) * q.size(2) * k.size(2) > kTrainScoresMax) return false;
  return opts.dropout_p > 0.0 || (autocast_bf16() && bf16_gemm_mode() == Bf16Gemm::native);
}

// What both entry points decide alike: the scale, the causal shift and fused or naive.
struct Plan {
  double scale = 1.0;
  int64_t shift = 0;
  bool fused = false;
};

Plan plan(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const SdpaOptions& opts) {
  const int64_t Tq = q.size(2), Tk = k.size(2), HS = q.size(3);
  Plan p;
  p.scale = std::isnan(opts.scale) ? 1.0 / std::sqrt(double(HS)) : opts.scale;
  p.shift = opts.causal && opts.causal_align == CausalAlign::bottom_right ? Tk - Tq : 0;
  const bool mask_grad = mask.defined() && mask.dtype() != DType::u8 && autograd::needs_grad({mask});
  switch (opts.impl) {
    case SdpaImpl::naive: p.fused = false; break;
    case SdpaImpl::fused:   // unless need_weights, which forces naive
      p.fused = !opts.need_weights;
      ATTN_CHECK(!p.fused || q.dtype() == DType::f32, kOp, ": the fused kernel is f32 only, got ",
                 dtype_name(q.dtype()), " (use SdpaImpl::naive)");
      ATTN_CHECK(!p.fused || !mask_grad, kOp, ": the fused kernel does not differentiate the additive mask "
                 "(detach it or use SdpaImpl::naive)");
      break;
    default:
      p.fused = q.dtype() == DType::f32 && !opts.need_weights && !mask_grad && prefer_fused(Tq, Tk, HS) &&
                !naive_for_training(q, k, v, opts);
  }
  return p;
}

}  // namespace

SdpaResult scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                        const SdpaOptions& opts) {
  ATTN_PROFILE("attention");
  validate(q, k, v, mask, opts);
  const Plan p = plan(q, k, v, mask, opts);
  if (p.fused) {
    detail::record_attention_gemms(q.size(0) * q.size(1), q.size(2), k.size(2), q.size(3));
    const bool grad = autograd::needs_grad({q, k, v});
    FusedForward f = fused_forward(q, k, v, mask, p.scale, opts.causal, p.shift, opts.dropout_p, opts.generator, grad);
    Tensor out = f.out;
    if (grad) attach_fused(out, f, {q, k, v}, /*packed=*/false);
    return {out, Tensor()};
  }
  reference::SdpaNaiveConfig c;
  c.scale = p.scale;
  c.causal = opts.causal;
  c.shift = p.shift;
  c.dropout_p = opts.dropout_p;
  c.generator = opts.generator;
  c.need_weights = opts.need_weights;
  return reference::sdpa_naive(q, k, v, mask, c);
}

namespace {

// Scores of the bf16 attention held at once: up to 2^24 (64 MiB of f32) a call.
constexpr int64_t kBf16ScoresMax = int64_t(1) << 24;

// The bf16 attention of a packed bf16 qkv (B, T, 3 C) -> (B, T, C) bf16 on oneDNN: the heads copied out
// into (B NH, T, HS) blocks, S = scale · Q Kᵀ (bf16 batched matmul, f32 scores), P = softmax(S) rounded to
// bf16, O = P V (bf16 matmul), the heads merged back. What a bf16 model's Linears around it read.
Tensor attention_bf16_onednn(const Tensor& x, int64_t NH, double scale) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2) / 3, HS = C / NH, BH = B * NH;
  const auto* px = static_cast<const uint16_t*>(x.raw_data());
  // q, k, v head by head, each (B NH, T, HS) contiguous: the layouts oneDNN's brgemm matmul takes.
  Tensor heads = Tensor::empty({3, BH, T, HS}, DType::bf16);
  auto* ph = static_cast<uint16_t*>(heads.raw_data());
  parallel_for(0, B * T, std::max<int64_t>(1, 65536 / (3 * C)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / T, t = r % T;
      for (int64_t w = 0; w < 3; ++w)
        for (int64_t h = 0; h < NH; ++h)
          std::memcpy(ph + ((w * BH + b * NH + h) * T + t) * HS, px + r * 3 * C + w * C + h * HS,
                      size_t(HS) * sizeof(uint16_t));
    }
  });
  Tensor scores = Tensor::empty({BH, T, T});
  Tensor probs = Tensor::empty({BH, T, T}, DType::bf16);
  Tensor o = Tensor::empty({BH, T, HS}, DType::bf16);
  const int64_t hsz = BH * T * HS;
  const kernels::Strided4 q{{1, BH, T, HS}, {hsz, T * HS, HS, 1}}, kt{{1, BH, HS, T}, {hsz, T * HS, 1, HS}},
      s{{1, BH, T, T}, {BH * T * T, T * T, T, 1}};
  kernels::gemm_onednn_bf16_4d(ph, q, ph + hsz, kt, scores.raw_data(), s, DType::f32, float(scale));
  float* ps = scores.data<float>();
  auto* pp = static_cast<uint16_t*>(probs.raw_data());
  const auto& rk = kernels::row_kernels();
  const auto& ck = kernels::convert_kernels();
  parallel_for(0, BH * T, std::max<int64_t>(1, 16384 / T), [&](int64_t r0, int64_t r1) {
    rk.softmax_fwd(ps + r0 * T, ps + r0 * T, r1 - r0, T, /*log=*/false);
    ck.f32_to_bf16(ps + r0 * T, pp + r0 * T, (r1 - r0) * T);
  });
  kernels::gemm_onednn_bf16_4d(pp, s, ph + 2 * hsz, q, o.raw_data(), q, DType::bf16, 1.f);
  // Heads merged: (B, NH, T, HS) -> (B, T, C).
  Tensor out = Tensor::empty({B, T, C}, DType::bf16);
  auto* po = static_cast<uint16_t*>(out.raw_data());
  const auto* pso = static_cast<const uint16_t*>(o.raw_data());
  parallel_for(0, B * T, std::max<int64_t>(1, 65536 / C), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / T, t = r % T;
      for (int64_t h = 0; h < NH; ++h)
        std::memcpy(po + r * C + h * HS, pso + ((b * NH + h) * T + t) * HS, size_t(HS) * sizeof(uint16_t));
    }
  });
  return out;
}

// The same numbers through attn's own kernel (backend/cpu/attention_bf16.h): the heads read in place,
// K and V packed once per head, scores, softmax and P V a tile of rows at a time in cache.
Tensor attention_bf16_kernel(const Tensor& x, int64_t NH, double scale) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2) / 3;
  Tensor out = Tensor::empty({B, T, C}, DType::bf16);
  kernels::attention_bf16_run(kernels::attention_bf16_packed_args(static_cast<const uint16_t*>(x.raw_data()),
                                                                  static_cast<uint16_t*>(out.raw_data()), B, NH, T,
                                                                  C / NH, float(scale)));
  return out;
}

Tensor attention_bf16_packed(const Tensor& qkv, int64_t NH, double scale) {
  const int64_t B = qkv.size(0), T = qkv.size(1), HS = qkv.size(2) / (3 * NH);
  const Tensor x = qkv.contiguous();
  detail::record_attention_gemms(B * NH, T, T, HS, DType::bf16);
  if (kernels::attention_bf16_kernel_available() && kernels::attention_bf16_shape_ok(T, HS))
    return attention_bf16_kernel(x, NH, scale);
  return attention_bf16_onednn(x, NH, scale);
}

}  // namespace

Tensor scaled_dot_product_attention_packed(const Tensor& qkv, int64_t num_heads, const Tensor& mask,
                                           const SdpaOptions& opts) {
  ATTN_PROFILE("attention");
  if (qkv.defined() && qkv.dtype() == DType::bf16) {
    // A bf16 qkv (linear_bf16_out of a bf16 model): the bf16 attention where it applies, else the f32 path.
    ATTN_CHECK(qkv.dim() == 3 && num_heads > 0 && qkv.size(2) % (3 * num_heads) == 0, kOp, "_packed: expected "
               "qkv of shape (B, T, 3 x num_heads (", num_heads, ") x a head size), got ", qkv.shape());
    const int64_t B = qkv.size(0), T = qkv.size(1), HS = qkv.size(2) / (3 * num_heads);
    const bool plain = !mask.defined() && !opts.causal && opts.dropout_p == 0.0 && !opts.need_weights &&
                       !autograd::needs_grad({qkv}) && B * num_heads * T * T <= kBf16ScoresMax &&
                       kernels::gemm_onednn_bf16_native();
    if (plain) return attention_bf16_packed(qkv, num_heads, std::isnan(opts.scale) ? 1.0 / std::sqrt(double(HS))
                                                                                    : opts.scale);
    return scaled_dot_product_attention_packed(qkv.to(DType::f32), num_heads, mask, opts);
  }
  ATTN_CHECK(qkv.defined() && qkv.dim() == 3, kOp, "_packed: expected qkv of shape (B, T, 3 C), got ",
             qkv.defined() ? qkv.shape() : Shape{});
  ATTN_CHECK(num_heads > 0 && qkv.size(2) % (3 * num_heads) == 0, kOp, "_packed: the last dim of qkv ",
             qkv.shape(), " is not 3 x num_heads (", num_heads, ") x a head size");
  ATTN_CHECK(!opts.need_weights, kOp, "_packed: need_weights is not supported; use scaled_dot_product_attention");
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, HS = C / num_heads;
  const Tensor t = qkv.reshape({B, T, 3, num_heads, HS}).permute({2, 0, 3, 1, 4});
  const Tensor q = t.select(0, 0), k = t.select(0, 1), v = t.select(0, 2);
  validate(q, k, v, mask, opts);
  const Plan p = plan(q, k, v, mask, opts);
  if (!p.fused)   // through the views: the same values and gradients, by the unpacked path
    return scaled_dot_product_attention(q, k, v, mask, opts).out.transpose(1, 2).reshape({B, T, C});
  const bool grad = autograd::needs_grad({qkv});
  detail::record_attention_gemms(B * num_heads, T, T, HS);
  FusedForward f = fused_forward(q, k, v, mask, p.scale, opts.causal, p.shift, opts.dropout_p, opts.generator, grad);
  Tensor out = f.out.transpose(1, 2).view({B, T, C});   // the (B, T, NH, HS) buffer
  if (grad) attach_fused(out, f, {qkv}, /*packed=*/true);
  return out;
}

}  // namespace attn

namespace attn {

namespace {

// cu_seqlens: S + 1 non-decreasing offsets from 0 to n.
void check_cu_seqlens(const std::vector<int64_t>& cu, int64_t n) {
  ATTN_CHECK(!cu.empty() && cu.front() == 0 && cu.back() == n, kOp, "_varlen: expected cu_seqlens from 0 to the ",
             n, " rows of qkv, got ", cu.size(), " offsets from ", cu.empty() ? -1 : cu.front(), " to ",
             cu.empty() ? -1 : cu.back());
  for (size_t s = 1; s < cu.size(); ++s)
    ATTN_CHECK(cu[s] >= cu[s - 1], kOp, "_varlen: expected non-decreasing cu_seqlens, got ", cu[s - 1], " then ",
               cu[s], " at offset ", s);
}

// The fused kernel's arguments for sequence [r0, r1) of the packed qkv (rows of 3 C, unit stride
// within a row) and out (N, C): one batch of T = r1 - r0 tokens, q / k / v / out at their column offsets.
kernels::AttnFwdArgs varlen_args(const float* qkv, int64_t row, float* out, int64_t r0, int64_t r1, int64_t NH,
                                 int64_t HS, float scale, bool causal) {
  const int64_t T = r1 - r0, C = NH * HS;
  kernels::AttnFwdArgs a;
  kernels::AttnGeometry& g = a.g;
  g.B = 1; g.NH = NH; g.Tq = T; g.Tk = T; g.HS = HS; g.HSv = HS;
  g.q_sb = g.k_sb = g.v_sb = T * row;
  g.q_sh = g.k_sh = g.v_sh = HS;
  g.q_st = g.k_st = g.v_st = row;
  g.scale = scale;
  g.causal = causal;
  a.q = qkv + r0 * row;
  a.k = a.q + C;
  a.v = a.q + 2 * C;
  a.out = out + r0 * C;
  a.o_sb = T * C; a.o_sh = HS; a.o_st = C;
  return a;
}

}  // namespace

Tensor scaled_dot_product_attention_varlen(const Tensor& qkv_in, const std::vector<int64_t>& cu, int64_t num_heads,
                                           const SdpaOptions& opts) {
  ATTN_PROFILE("attention");
  ATTN_CHECK(qkv_in.defined() && qkv_in.dim() == 2, kOp, "_varlen: expected qkv of shape (N, 3 C), got ",
             qkv_in.defined() ? qkv_in.shape() : Shape{});
  ATTN_CHECK(qkv_in.dtype() == DType::f32 || qkv_in.dtype() == DType::f64, kOp,
             "_varlen: expected f32 or f64 qkv, got ", dtype_name(qkv_in.dtype()));
  ATTN_CHECK(num_heads > 0 && qkv_in.size(1) % (3 * num_heads) == 0, kOp, "_varlen: the last dim of qkv ",
             qkv_in.shape(), " is not 3 x num_heads (", num_heads, ") x a head size");
  ATTN_CHECK(!opts.need_weights && opts.dropout_p == 0.0, kOp, "_varlen: expected no dropout and no weights (an "
             "inference op), got dropout_p ", opts.dropout_p, opts.need_weights ? " and need_weights" : "");
  ATTN_CHECK(!autograd::needs_grad({qkv_in}), kOp, "_varlen: has no backward, but qkv requires grad (run it under "
             "NoGradGuard, or use scaled_dot_product_attention_packed on padded sequences)");
  const int64_t N = qkv_in.size(0), C = qkv_in.size(1) / 3, HS = C / num_heads;
  check_cu_seqlens(cu, N);
  const double scale = std::isnan(opts.scale) ? 1.0 / std::sqrt(double(HS)) : opts.scale;
  if (qkv_in.dtype() == DType::f64) {   // the naive path, sequence by sequence
    Tensor out = Tensor::zeros({N, C}, DType::f64);
    SdpaOptions o = opts;
    o.impl = SdpaImpl::naive;
    o.causal_align = CausalAlign::top_left;
    for (size_t s = 0; s + 1 < cu.size(); ++s)
      if (cu[s + 1] > cu[s])
        out.slice(0, cu[s], cu[s + 1])
            .copy_(scaled_dot_product_attention_packed(qkv_in.slice(0, cu[s], cu[s + 1]).unsqueeze(0), num_heads,
                                                       Tensor(), o)
                       .squeeze(0));
    return out;
  }
  const Tensor qkv = qkv_in.stride(1) == 1 ? qkv_in.detach() : qkv_in.detach().contiguous();
  Tensor out = Tensor::empty({N, C});
  // One item list over all sequences: sequence s owns items [first[s], first[s + 1]).
  const int64_t S = int64_t(cu.size()) - 1;
  std::vector<kernels::AttnFwdArgs> args(size_t(std::max<int64_t>(S, 0)));
  std::vector<int64_t> first(size_t(S + 1), 0);
  int64_t qblocks = 0;
  for (int64_t s = 0; s < S; ++s) qblocks += num_heads * ((cu[s + 1] - cu[s] + kernels::kAttnBQ - 1) / kernels::kAttnBQ);
  const int64_t qpi = std::clamp<int64_t>(qblocks / (2 * get_num_threads()), 1, 4);
  for (int64_t s = 0; s < S; ++s) {
    detail::record_attention_gemms(num_heads, cu[s + 1] - cu[s], cu[s + 1] - cu[s], HS);
    args[size_t(s)] = varlen_args(qkv.data<float>(), qkv.stride(0), out.data<float>(), cu[s], cu[s + 1], num_heads,
                                  HS, float(scale), opts.causal);
    args[size_t(s)].q_blocks_per_item = qpi;
    first[size_t(s + 1)] = first[size_t(s)] + kernels::attention_fwd_items(args[size_t(s)].g, qpi);
  }
  kernels::AttnGeometry g0;
  g0.HS = g0.HSv = HS;
  const auto& kern = kernels::attention_kernels();
  run_items(first.back(), kernels::attention_fwd_scratch(g0, qpi), [&](int64_t it, float* scratch) {
    const size_t s = size_t(std::upper_bound(first.begin(), first.end(), it) - first.begin()) - 1;
    kern.fwd(args[s], it - first[s], it - first[s] + 1, scratch);
  });
  return out;
}

}  // namespace attn

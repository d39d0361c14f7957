// Internal: the fused (memory-efficient) attention kernels, f32, one implementation per ISA
// (isa/attention_fused.cpp compiled once per ISA from attention_fused_kernels.h), and the
// table that picks one from attn::active_isa(). Called by src/ops/attention.cpp, which validates,
// allocates, splits work items across threads and owns the autograd node.
//
//   const auto& k = attn::kernels::attention_kernels();      // the active ISA's kernels
//   a.q_blocks_per_item = 4;
//   parallel_for(0, attention_fwd_items(a.g, 4), 1, [&](int64_t i0, int64_t i1) {
//     k.fwd(a, i0, i1, scratch);                              // scratch: attention_fwd_scratch(a.g, 4) floats
//   });
//
// Forward work item = (b*NH + h, q_blocks_per_item query blocks of kAttnBQ rows); the key blocks
// (kAttnBK keys) are walked in order with an online softmax per row, so nothing of size Tq × Tk is
// ever stored. Each key block is packed once per item and used by all of the item's query blocks
// (packing it once per query block cost about a fifth of the forward at HS 64). Backward
// work item = (b*NH + h, group g of key blocks): dk, dv of those keys are complete in the item;
// its dq contribution goes to dq_part[bh][g], summed over g in order afterwards — deterministic.
// Everything here is plain data (no inline functions with external linkage) so the ISA
// translation units, compiled with different flags, share nothing at link time.
#pragma once
#include <cstdint>

#include "attn/core/isa.h"

namespace attn {
// As in attn/core/rng.h (declared here so the ISA units need not include tensor.h).
void philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4]);
}  // namespace attn

namespace attn::kernels {

constexpr int64_t kAttnBQ = 64;   // query rows per tile
constexpr int64_t kAttnBK = 64;   // keys per tile
constexpr int64_t kAttnPad = 16;  // head sizes are padded to a multiple of this in scratch (max lanes)

struct AttnGeometry {
  int64_t B = 0, NH = 0, Tq = 0, Tk = 0, HS = 0, HSv = 0;
  // Element strides of q, k, v over (B, NH, T); the last dim has unit stride.
  int64_t q_sb = 0, q_sh = 0, q_st = 0, k_sb = 0, k_sh = 0, k_st = 0, v_sb = 0, v_sh = 0, v_st = 0;
  float scale = 1.f;
  bool causal = false;
  int64_t shift = 0;   // with causal: key j is visible to query i iff j <= i + shift
};

// At most one of b / f is set. Strides over (B, NH, Tq, Tk), 0 on broadcast dims.
struct AttnMask {
  const uint8_t* b = nullptr;   // nonzero = may not attend
  const float* f = nullptr;     // added to the scaled scores
  int64_t sb = 0, sh = 0, si = 0, sj = 0;
};

// Element e = ((b*NH + h)*Tq + i)*Tk + j is kept iff (word e % 4 of philox4x32(seed, offset + e/4)) >> 8
// >= threshold, i.e. philox_uniform(seed, offset, e) >= p; kept weights are multiplied by `scale`.
struct AttnDropout {
  bool on = false;
  uint64_t seed = 0, offset = 0;
  uint32_t threshold = 0;
  float scale = 1.f;
};

struct AttnFwdArgs {
  AttnGeometry g;
  AttnMask m;
  AttnDropout d;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;   // (B, NH, Tq, HSv), element strides o_sb, o_sh, o_st; unit along HSv
  int64_t o_sb = 0, o_sh = 0, o_st = 0;
  // Per row of the masked, scaled scores: the max and log(sum(exp(s - max))), the log-sum-exp
  // kept in two parts so the backward's exp((s - max) - logsum) is as exact as the forward's.
  // A row with every key masked gets max = +inf, logsum = 0 (all its weights are then 0).
  // Both null: not needed (no backward will run), not computed.
  float* rowmax = nullptr;   // (B, NH, Tq)
  float* logsum = nullptr;   // (B, NH, Tq)
  int64_t q_blocks_per_item = 1;   // query blocks of kAttnBQ rows per work item (>= 1)
};

struct AttnBwdArgs {
  AttnGeometry g;
  AttnMask m;
  AttnDropout d;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const float* dout = nullptr;    // (B, NH, Tq, HSv), element strides do_sb, do_sh, do_st; unit along HSv
  int64_t do_sb = 0, do_sh = 0, do_st = 0;
  const float* rowmax = nullptr;  // (B, NH, Tq), from the forward pass
  const float* logsum = nullptr;  // (B, NH, Tq), from the forward pass
  // The forward's output: each item computes its rows' delta_i = rowsum(dout_i ∘ out_i) from it.
  const float* out = nullptr;     // (B, NH, Tq, HSv), element strides o_sb, o_sh, o_st; unit along HSv
  int64_t o_sb = 0, o_sh = 0, o_st = 0;
  int64_t groups = 1;             // key-block groups per (b, h)
  // dq: with one group per (b, h) the item writes dq = scale · dS·K itself (dq set, dq_part null);
  // with several, each group's unscaled dS·K goes to dq_part, summed over the groups afterwards.
  float* dq = nullptr;            // (B, NH, Tq, HS), element strides dq_sb, dq_sh, dq_st; unit along HS
  int64_t dq_sb = 0, dq_sh = 0, dq_st = 0;
  float* dq_part = nullptr;       // (B*NH, groups, Tq, pad(HS)): unscaled dS·K per group
  float* dk = nullptr;            // (B, NH, Tk, HS), element strides dk_sb, dk_sh, dk_st; unit along HS
  float* dv = nullptr;            // (B, NH, Tk, HSv), element strides dv_sb, dv_sh, dv_st; unit along HSv
  int64_t dk_sb = 0, dk_sh = 0, dk_st = 0, dv_sb = 0, dv_sh = 0, dv_st = 0;
};

#define ATTN_ATTENTION_KERNEL_DECLS                                                        \
  void attention_fwd(const AttnFwdArgs& a, int64_t item0, int64_t item1, float* scratch); \
  void attention_bwd(const AttnBwdArgs& a, int64_t item0, int64_t item1, float* scratch);

namespace scalar { ATTN_ATTENTION_KERNEL_DECLS }
namespace avx2 { ATTN_ATTENTION_KERNEL_DECLS }
namespace avx512 { ATTN_ATTENTION_KERNEL_DECLS }
#undef ATTN_ATTENTION_KERNEL_DECLS

namespace {

inline int64_t attn_pad(int64_t n) { return (n + kAttnPad - 1) / kAttnPad * kAttnPad; }
inline int64_t attn_q_blocks(const AttnGeometry& g) { return (g.Tq + kAttnBQ - 1) / kAttnBQ; }
inline int64_t attn_k_blocks(const AttnGeometry& g) { return (g.Tk + kAttnBK - 1) / kAttnBK; }
// Work items of one (b, h): its query blocks in runs of qpi.
inline int64_t attn_fwd_head_items(const AttnGeometry& g, int64_t qpi) { return (attn_q_blocks(g) + qpi - 1) / qpi; }
inline int64_t attention_fwd_items(const AttnGeometry& g, int64_t qpi) {
  return g.B * g.NH * attn_fwd_head_items(g, qpi);
}
inline int64_t attention_bwd_items(const AttnGeometry& g, int64_t groups) { return g.B * g.NH * groups; }

// Scratch floats one thread needs for a run of items (the ISA units carve it the same way).
inline int64_t attention_fwd_scratch(const AttnGeometry& g, int64_t qpi) {
  // Per row: Qs, acc, the max and a vector (<= kAttnPad lanes) of partial sums; then Kᵀ, V and S tiles.
  const int64_t HSp = attn_pad(g.HS), HSvp = attn_pad(g.HSv), rows = qpi * kAttnBQ;
  return rows * HSp + rows * HSvp + rows * (1 + kAttnPad) + HSp * kAttnBK + kAttnBK * HSvp + kAttnBQ * kAttnBK;
}
inline int64_t attention_bwd_scratch(const AttnGeometry& g) {
  const int64_t HSp = attn_pad(g.HS), HSvp = attn_pad(g.HSv);
  return kAttnBQ * HSp + kAttnBQ * HSvp + HSp * kAttnBK + kAttnBK * HSp + HSvp * kAttnBK +
         2 * kAttnBQ * kAttnBK + kAttnBK * HSp + kAttnBK * HSvp + g.Tq * HSp + g.Tq;   // + dq rows, delta
}

struct AttentionKernels {
  decltype(&scalar::attention_fwd) fwd;
  decltype(&scalar::attention_bwd) bwd;
};

#ifndef ATTN_KERNEL_TU
inline const AttentionKernels& attention_kernels(Isa isa) {
  static const AttentionKernels tables[3] = {{scalar::attention_fwd, scalar::attention_bwd},
                                             {avx2::attention_fwd, avx2::attention_bwd},
                                             {avx512::attention_fwd, avx512::attention_bwd}};
  return tables[int(isa)];
}
inline const AttentionKernels& attention_kernels() { return attention_kernels(detail::dispatch_isa()); }
#endif

}  // namespace
}  // namespace attn::kernels

// Internal: the bf16 attention kernel of inference on CPUs with AVX512-BF16 (isa/attention_bf16.cpp;
// only its avx512 object defines the functions, and only there are they called: see
// attention_bf16_kernel_available()). Called by src/ops/attention.cpp and src/ops/window_attention.cpp,
// which validate, allocate and split the work across threads:
//
//   AttnBf16Args a = ...;                                        // q, k, v, out, scale, biases
//   attention_bf16_run(a);   // parallel_for over attention_bf16_items(a): avx512::attention_bf16_fwd
//
// What it computes, per (b, h) and query row i: s = scale · q_i Kᵀ (bf16 products, f32 sums) plus the
// f32 biases, m = max(s), e = exp(s - m) rounded to bf16, out_i = (e V) / sum(e) (f32 sums, the f32 sum
// of the unrounded exps) rounded to bf16: a bf16 attention (bf16 operands of both products, f32
// softmax statistics) with the normalization applied to the output, as flash attention does, in one
// pass. Work items: (b, h, kAttnBf16Rows query rows; every row where T <= 64). A thread packs K of each
// (b, h) its items reach into (HS/2, Tp, 2) pairs and V into (Te/2, HS, 2) pairs (Tp = T rounded up to
// 16, Te to 2; zeros beyond T), the operand layouts of VDPBF16PS, once (a head split between two
// threads is packed by both); then kAttnBf16Tile rows at a time: their scores across every key (rows
// of at most kAttnBf16MaxT keys; the biases and the row max taken as they are stored), the exps, and
// P V, without leaving L1/L2.
#pragma once
#include <cstdint>

namespace attn::kernels {

constexpr int64_t kAttnBf16Rows = 24;     // query rows per work item (T > 64)
constexpr int64_t kAttnBf16Tile = 6;      // query rows per register tile
constexpr int64_t kAttnBf16MaxT = 4096;   // keys per row at most (the scores of a tile stay in L2)

struct AttnBf16Args {
  int64_t B = 0, NH = 0, T = 0, HS = 0;   // HS a multiple of 16
  // q, k, v: bf16, element strides over (B, NH, T); unit along HS (heads read in place from qkv).
  const uint16_t* q = nullptr;
  const uint16_t* k = nullptr;
  const uint16_t* v = nullptr;
  int64_t q_sb = 0, q_sh = 0, q_st = 0, k_sb = 0, k_sh = 0, k_st = 0, v_sb = 0, v_sh = 0, v_st = 0;
  uint16_t* out = nullptr;                // bf16, element strides over (B, NH, T); unit along HS
  int64_t o_sb = 0, o_sh = 0, o_st = 0;
  float scale = 1.f;
  // Up to two f32 terms added to the scaled scores (a relative position bias, a shift mask, a padding
  // mask): element strides over (b % bmod or b, h, query row); unit along the keys. Null: none.
  const float* bias[2] = {nullptr, nullptr};
  int64_t bias_sb[2] = {0, 0}, bias_sh[2] = {0, 0}, bias_si[2] = {0, 0}, bias_bmod[2] = {0, 0};
};

// The arguments for a packed projection qkv (B, T, 3 NH HS) -> out (B, T, NH HS), heads merged, both
// contiguous bf16; no biases.
inline AttnBf16Args attention_bf16_packed_args(const uint16_t* qkv, uint16_t* out, int64_t B, int64_t NH, int64_t T,
                                               int64_t HS, float scale) {
  const int64_t C = NH * HS;
  AttnBf16Args a;
  a.B = B, a.NH = NH, a.T = T, a.HS = HS;
  a.q = qkv, a.k = qkv + C, a.v = qkv + 2 * C;
  a.q_sb = a.k_sb = a.v_sb = T * 3 * C;
  a.q_sh = a.k_sh = a.v_sh = HS;
  a.q_st = a.k_st = a.v_st = 3 * C;
  a.out = out;
  a.o_sb = T * C, a.o_sh = HS, a.o_st = C;
  a.scale = scale;
  return a;
}

inline int64_t attn_bf16_tp(const AttnBf16Args& a) { return (a.T + 15) / 16 * 16; }
inline int64_t attn_bf16_te(const AttnBf16Args& a) { return (a.T + 1) / 2 * 2; }
// Packed K then packed V of one (b, h), in elements.
inline int64_t attn_bf16_head_elems(const AttnBf16Args& a) { return a.HS * (attn_bf16_tp(a) + attn_bf16_te(a)); }
// Query rows per work item: a short sequence (a Swin window) whole, one packing of K and V per item.
inline int64_t attn_bf16_rows(const AttnBf16Args& a) { return a.T <= 64 ? a.T : kAttnBf16Rows; }
inline int64_t attn_bf16_head_items(const AttnBf16Args& a) { return (a.T + attn_bf16_rows(a) - 1) / attn_bf16_rows(a); }
inline int64_t attention_bf16_items(const AttnBf16Args& a) { return a.B * a.NH * attn_bf16_head_items(a); }
inline bool attention_bf16_shape_ok(int64_t T, int64_t HS) {
  return T >= 1 && T <= kAttnBf16MaxT && HS >= 16 && HS % 16 == 0;
}

namespace avx512 {
void attention_bf16_fwd(const AttnBf16Args& a, int64_t item0, int64_t item1);
}  // namespace avx512

}  // namespace attn::kernels

#ifndef ATTN_KERNEL_TU
#include "attn/core/isa.h"
#include "attn/core/parallel.h"
namespace attn::kernels {
// Where the kernel runs: AVX512-BF16 and the avx512 kernels active (ATTN_ISA=avx2 turns it off). On AMX
// CPUs oneDNN's tile matmuls are the better attention GEMMs, so there the callers keep oneDNN's.
inline bool attention_bf16_kernel_available() {
  static const bool cpu = kernel_path_available(KernelPath::avx512_bf16) && !kernel_path_available(KernelPath::amx);
  return cpu && active_isa() == Isa::avx512;
}
// One parallel region over the work items.
inline void attention_bf16_run(const AttnBf16Args& a) {
  detail::note_kernel_path(KernelPath::avx512_bf16);
  parallel_for(0, attention_bf16_items(a), 1, [&](int64_t i0, int64_t i1) { avx512::attention_bf16_fwd(a, i0, i1); });
}
}  // namespace attn::kernels
#endif

// Internal: the fused window-attention kernels (Swin V1 / V2), f32, one implementation per ISA
// (isa/window_attention.cpp compiled once per ISA from window_attention_kernels.h), and the table
// that picks one from attn::active_isa(). Called by src/ops/window_attention.cpp, which validates,
// allocates, splits the work items across threads and owns the autograd node.
//
//   const auto& k = attn::kernels::window_attention_kernels();
//   run_items(a.g.Bw * a.g.NH, window_attention_fwd_scratch(a.g), [&](int64_t it, float* s) { k.fwd(a, it, s); });
//
// Work item = (window w, head h), w in [0, Bw), the windows of a whole block in one pass. The window's
// tokens are short (N = 49 for 7 x 7, 64 for 8 x 8): all of its N x N scores fit in one tile, so
// there is no online softmax; per item
//   S = Q Kᵀ (GEMM on unscaled q, k read in place from the packed projection, Kᵀ packed),
//   s_ij = s_ij · r_i · c_j + bias[h, i, j] + mask[w mod nW, i, j]        (one pass per row)
//     V1: r_i = scale, c_j = 1;  V2 (cosine): r_i = ls_h / max(|q_i|, eps), c_j = 1 / max(|k_j|, eps)
//   P = softmax rows (exp2 polynomial), O = P V / rowsum, written into the (Bw, N, C) output at the head's columns.
// The probabilities are stored when asked for (the backward's input, and the maps `attn explain` shows).
// Backward item = (w, h), from the stored P:
//   dP = dO Vᵀ, dS = P ∘ (dP - rowsum(P ∘ dP)), dV = Pᵀ dO,
//   V1: dQ = scale dS K, dK = scale dSᵀ Q;
//   V2: gq = dS k̂, gk = dSᵀ q̂, d ls_h += Σ q̂_i · gq_i, dq = (ls gq - q̂ (q̂ · ls gq)) / max(|q|, eps) (k alike);
//   dS itself is stored per (w, h) when the bias needs a gradient (summed over the windows by the op).
// Plain data only (the ISA units, compiled with different flags, share nothing at link time).
#pragma once
#include <cstdint>

#include "attn/core/isa.h"

namespace attn::kernels {

constexpr float kWinNormEps = 1e-12f;   // F.normalize's eps

struct WinAttnGeometry {
  int64_t Bw = 0, nW = 1, NH = 0, N = 0, HS = 0;   // windows, mask period, heads, tokens, head size
  // The packed projection (Bw, N, 3 C): q at column h HS, k at C + h HS, v at 2 C + h HS; unit stride
  // along the columns, element strides qkv_sw (window) and qkv_st (token).
  const float* qkv = nullptr;
  int64_t qkv_sw = 0, qkv_st = 0;
  const float* bias = nullptr;          // (NH, N, N) contiguous, or null
  const float* mask = nullptr;          // (nW, N, N) contiguous, or null: window w uses mask[w mod nW]
  float scale = 1.f;                    // V1
  const float* logit_scale = nullptr;   // V2: (NH) exp(min(logit_scale, log 100)); null for V1
};

struct WinAttnFwdArgs {
  WinAttnGeometry g;
  float* out = nullptr;     // (Bw, N, C) contiguous
  float* probs = nullptr;   // (Bw, NH, N, N) contiguous, or null
};

struct WinAttnBwdArgs {
  WinAttnGeometry g;
  const float* probs = nullptr;   // (Bw, NH, N, N) from the forward
  const float* dout = nullptr;    // (Bw, N, C) contiguous
  float* dqkv = nullptr;          // (Bw, N, 3 C) contiguous, every element written
  float* dscores = nullptr;       // (Bw, NH, N, N) dS, or null (the bias needs no gradient)
  float* dls = nullptr;           // V2: (Bw, NH) d loss / d ls_h of each window
};

#define ATTN_WINDOW_ATTENTION_KERNEL_DECLS                                      \
  void window_attention_fwd(const WinAttnFwdArgs& a, int64_t item, float* scratch); \
  void window_attention_bwd(const WinAttnBwdArgs& a, int64_t item, float* scratch);

namespace scalar { ATTN_WINDOW_ATTENTION_KERNEL_DECLS }
namespace avx2 { ATTN_WINDOW_ATTENTION_KERNEL_DECLS }
namespace avx512 { ATTN_WINDOW_ATTENTION_KERNEL_DECLS }
#undef ATTN_WINDOW_ATTENTION_KERNEL_DECLS

namespace {

// Padding of token and head dims in scratch: a multiple of 16 (the widest ISA's lanes).
inline int64_t win_pad(int64_t n) { return (n + 15) / 16 * 16; }
// Scratch floats per thread (the ISA units carve it the same way).
inline int64_t window_attention_fwd_scratch(const WinAttnGeometry& g) {
  const int64_t Np = win_pad(g.N), HSp = win_pad(g.HS);
  return g.N * Np + HSp * Np + 2 * g.N * HSp + 3 * Np;   // S, Kᵀ, V, O; row, column factors, 1 / sums
}
inline int64_t window_attention_bwd_scratch(const WinAttnGeometry& g) {
  const int64_t Np = win_pad(g.N), HSp = win_pad(g.HS);
  return g.N * Np + HSp * Np + 7 * g.N * HSp + 2 * Np;   // dP, Vᵀ, dO, Q, K, gq, gk, gv, spare; norms
}

struct WindowAttentionKernels {
  decltype(&scalar::window_attention_fwd) fwd;
  decltype(&scalar::window_attention_bwd) bwd;
};

#ifndef ATTN_KERNEL_TU
inline const WindowAttentionKernels& window_attention_kernels(Isa isa) {
  static const WindowAttentionKernels tables[3] = {{scalar::window_attention_fwd, scalar::window_attention_bwd},
                                                   {avx2::window_attention_fwd, avx2::window_attention_bwd},
                                                   {avx512::window_attention_fwd, avx512::window_attention_bwd}};
  return tables[int(isa)];
}
inline const WindowAttentionKernels& window_attention_kernels() {
  return window_attention_kernels(detail::dispatch_isa());
}
#endif

}  // namespace
}  // namespace attn::kernels

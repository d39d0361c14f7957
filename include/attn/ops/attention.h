// Scaled dot-product attention, forward and backward: softmax(q kᵀ · scale + mask) v.
//
//   // q (B, NH, Tq, HS), k (B, NH, Tk, HS), v (B, NH, Tk, HSv) -> out (B, NH, Tq, HSv)
//   Tensor y = attn::scaled_dot_product_attention(q, k, v).out;
//   attn::SdpaOptions o;  o.causal = true;  o.dropout_p = 0.1;
//   auto r = attn::scaled_dot_product_attention(q, k, v, key_padding.view({B, 1, 1, Tk}), o);
//
// Two implementations, one contract:
//   naive  — materialises the (B, NH, Tq, Tk) scores through the existing ops (matmul, softmax,
//            masked_fill, dropout) and their autograd; f32 and f64; the test oracle.
//   fused  — f32 only: tiled over queries and keys with an online softmax (running max and sum),
//            never holding Tq × Tk in memory; keeps the per-row log-sum-exp and recomputes the
//            tiles in the backward pass (FlashAttention-2 style). AVX-512 / AVX2 / scalar by
//            attn::active_isa(). Bit-identical across runs at a fixed thread count.
// `automatic` picks one (see src/ops/attention.cpp for the measured rule).
//
// Masks: a u8 mask (nonzero = may NOT attend, as torch.nn.MultiheadAttention) or an additive
// float mask of q's dtype, broadcastable to (B, NH, Tq, Tk) (e.g. (B, 1, 1, Tk) key padding, or
// (Tq, Tk)); never expanded in memory by the fused kernel. Combined with `causal` when both are
// given. A query row whose keys are ALL masked gives zeros and zero gradients — a documented
// departure from PyTorch 1.13, which gives NaN. NaN in the inputs propagates.
// Dropout (on the attention weights) uses the counter-based stream of attn::dropout: element
// ((b*NH + h)*Tq + i)*Tk + j of (seed, g.reserve(B*NH*Tq*Tk)), so both paths drop the same ones.
#pragma once
#include <cmath>
#include <vector>

#include "attn/core/rng.h"
#include "attn/core/tensor.h"

namespace attn {

// top_left: tril(ones(Tq, Tk)) (query i sees keys j <= i);
// bottom_right: j <= i + (Tk - Tq) (KV-cache decoding).
enum class CausalAlign { top_left, bottom_right };
enum class SdpaImpl { automatic, fused, naive };

struct SdpaOptions {
  double scale = NAN;              // NaN: 1/sqrt(HS); any other value used as is (1.0 = "no scaling")
  bool causal = false;
  CausalAlign causal_align = CausalAlign::top_left;
  double dropout_p = 0.0;          // on the attention weights (only when > 0)
  Generator* generator = nullptr;  // for dropout; null: default_generator()
  bool need_weights = false;       // also return the (B, NH, Tq, Tk) weights, before dropout (as
                                   // torch.nn.MultiheadAttention returns them); forces naive
  SdpaImpl impl = SdpaImpl::automatic;
};

struct SdpaResult {
  Tensor out;
  Tensor weights;   // undefined unless need_weights
};

// q (B, NH, Tq, HS), k (B, NH, Tk, HS), v (B, NH, Tk, HSv) -> out (B, NH, Tq, HSv); exactly 4-d.
// q, k, v may be strided views (e.g. heads split out of a fused qkv projection) — no copies as
// long as their last dim has unit stride. Differentiable w.r.t. q, k, v (and an additive mask on
// the naive path; `automatic` picks naive when the mask requires grad). The fused path's `out` is a
// non-contiguous view: stored (B, Tq, NH, HSv), so out.transpose(1, 2) is contiguous (merge the heads
// with a reshape, no copy), as PyTorch's flash kernel returns it.
SdpaResult scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                        const Tensor& mask = Tensor(), const SdpaOptions& opts = {});

// Self-attention on a packed projection, as timm's Attention lays it out: qkv (B, T, 3 C) holds
// [q | k | v], each num_heads heads of C / num_heads. Returns the heads merged, (B, T, C): the
// values of splitting qkv into (B, NH, T, HS) views, scaled_dot_product_attention, and merging the
// heads. On the fused path its backward writes d(qkv) as one (B, T, 3 C) buffer (the unpacked path
// adds three per-head gradients into a zeroed buffer and copies it back through the permute).
// need_weights is not supported (use the unpacked call).
Tensor scaled_dot_product_attention_packed(const Tensor& qkv, int64_t num_heads, const Tensor& mask = Tensor(),
                                           const SdpaOptions& opts = {});

// Variable-length self-attention on packed sequences, for inference (flash-attn's varlen layout):
// qkv (N, 3 C) holds the tokens of S sequences one after another, sequence s being rows
// [cu_seqlens[s], cu_seqlens[s + 1]) (cu_seqlens: S + 1 offsets from 0 to N, non-decreasing; empty
// sequences allowed). Each sequence attends within itself only, with no mask and no padding. Returns
// (N, C), the heads merged: row by row the values scaled_dot_product_attention_packed gives on each
// sequence alone (1, T_s, 3 C). f32: one fused run over every (sequence, head, query block), sequences
// of <= 64 tokens taking the kernel's short unmasked path; f64: the naive path per sequence.
// Forward only: an error if qkv requires grad (with grad mode on); dropout_p must be 0, need_weights
// false; scale and causal (top-left, per sequence) as in SdpaOptions.
//
//   Tensor y = attn::scaled_dot_product_attention_varlen(qkv, {0, 5, 12}, 4);   // two sequences, 5 and 7 tokens
Tensor scaled_dot_product_attention_varlen(const Tensor& qkv, const std::vector<int64_t>& cu_seqlens, int64_t num_heads,
                                           const SdpaOptions& opts = {});

}  // namespace attn

// Internal: the naive (materialising) scaled dot-product attention — the oracle the fused kernel
// is tested against, and the path for f64, need_weights, differentiable additive masks and the
// sizes where it is faster. An op (a composite of differentiable ops), not a kernel: it lives in
// src/ops beside attention.cpp, which validates its inputs.
//
//   auto r = attn::reference::sdpa_naive(q, k, v, mask, {0.125, true, 0, 0.0, &g, false});
//
// scores = q kᵀ · scale (+ additive mask | bool mask -> -inf) (causal -> -inf); weights =
// softmax(scores) with all-masked rows set to zeros (not NaN); out = dropout(weights) v — all
// through the existing differentiable ops, so autograd comes for free.
#pragma once
#include <cstdint>

#include "attn/core/rng.h"
#include "attn/core/tensor.h"
#include "attn/ops/attention.h"

namespace attn::reference {

struct SdpaNaiveConfig {
  double scale = 1.0;
  bool causal = false;
  int64_t shift = 0;         // with causal: key j visible to query i iff j <= i + shift
  double dropout_p = 0.0;
  Generator* generator = nullptr;
  bool need_weights = false;
};

// (Tq, Tk) u8: 1 where key j is hidden from query i (j > i + shift).
Tensor causal_mask(int64_t Tq, int64_t Tk, int64_t shift);

// q (B, NH, Tq, HS), k (B, NH, Tk, HS), v (B, NH, Tk, HSv); mask undefined, u8 or q's dtype,
// broadcastable to (B, NH, Tq, Tk).
SdpaResult sdpa_naive(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                      const SdpaNaiveConfig& c);

}  // namespace attn::reference

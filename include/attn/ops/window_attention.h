// Window attention of a Swin block on its packed projection, every window and head in one fused
// pass (f32; AVX-512 / AVX2 / scalar by attn::active_isa()), forward and backward:
//
//   // qkv (B nW, N, 3 C) = Linear(C, 3C) of the windows; bias (NH, N, N); mask (nW, N, N) or undefined
//   Tensor y = attn::window_attention_packed(qkv, NH, bias, mask).out;               // (B nW, N, C), V1
//   WindowAttentionOptions o;  o.logit_scale = logit_scale;  o.need_weights = true;   // V2, with the maps
//   auto r = attn::window_attention_packed(qkv, NH, bias, mask, o);                  // r.weights (B nW, NH, N, N)
//
// Per window w and head h, with q, k, v the head's columns of qkv (heads of HS = C / NH):
//   V1:  softmax(scale q kᵀ + bias[h] + mask[w mod nW]) v,  scale = 1/sqrt(HS) unless given
//   V2:  softmax(q̂ k̂ᵀ exp(min(logit_scale[h], log 100)) + bias[h] + mask[w mod nW]) v,  x̂ = x / max(|x|, 1e-12)
// the heads merged, (B nW, N, C). The windows of one image are consecutive (w mod nW picks its shift
// mask, torchvision's (0 / -100) of nn::swin_shift_mask). Differentiable w.r.t. qkv, bias and
// logit_scale (the mask is a constant); the backward reads the stored weights (B nW NH N N floats,
// kept only when a gradient is needed or the weights are asked for). The weights returned are the
// softmax probabilities, without history. A bf16 qkv (a bf16 model's projection) in inference, V1, without
// the weights: bf16 out, from a bf16 attention kernel where the CPU has AVX512-BF16 (bf16 products, f32
// sums and softmax statistics, the exps rounded to bf16); elsewhere the f32 attention of its values.
#pragma once
#include <cmath>

#include "attn/core/tensor.h"

namespace attn {

struct WindowAttentionOptions {
  double scale = NAN;     // V1: NaN -> 1/sqrt(HS)
  Tensor logit_scale;     // V2: (NH) or (NH, 1, 1), raw (the exp and clamp are applied here)
  bool need_weights = false;
};

struct WindowAttentionResult {
  Tensor out;       // (B nW, N, C)
  Tensor weights;   // (B nW, NH, N, N), undefined unless need_weights
};

WindowAttentionResult window_attention_packed(const Tensor& qkv, int64_t num_heads, const Tensor& bias,
                                              const Tensor& mask = Tensor(), const WindowAttentionOptions& opts = {});

}  // namespace attn

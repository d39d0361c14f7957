// Int8 inference: weights quantized per output channel, activations per token at run time, the
// products summed in int32 by oneDNN, everything around the GEMMs (layer norm, softmax, residuals,
// GELU) left in float.
//
//   Int8Weight q = attn::quantize_weight_int8(w);      // w (N, K) f32 -> q.weight i8 (N, K), q.scale (N)
//   attn::set_int8_weight_scale(q.weight, q.scale);    // linear() now reads q.weight with its scales
//   Tensor y = attn::linear(x, q.weight, bias);        // x f32 (..., K) -> y f32 (..., N)
//
// The scheme. Weights: symmetric per output channel, scale_n = max_k |w[n, k]| / 127 (1 for an all-zero
// row), codes rint(w · (1 / scale_n)) in [-127, 127]. Activations (each call, each row of x): scale_m =
// max_k |x[m, k]| / qmax, codes rint(x · (1 / scale_m)) in [-qmax, qmax], qmax = int8_activation_max():
// both as torch.quantize_per_channel with those scales (zero points 0 and qmax + 1, quint8).
// Then y[m, n] = (Σ_k qx[m, k] qw[n, k]) · scale_m · scale_n + bias[n], the sum exact in int32. rint is
// round half to even. The weight's scales are a tensor of their own (nn::Linear registers them as its
// buffer "weight_scale", so they are saved and loaded with the weights) that the weight's storage
// refers to; a weight that loses them (a copy, .to()) is an error in linear(), not a wrong result.
// Inference only: no gradient flows through an int8 weight.
#pragma once
#include "attn/core/tensor.h"

namespace attn {

struct Int8Weight {
  Tensor weight;   // i8 (N, K)
  Tensor scale;    // f32 (N)
};

// w: (N, K) f32 or bf16.
Int8Weight quantize_weight_int8(const Tensor& w);
// f32 (N, K) = weight · scale per row.
Tensor dequantize_weight_int8(const Tensor& weight, const Tensor& scale);
// Ties `scale` (f32, (N), shared, not copied: later writes into it are seen) to the i8 weight (N, K).
void set_int8_weight_scale(Tensor& weight, const Tensor& scale);
// The scales tied to an i8 weight (undefined if none).
Tensor int8_weight_scale(const Tensor& weight);

// The largest activation code: 127 where this CPU's u8 x s8 GEMM sums exactly over the whole range
// (AVX512-VNNI, AVX-VNNI, AMX), 63 elsewhere (AVX2, AVX-512 without VNNI: their 16-bit pair sums
// saturate beyond it; 7-bit activations, as PyTorch's reduce_range). Probed once.
int int8_activation_max();
// "u8 x s8 -> s32 (8-bit activations)" or "... (7-bit activations: 16-bit pair sums)".
const char* int8_gemm_name();

}  // namespace attn

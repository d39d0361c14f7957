// Layer normalisation over the last dim, forward and backward.
//
//   Tensor y = attn::layer_norm(x, w, b);           // x: (B, T, C), w, b: (C)
//   Tensor z = attn::layer_norm(x, Tensor(), Tensor(), 1e-6);   // no affine
//
// y = (x - mean) / sqrt(var + eps) * weight + bias, biased variance, as torch's F.layer_norm.
// One fused kernel forward (saving mean and rstd per row) and one fused kernel backward
// (dx, dweight, dbias). f32 runs the vectorised kernels, f64 the reference kernels.
#pragma once
#include "attn/core/tensor.h"

namespace attn {

// Layer norm over the last dim; weight/bias of shape (C) or undefined (no affine). One fused kernel
// forward (saves mean and rstd per row), one fused kernel backward (dx, dweight, dbias).
// result bf16 (f32 x, inference only: no gradient flows through it): y rounded to bf16 as it is written,
// the input of a bf16 model's next Linear, which would round it so anyway.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5,
                  DType result = DType::f32);

}  // namespace attn

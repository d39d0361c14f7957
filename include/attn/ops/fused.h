// Fused kernels for Transformer blocks: one pass over memory where the unfused ops take two.
//
//   Tensor h = attn::bias_gelu(x, b);                          // gelu(x + b), x: (B, T, C), b: (C)
//   auto [s, y] = attn::add_layer_norm(x, attn_out, w, b);     // s = x + attn_out, y = LN(s)
//
// Both are differentiable in every input. f32 runs the vectorised kernels, f64 the reference ones.
#pragma once
#include <utility>

#include "attn/core/tensor.h"
#include "attn/ops/elementwise.h"

namespace attn {

// gelu(x + bias), bias (C) broadcast over the last dim; one pass forward and backward.
// An undefined bias means none (plain gelu).
Tensor bias_gelu(const Tensor& x, const Tensor& bias, GeluApprox approx = GeluApprox::none);

// Fused residual add + layer norm: returns {s = x + residual, layer_norm(s)}; both differentiable.
// x and residual have one shape (..., C); weight and bias as in layer_norm.
std::pair<Tensor, Tensor> add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight,
                                         const Tensor& bias, double eps = 1e-5);

}  // namespace attn

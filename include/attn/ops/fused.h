// Fused kernels for Transformer blocks: one pass over memory where the unfused ops take two.
//
//   Tensor h = attn::bias_gelu(x, b);                          // gelu(x + b), x: (B, T, C), b: (C)
//   auto [s, y] = attn::add_layer_norm(x, attn_out, w, b);     // s = x + attn_out, y = LN(s)
//   Tensor h = attn::linear_bias_gelu(x, fc1_w, fc1_b);        // gelu(x · fc1_wᵀ + fc1_b)
//   auto [s, y] = attn::layer_norm_rows(x, pending, rows, w, b);       // s = x + pending, y[i] = LN(s[rows[i]])
//   auto [s, y] = attn::add_layer_norm_rows(x, out, rows, w, b);       // s[i] = x[i] + out[rows[i]], y = LN(s)
//
// The first three are differentiable in every input; the two row-map forms are for inference. f32 runs the vectorised kernels, f64 the reference ones.
#pragma once
#include <utility>

#include "attn/core/tensor.h"
#include "attn/ops/elementwise.h"

namespace attn {

// gelu(x + bias), bias (C) broadcast over the last dim; one pass forward and backward.
// An undefined bias means none (plain gelu). result bf16 (an f32 x): the values rounded to bf16 as they
// are written, for a next Linear that reads bf16 (linear_reads_bf16 in inference, linear_autocasts in
// training; the gradient flows through as through the f32 result, the backward reads x).
Tensor bias_gelu(const Tensor& x, const Tensor& bias, GeluApprox approx = GeluApprox::none,
                 DType result = DType::f32);

// gelu(x · wᵀ + bias), x (..., K), w (N, K), bias (N) or undefined. Where w is packed for inference
// (nn::pack_linear_weights) and no gradient is wanted, one GEMM with the GELU as its epilogue (oneDNN's
// GELU: the same function to f32 rounding), whose result is bf16 when `result` asks for it and w is
// bf16 (the input of a next bf16 Linear, which rounds it so anyway); otherwise
// bias_gelu(linear(x, w), bias, approx, result).
Tensor linear_bias_gelu(const Tensor& x, const Tensor& w, const Tensor& bias, GeluApprox approx = GeluApprox::none,
                        DType result = DType::f32);

// Fused residual add + layer norm: returns {s = x + residual, layer_norm(s)}; both differentiable. With
// result bf16, layer_norm(s) comes rounded to bf16, as layer_norm's result does: in inference, or in
// training under bf16 autocast (for a Linear that rounds its input so anyway, linear_autocasts).
// x and residual have one shape (..., C); weight and bias as in layer_norm.
std::pair<Tensor, Tensor> add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight,
                                         const Tensor& bias, double eps = 1e-5,
                                         DType result = DType::f32);

// Inference forms with a row map (no gradient flows through them), for a partition of the rows into
// windows and back (Swin's window attention): one pass where a layer norm and a row gather take two.
// x, pending and residual are f32, read as rows of C = x.size(-1); rows is i64 (1-D).
//
// layer_norm_rows: s = x + pending (pending undefined: s is x), and y (rows.size(0), C) with
// y[i] = LN(s[rows[i]]). With pending, rows must be a permutation of x's rows (each row of s is
// written once); without, any row indices.
std::pair<Tensor, Tensor> layer_norm_rows(const Tensor& x, const Tensor& pending, const Tensor& rows,
                                          const Tensor& weight, const Tensor& bias, double eps = 1e-5,
                                          DType result = DType::f32);

// add_layer_norm_rows: s[i] = x[i] + residual[rows[i]] and y = LN(s), both shaped as x; rows has one
// index per row of x, into the rows of residual (of width C).
std::pair<Tensor, Tensor> add_layer_norm_rows(const Tensor& x, const Tensor& residual, const Tensor& rows,
                                              const Tensor& weight, const Tensor& bias, double eps = 1e-5,
                                              DType result = DType::f32);

}  // namespace attn

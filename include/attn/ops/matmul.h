// Matrix products on oneDNN (f32, bf16) with a naive reference for f64 and for tests.
//
//   Tensor c = attn::matmul(a, b);                  // (..., M, K) @ (..., K, N), batch broadcast
//   Tensor y = attn::linear(x, w, bias);            // x (..., K), w (N, K), bias (N): x wᵀ + b
//   Tensor s = attn::matmul(q, k.transpose(-2, -1)) // transposed operand: no copy
//
// Operands may be any strided view whose last two dims have a unit stride in one of them;
// others are made contiguous first.
#pragma once
#include "attn/core/tensor.h"

namespace attn {

Tensor matmul(const Tensor& a, const Tensor& b);
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

namespace reference {
// The test oracle: a triple loop in double, (M, K) @ (K, N) on 2-d tensors of any float dtype.
Tensor matmul_naive(const Tensor& a, const Tensor& b);
}  // namespace reference

}  // namespace attn

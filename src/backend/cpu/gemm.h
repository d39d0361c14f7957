// GEMM on oneDNN: C (B, M, N) = A (B, M, K) · W (B or 1, K, N) [+ bias (N)], any strides whose
// last dim or second-to-last dim is unit. Primitives are cached by shape, strides and dtype.
#pragma once
#include "attn/core/tensor.h"

namespace attn::kernels {

// a: (B, M, K) or (M, K); b: (B, K, N), (1, K, N) or (K, N); bias: (N) or undefined.
// Writes into `c` ((B, M, N) or (M, N), contiguous, allocated by the caller).
void gemm_onednn(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& c);
// True if oneDNN takes this dtype (f32, bf16).
bool gemm_onednn_supports(DType dt);
// True if oneDNN has a bf16 x bf16 -> f32 matmul on this CPU (AVX-512 BF16, AMX; probed once).
bool gemm_onednn_bf16_native();
// The reference GEMM in double: used for f64 and as the test oracle. Same contract.
void gemm_reference(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& c);

}  // namespace attn::kernels

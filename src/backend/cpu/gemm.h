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
// Weights packed once into oneDNN's own blocked layout for the matmul C = X · Wᵀ (attn::linear):
// at ViT's shapes the plain (N, K) layout makes every call re-pack W (10-16% of an f32 GEMM at
// M = 197, 12-29% of a bf16 one, measured on Zen 5). w: (N, K), f32 or bf16, contiguous, the whole of
// its storage. Packs in place (the storage then holds the packed layout, tagged in
// Storage::gemm_packed) when oneDNN's preferred layout has the same size and differs from the plain
// one; returns false and leaves w untouched otherwise.
bool gemm_pack_weight(Tensor& w);
// Back to the plain (N, K) layout, bit for bit. No-op on a weight that is not packed.
void gemm_unpack_weight(Tensor& w);
// c (M, N, f32) = a (M, K; f32, or bf16 for a bf16 weight) · wᵀ + bias, w packed by gemm_pack_weight.
void gemm_onednn_packed(const Tensor& a, const Tensor& w, const Tensor& bias, Tensor& c);
// The reference GEMM in double: used for f64 and as the test oracle. Same contract.
void gemm_reference(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& c);

}  // namespace attn::kernels

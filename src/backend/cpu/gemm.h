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
// Weights packed once into oneDNN's own blocked layout for the matmul C = X · Wᵀ (attn::linear; an i8
// weight for gemm_onednn_u8s8):
// at ViT's shapes the plain (N, K) layout makes every call re-pack W (10-16% of an f32 GEMM at
// M = 197, 12-29% of a bf16 one, measured on Zen 5). w: (N, K), f32, bf16 or i8, contiguous, the whole of
// its storage. Packs in place (the storage then holds the packed layout, tagged in
// Storage::gemm_packed) when oneDNN's preferred layout has the same size and differs from the plain
// one; returns false and leaves w untouched otherwise.
bool gemm_pack_weight(Tensor& w);
// Back to the plain (N, K) layout, bit for bit. No-op on a weight that is not packed.
void gemm_unpack_weight(Tensor& w);
// A 4-d strided operand: dims (b, h, rows, cols) and their element strides.
struct Strided4 {
  int64_t dims[4];
  int64_t strides[4];
};
// C[b, h] = scale · A[b, h] · B[b, h] for every (b, h): A (M, K) and B (K, N) bf16, C (M, N) f32 or bf16,
// each through its own strides (heads read in place from a packed projection); one oneDNN matmul,
// its primitive cached per geometry.
void gemm_onednn_bf16_4d(const void* a, const Strided4& ga, const void* b, const Strided4& gb, void* c,
                         const Strided4& gc, DType c_dtype, float scale);

// What the packed GEMM applies to its f32 result before it writes c (oneDNN post-op, same pass).
enum class GemmEpilogue { none, gelu_erf, gelu_tanh };

// c (M, N; f32, or bf16 for a bf16 weight) = epilogue(a (M, K; f32, or bf16 for a bf16 weight) · wᵀ
// + bias), w packed by gemm_pack_weight.
void gemm_onednn_packed(const Tensor& a, const Tensor& w, const Tensor& bias, Tensor& c,
                        GemmEpilogue epilogue = GemmEpilogue::none);
// int8: c (M, N, s32, contiguous) = a (M, K, u8, row stride lda) · wᵀ, w (N, K) i8, plain (unit last
// stride) or packed by gemm_pack_weight (which packs an i8 weight for this matmul).
void gemm_onednn_u8s8(const uint8_t* a, int64_t M, int64_t K, int64_t lda, const Tensor& w, int32_t* c);
// True where oneDNN's u8 x s8 GEMM sums every product exactly in 32 bits (VNNI, AMX): probed once.
// Elsewhere (AVX2, AVX-512 without VNNI) it adds pairs of products in saturating 16 bits, exact only
// while a pair's sum stays within ±32767: u8 codes at most 127 against s8 weights.
bool gemm_u8s8_full_range();
// The reference GEMM in double: used for f64 and as the test oracle. Same contract.
void gemm_reference(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& c);

}  // namespace attn::kernels

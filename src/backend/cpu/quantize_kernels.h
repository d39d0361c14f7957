// Int8 inference row kernels (internal): dynamic per-row quantization of activations to u8, and the
// dequantization of an int32 GEMM result back to f32, one implementation per ISA
// (isa/quantize.cpp, compiled once per ISA), picked at run time from attn::active_isa().
//
//   const auto& k = attn::kernels::quantize_kernels();
//   k.quantize_rows(x, K, q, K, scale, rows, K, 127);          // q = rint(x / scale) + 128
//   k.dequantize_rows(acc, scale, w_scale, corr, bias, rows, N); // in place: int32 -> f32
//
// The scheme (ops/quantize.cpp): a row's scale is max |x| / qmax (1 for a row of zeros), its codes
// rint(x · (1 / scale)) in [-qmax, qmax] (round half to even, as the CPU's conversion in its default
// mode), stored as u8 with the zero point qmax + 1. Every kernel is serial over `rows` rows.
#pragma once
#include <cstdint>

#include "attn/core/isa.h"

namespace attn::kernels {

#define ATTN_QUANTIZE_KERNEL_DECLS                                                                  \
  /* q (rows, K; row stride ldq) = rint(x / s) + qmax + 1 with s = max|x| / qmax per row (into    \
     scale[r]); x has row stride ldx. */                                                            \
  void quantize_rows(const float* x, int64_t ldx, uint8_t* q, int64_t ldq, float* scale, int64_t rows, \
                     int64_t K, int qmax);                                                          \
  /* In place over (rows, N) contiguous: y = float(acc - corr[n]) * (a_scale[r] * w_scale[n])       \
     + bias[n] (bias may be null); acc is int32, y overwrites it as f32. */                          \
  void dequantize_rows(int32_t* acc, const float* a_scale, const float* w_scale, const int32_t* corr, \
                       const float* bias, int64_t rows, int64_t N);

namespace scalar { ATTN_QUANTIZE_KERNEL_DECLS }
namespace avx2 { ATTN_QUANTIZE_KERNEL_DECLS }
namespace avx512 { ATTN_QUANTIZE_KERNEL_DECLS }
#undef ATTN_QUANTIZE_KERNEL_DECLS

struct QuantizeKernels {
  decltype(&scalar::quantize_rows) quantize_rows;
  decltype(&scalar::dequantize_rows) dequantize_rows;
};

#ifndef ATTN_KERNEL_TU
static inline const QuantizeKernels& quantize_kernels(Isa isa) {
  static const QuantizeKernels tables[3] = {{scalar::quantize_rows, scalar::dequantize_rows},
                                            {avx2::quantize_rows, avx2::dequantize_rows},
                                            {avx512::quantize_rows, avx512::dequantize_rows}};
  return tables[int(isa)];
}
static inline const QuantizeKernels& quantize_kernels() { return quantize_kernels(detail::dispatch_isa()); }
#endif

}  // namespace attn::kernels

// f32 <-> bf16 conversion kernels (internal): one implementation per ISA (isa/convert.cpp, compiled
// once per ISA), picked at run time from attn::active_isa().
//
//   const auto& k = attn::kernels::convert_kernels();
//   k.f32_to_bf16(x, y, n);   // y[i] = bf16::from_float(x[i]), bit for bit
//   k.bf16_to_f32(y, x, n);   // exact
//
// The rounding is bf16::from_float's (attn/core/dtype.h): to nearest even, a NaN stays a quiet NaN
// of the same sign and high payload. Every kernel is serial; src/ops/shape_ops.cpp splits the work.
#pragma once
#include <cstdint>

#include "attn/core/isa.h"

namespace attn::kernels {

#define ATTN_CONVERT_KERNEL_DECLS                                     \
  void f32_to_bf16(const float* x, uint16_t* y, int64_t n);           \
  void bf16_to_f32(const uint16_t* x, float* y, int64_t n);

namespace scalar { ATTN_CONVERT_KERNEL_DECLS }
namespace avx2 { ATTN_CONVERT_KERNEL_DECLS }
namespace avx512 { ATTN_CONVERT_KERNEL_DECLS }
#undef ATTN_CONVERT_KERNEL_DECLS

struct ConvertKernels {
  decltype(&scalar::f32_to_bf16) f32_to_bf16;
  decltype(&scalar::bf16_to_f32) bf16_to_f32;
};

#ifndef ATTN_KERNEL_TU
static inline const ConvertKernels& convert_kernels(Isa isa) {
  static const ConvertKernels tables[3] = {{scalar::f32_to_bf16, scalar::bf16_to_f32},
                                           {avx2::f32_to_bf16, avx2::bf16_to_f32},
                                           {avx512::f32_to_bf16, avx512::bf16_to_f32}};
  return tables[int(isa)];
}
static inline const ConvertKernels& convert_kernels() { return convert_kernels(detail::dispatch_isa()); }
#endif

}  // namespace attn::kernels

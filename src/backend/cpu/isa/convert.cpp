// f32 <-> bf16 conversion kernels of one ISA (see convert_kernels.h), compiled once per ISA
// (kernel_isa.h). The vector loops compute bf16::from_float's integer rounding lane by lane:
// (u + 0x7fff + ((u >> 16) & 1)) >> 16, or (u >> 16) | 0x40 for a NaN.
#include "kernel_isa.h"
#include "../convert_kernels.h"

#include "attn/core/dtype.h"

namespace attn::kernels::ATTN_KERNEL_ISA {

void f32_to_bf16(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
#if ATTN_KERNEL_ISA_ID == 3
  const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i quiet = _mm512_set1_epi32(0x40);
  for (; i + 16 <= n; i += 16) {
    const __m512i u = _mm512_castps_si512(_mm512_loadu_ps(x + i));
    const __m512i hi = _mm512_srli_epi32(u, 16);
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, half), _mm512_and_si512(hi, one)), 16);
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, abs_mask), inf);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, quiet));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm512_cvtepi32_epi16(r));
  }
#elif ATTN_KERNEL_ISA_ID == 2
  const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7fff);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i quiet = _mm256_set1_epi32(0x40);
  auto round8 = [&](const float* p) {
    const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(p));
    const __m256i hi = _mm256_srli_epi32(u, 16);
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, half), _mm256_and_si256(hi, one)), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
    return _mm256_blendv_epi8(r, _mm256_or_si256(hi, quiet), nan);
  };
  for (; i + 16 <= n; i += 16) {
    // Each lane holds a value <= 0xffff: the unsigned-saturating pack keeps it; it packs within
    // 128-bit halves, and the permute puts the four 64-bit groups back in order.
    const __m256i p = _mm256_packus_epi32(round8(x + i), round8(x + i + 8));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm256_permute4x64_epi64(p, 0xD8));
  }
#endif
  for (; i < n; ++i) y[i] = bf16::from_float(x[i]).bits;
}

void bf16_to_f32(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
#if ATTN_KERNEL_ISA_ID == 3
  for (; i + 16 <= n; i += 16) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
    _mm512_storeu_ps(y + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
  }
#elif ATTN_KERNEL_ISA_ID == 2
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
#endif
  for (; i < n; ++i) {
    bf16 b;
    b.bits = x[i];
    y[i] = b.to_float();
  }
}

}  // namespace attn::kernels::ATTN_KERNEL_ISA

// Int8 row kernels of one ISA (see quantize_kernels.h), compiled once per ISA (kernel_isa.h): the
// absolute maximum over the ISA's vector type, the float -> int conversions with its own intrinsics
// (round to nearest even, as std::nearbyint in the default rounding mode).
#include "kernel_isa.h"
#include "../quantize_kernels.h"

#include <cmath>
#include <cstring>

namespace attn::kernels::ATTN_KERNEL_ISA {

namespace {

float abs_max(const float* x, int64_t K) {
  using V = Vec;
  auto m = V::zero();
  int64_t k = 0;
  for (; k + V::W <= K; k += V::W) m = V::max(m, V::abs(V::load(x + k)));
  if (k < K) m = V::max(m, V::abs(V::load_tail(x + k, V::tail_mask(K - k), 0.f)));
  return V::hmax(m);
}

// q[k] = rint(x[k] * inv) + zero, k in [0, K).
void quantize_row(const float* x, uint8_t* q, int64_t K, float inv, int zero) {
  int64_t k = 0;
#if ATTN_KERNEL_ISA_ID == 3
  const __m512 vi = _mm512_set1_ps(inv);
  const __m512i vz = _mm512_set1_epi32(zero);
  for (; k + 16 <= K; k += 16) {
    const __m512i c = _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + k), vi)), vz);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + k), _mm512_cvtusepi32_epi8(c));
  }
#elif ATTN_KERNEL_ISA_ID == 2
  const __m256 vi = _mm256_set1_ps(inv);
  const __m256i vz = _mm256_set1_epi32(zero);
  for (; k + 8 <= K; k += 8) {
    const __m256i c = _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + k), vi)), vz);
    const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + k), _mm_packus_epi16(w16, w16));
  }
#endif
  for (; k < K; ++k) {
    // Clamped first: a non-finite activation saturates (as the vector conversions do) instead of
    // converting out of int's range.
    const int c = int(std::nearbyint(std::fmin(std::fmax(x[k] * inv, -256.f), 256.f))) + zero;
    q[k] = uint8_t(c < 0 ? 0 : c > 255 ? 255 : c);
  }
}

}  // namespace

void quantize_rows(const float* x, int64_t ldx, uint8_t* q, int64_t ldq, float* scale, int64_t rows, int64_t K,
                   int qmax) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * ldx;
    const float m = abs_max(xr, K);
    // A row of zeros (or one whose max is not finite: its codes saturate) keeps scale 1.
    const bool ok = m > 0.f && std::isfinite(m);
    const float s = ok ? m / float(qmax) : 1.f;
    scale[r] = s;
    quantize_row(xr, q + r * ldq, K, 1.f / s, qmax + 1);   // x · (1 / s), as PyTorch's quantize_per_channel
  }
}

void dequantize_rows(int32_t* acc, const float* a_scale, const float* w_scale, const int32_t* corr,
                     const float* bias, int64_t rows, int64_t N) {
  for (int64_t r = 0; r < rows; ++r) {
    int32_t* a = acc + r * N;
    float* y = reinterpret_cast<float*>(a);
    const float as = a_scale[r];
    int64_t n = 0;
#if ATTN_KERNEL_ISA_ID == 3
    const __m512 vas = _mm512_set1_ps(as);
    for (; n + 16 <= N; n += 16) {
      const __m512i d = _mm512_sub_epi32(_mm512_loadu_si512(a + n), _mm512_loadu_si512(corr + n));
      const __m512 s = _mm512_mul_ps(vas, _mm512_loadu_ps(w_scale + n));
      const __m512 b = bias ? _mm512_loadu_ps(bias + n) : _mm512_setzero_ps();
      _mm512_storeu_ps(y + n, _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), s, b));
    }
#elif ATTN_KERNEL_ISA_ID == 2
    const __m256 vas = _mm256_set1_ps(as);
    for (; n + 8 <= N; n += 8) {
      const __m256i d = _mm256_sub_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + n)),
                                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(corr + n)));
      const __m256 s = _mm256_mul_ps(vas, _mm256_loadu_ps(w_scale + n));
      const __m256 b = bias ? _mm256_loadu_ps(bias + n) : _mm256_setzero_ps();
      _mm256_storeu_ps(y + n, _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), s, b));
    }
#endif
    for (; n < N; ++n) {
      const float d = float(a[n] - corr[n]), s = as * w_scale[n];
      const float out = bias ? std::fma(d, s, bias[n]) : d * s;
      std::memcpy(y + n, &out, 4);
    }
  }
}

}  // namespace attn::kernels::ATTN_KERNEL_ISA

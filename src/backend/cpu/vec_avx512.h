// 16-lane AVX-512 float vector for the avx512 kernel path (internal; included by
// isa/kernel_isa.h). Same interface as VecScalar (vec_scalar.h); tails use mask registers.
#pragma once
// GCC 12's avx512fintrin.h trips -Wmaybe-uninitialized on its own _mm512_undefined_* (a known
// false positive); silence it for the TUs that include this header.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

namespace attn::kernels {
namespace {

struct VecAvx512 {
  using R = __m512;
  using M = __mmask16;
  static constexpr int W = 16;
  static constexpr const char* name = "avx512";

  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  static M tail_mask(int64_t n) { return M((1u << n) - 1u); }
  static R load_tail(const float* p, M m, float fill) { return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), m, p); }
  static void store_tail(float* p, R v, M m) { _mm512_mask_storeu_ps(p, m, v); }
  static R set1(float v) { return _mm512_set1_ps(v); }
  static R zero() { return _mm512_setzero_ps(); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R div(R a, R b) { return _mm512_div_ps(a, b); }
  static R fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R fnma(R a, R b, R c) { return _mm512_fnmadd_ps(a, b, c); }
  static R mul_err(R a, R b, R p) { return _mm512_fmsub_ps(a, b, p); }   // a*b - p, exactly
  static R max(R a, R b) { return _mm512_max_ps(a, b); }
  static R min(R a, R b) { return _mm512_min_ps(a, b); }
  static R abs(R a) { return _mm512_abs_ps(a); }
  static R sqrt(R a) { return _mm512_sqrt_ps(a); }
  static float hsum(R a) {
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(a),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float hmax(R a) {
    __m256 h = _mm256_max_ps(_mm512_castps512_ps256(a),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // dst[c·ldd + r] = src[r·ld + c] for r < nrows, 0 for nrows <= r < 16 (c < 16): a 16 × 16 block
  // transposed in registers (rows beyond nrows are not read). Pairs of rows interleaved, then pairs
  // of pairs (each 128-bit lane holds a 4 × 4 block transposed), then the lanes regrouped twice.
  static void transpose_16x16(const float* src, int64_t ld, int64_t nrows, float* dst, int64_t ldd) {
    __m512 r[16], t[16];
    for (int i = 0; i < 16; ++i) r[i] = i < nrows ? _mm512_loadu_ps(src + i * ld) : _mm512_setzero_ps();
    for (int i = 0; i < 16; i += 2) {
      t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int g = 0; g < 16; g += 4) {   // u[g + k]: column 4L + k of rows g .. g + 3 in lane L
      r[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[g]), _mm512_castps_pd(t[g + 2])));
      r[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[g]), _mm512_castps_pd(t[g + 2])));
      r[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[g + 1]), _mm512_castps_pd(t[g + 3])));
      r[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[g + 1]), _mm512_castps_pd(t[g + 3])));
    }
    for (int k = 0; k < 4; ++k) {
      const __m512 va = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x88), wa = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x88);
      const __m512 vb = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xdd), wb = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xdd);
      _mm512_storeu_ps(dst + k * ldd, _mm512_shuffle_f32x4(va, wa, 0x88));
      _mm512_storeu_ps(dst + (8 + k) * ldd, _mm512_shuffle_f32x4(va, wa, 0xdd));
      _mm512_storeu_ps(dst + (4 + k) * ldd, _mm512_shuffle_f32x4(vb, wb, 0x88));
      _mm512_storeu_ps(dst + (12 + k) * ldd, _mm512_shuffle_f32x4(vb, wb, 0xdd));
    }
  }
  static M lt(R a, R b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static M gt(R a, R b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  static R select(M m, R a, R b) { return _mm512_mask_blend_ps(m, b, a); }
  static bool any(M m) { return m != 0; }
  // 2^n from m = 1.5 * 2^23 + n (see VecScalar::exp_scale).
  static R exp_scale(R m) {
    const __m512i b = _mm512_slli_epi32(_mm512_castps_si512(m), 23);
    return _mm512_castsi512_ps(_mm512_add_epi32(b, _mm512_set1_epi32(127 << 23)));
  }
};

}  // namespace
}  // namespace attn::kernels

// 8-lane AVX2+FMA float vector for the avx2 kernel path (internal; included by isa/kernel_isa.h).
// Same interface as VecScalar (vec_scalar.h); tails use masked loads and stores.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace attn::kernels {
namespace {

struct VecAvx2 {
  using R = __m256;
  using M = __m256;   // lanes of all ones / all zeros
  static constexpr int W = 8;
  static constexpr const char* name = "avx2";

  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
  static M tail_mask(int64_t n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(n)), idx));
  }
  static R load_tail(const float* p, M m, float fill) {
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, _mm256_castps_si256(m)), m);
  }
  static void store_tail(float* p, R v, M m) { _mm256_maskstore_ps(p, _mm256_castps_si256(m), v); }
  static R set1(float v) { return _mm256_set1_ps(v); }
  static R zero() { return _mm256_setzero_ps(); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R div(R a, R b) { return _mm256_div_ps(a, b); }
  static R fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R fnma(R a, R b, R c) { return _mm256_fnmadd_ps(a, b, c); }
  static R mul_err(R a, R b, R p) { return _mm256_fmsub_ps(a, b, p); }   // a*b - p, exactly
  static R max(R a, R b) { return _mm256_max_ps(a, b); }
  static R min(R a, R b) { return _mm256_min_ps(a, b); }
  static R abs(R a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.f), a); }
  static R sqrt(R a) { return _mm256_sqrt_ps(a); }
  static float hsum(R a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float hmax(R a) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static M lt(R a, R b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static M gt(R a, R b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
  static R select(M m, R a, R b) { return _mm256_blendv_ps(b, a, m); }
  static bool any(M m) { return _mm256_movemask_ps(m) != 0; }
  // 2^n from m = 1.5 * 2^23 + n (see VecScalar::exp_scale).
  static R exp_scale(R m) {
    const __m256i b = _mm256_slli_epi32(_mm256_castps_si256(m), 23);
    return _mm256_castsi256_ps(_mm256_add_epi32(b, _mm256_set1_epi32(127 << 23)));
  }
};

}  // namespace
}  // namespace attn::kernels

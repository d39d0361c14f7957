// AVX2 f32 kernel of the fused Adam/AdamW update (compiled with -mavx2 -mfma).
#include <immintrin.h>

#include <cmath>

#include "adam_kernels.h"

namespace attn::kernels {

void adam_f32_avx2(float* p, const float* g, float* m, float* v, float* vmax, int64_t n, const AdamScalars& s) {
  const __m256 twd = _mm256_set1_ps(float(s.weight_decay)), decay = _mm256_set1_ps(float(s.decay));
  const __m256 b1 = _mm256_set1_ps(float(s.beta1)), one_b1 = _mm256_set1_ps(float(1.0 - s.beta1));
  const __m256 b2 = _mm256_set1_ps(float(s.beta2)), one_b2 = _mm256_set1_ps(float(1.0 - s.beta2));
  const __m256 bc2s = _mm256_set1_ps(float(s.bias_correction2_sqrt)), teps = _mm256_set1_ps(float(s.eps));
  const __m256 neg_step = _mm256_set1_ps(float(s.neg_step_size));
  const bool l2 = !s.decoupled && s.weight_decay != 0.0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 gi = _mm256_loadu_ps(g + i);
    __m256 pi = _mm256_loadu_ps(p + i);
    if (s.decoupled) pi = _mm256_mul_ps(pi, decay);
    else if (l2) gi = _mm256_fmadd_ps(twd, pi, gi);
    const __m256 mi = _mm256_fmadd_ps(one_b1, gi, _mm256_mul_ps(_mm256_loadu_ps(m + i), b1));
    const __m256 vi = _mm256_fmadd_ps(_mm256_mul_ps(one_b2, gi), gi, _mm256_mul_ps(_mm256_loadu_ps(v + i), b2));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    __m256 vv = vi;
    if (vmax) {   // torch.maximum: NaN from either side propagates
      const __m256 mx = _mm256_loadu_ps(vmax + i);
      const __m256 le = _mm256_cmp_ps(mx, vi, _CMP_LE_OQ);
      const __m256 vnan = _mm256_cmp_ps(vi, vi, _CMP_UNORD_Q);
      vv = _mm256_blendv_ps(_mm256_blendv_ps(mx, vi, vnan), vi, le);
      _mm256_storeu_ps(vmax + i, vv);
    }
    const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vv), bc2s), teps);
    pi = _mm256_add_ps(pi, _mm256_div_ps(_mm256_mul_ps(neg_step, mi), denom));
    _mm256_storeu_ps(p + i, pi);
  }
  if (i < n) adam_reference<float>(p + i, g + i, m + i, v + i, vmax ? vmax + i : nullptr, n - i, s);
}

}  // namespace attn::kernels

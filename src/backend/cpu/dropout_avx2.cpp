// Dropout's AVX2 kernel: Philox4x32-10 on 8 counters at once (one 32-bit word of each counter per
// lane), a 4x8 transpose to element order, an integer threshold test and a masked scale. Tails
// (fewer than 32 elements) go to the scalar kernel; the same loop, with relu applied first, is
// relu_dropout's. Compiled with -mavx2 -mfma.
#include <immintrin.h>

#include "dropout_kernels.h"

namespace attn::kernels {

namespace {

// lo/hi 32 bits of a * m for each 32-bit lane.
inline void mulhilo(__m256i a, __m256i m, __m256i& lo, __m256i& hi) {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

// Keep masks (all ones / zeros) of the 32 elements of groups g0 .. g0+7, in element order:
// out[k] holds groups 2k and 2k+1.
inline void keep_masks(const DropoutStream& s, uint64_t g0, __m256i out[4]) {
  alignas(32) uint32_t lo[8], hi[8];
  for (int j = 0; j < 8; ++j) {
    const uint64_t c = s.offset + g0 + uint64_t(j);
    lo[j] = uint32_t(c);
    hi[j] = uint32_t(c >> 32);
  }
  __m256i c0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo));
  __m256i c1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi));
  __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
  uint32_t k0 = uint32_t(s.seed), k1 = uint32_t(s.seed >> 32);
  const __m256i M0 = _mm256_set1_epi32(int32_t(0xD2511F53u)), M1 = _mm256_set1_epi32(int32_t(0xCD9E8D57u));
  for (int r = 0; r < 10; ++r) {
    __m256i lo0, hi0, lo1, hi1;
    mulhilo(c0, M0, lo0, hi0);
    mulhilo(c2, M1, lo1, hi1);
    const __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(int32_t(k0)));
    const __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(int32_t(k1)));
    c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  // keep = (word >> 8) > threshold - 1 (values below 2^24: the signed compare is exact)
  const __m256i thr = _mm256_set1_epi32(int32_t(s.threshold) - 1);
  const __m256i w0 = _mm256_cmpgt_epi32(_mm256_srli_epi32(c0, 8), thr);
  const __m256i w1 = _mm256_cmpgt_epi32(_mm256_srli_epi32(c1, 8), thr);
  const __m256i w2 = _mm256_cmpgt_epi32(_mm256_srli_epi32(c2, 8), thr);
  const __m256i w3 = _mm256_cmpgt_epi32(_mm256_srli_epi32(c3, 8), thr);
  // 4 x 8 transpose: lane j of w_l is word l of group j.
  const __m256i t0 = _mm256_unpacklo_epi32(w0, w1), t1 = _mm256_unpackhi_epi32(w0, w1);
  const __m256i t2 = _mm256_unpacklo_epi32(w2, w3), t3 = _mm256_unpackhi_epi32(w2, w3);
  const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
  out[0] = _mm256_permute2x128_si256(u0, u1, 0x20);
  out[1] = _mm256_permute2x128_si256(u2, u3, 0x20);
  out[2] = _mm256_permute2x128_si256(u0, u1, 0x31);
  out[3] = _mm256_permute2x128_si256(u2, u3, 0x31);
}

// relu as attn's unary kernel: x > 0 ? x : (NaN ? x : 0) — "not (x <= 0)", unordered included.
inline __m256 relu8(__m256 x) {
  return _mm256_and_ps(x, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_NLE_UQ));
}
inline __m256d relu4(__m256d x) {
  return _mm256_and_pd(x, _mm256_cmp_pd(x, _mm256_setzero_pd(), _CMP_NLE_UQ));
}

template <bool Relu>
void masked_scale_f32(const float* x, float* y, int64_t i0, int64_t i1, const DropoutStream& s, float scale) {
  const __m256 sc = _mm256_set1_ps(scale);
  int64_t i = i0;
  for (; i + 32 <= i1; i += 32) {
    __m256i m[4];
    keep_masks(s, uint64_t(i / 4), m);
    for (int k = 0; k < 4; ++k) {
      const __m256 f = _mm256_and_ps(_mm256_castsi256_ps(m[k]), sc);
      __m256 v = _mm256_loadu_ps(x + i + 8 * k);
      if constexpr (Relu) v = relu8(v);
      _mm256_storeu_ps(y + i + 8 * k, _mm256_mul_ps(v, f));
    }
  }
  if (i < i1) dropout_scalar(x, y, i, i1, s, scale, Relu);
}

template <bool Relu>
void masked_scale_f64(const double* x, double* y, int64_t i0, int64_t i1, const DropoutStream& s, double scale) {
  const __m256d sc = _mm256_set1_pd(scale);
  int64_t i = i0;
  for (; i + 32 <= i1; i += 32) {
    __m256i m[4];
    keep_masks(s, uint64_t(i / 4), m);
    for (int k = 0; k < 4; ++k) {
      const __m256i lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(m[k]));
      const __m256i hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(m[k], 1));
      const __m256d f0 = _mm256_and_pd(_mm256_castsi256_pd(lo), sc), f1 = _mm256_and_pd(_mm256_castsi256_pd(hi), sc);
      __m256d v0 = _mm256_loadu_pd(x + i + 8 * k), v1 = _mm256_loadu_pd(x + i + 8 * k + 4);
      if constexpr (Relu) { v0 = relu4(v0); v1 = relu4(v1); }
      _mm256_storeu_pd(y + i + 8 * k, _mm256_mul_pd(v0, f0));
      _mm256_storeu_pd(y + i + 8 * k + 4, _mm256_mul_pd(v1, f1));
    }
  }
  if (i < i1) dropout_scalar(x, y, i, i1, s, scale, Relu);
}

}  // namespace

void dropout_avx2(const float* x, float* y, int64_t i0, int64_t i1, const DropoutStream& s, float scale, bool relu) {
  if (relu) masked_scale_f32<true>(x, y, i0, i1, s, scale);
  else masked_scale_f32<false>(x, y, i0, i1, s, scale);
}
void dropout_avx2(const double* x, double* y, int64_t i0, int64_t i1, const DropoutStream& s, double scale, bool relu) {
  if (relu) masked_scale_f64<true>(x, y, i0, i1, s, scale);
  else masked_scale_f64<false>(x, y, i0, i1, s, scale);
}

void relu_dropout_backward_avx2(const float* y, const float* dy, float* dx, int64_t i0, int64_t i1, float scale) {
  const __m256 sc = _mm256_set1_ps(scale), zero = _mm256_setzero_ps();
  int64_t i = i0;
  for (; i + 8 <= i1; i += 8) {
    const __m256 live = _mm256_cmp_ps(_mm256_loadu_ps(y + i), zero, _CMP_GT_OQ);
    _mm256_storeu_ps(dx + i, _mm256_and_ps(live, _mm256_mul_ps(_mm256_loadu_ps(dy + i), sc)));
  }
  if (i < i1) relu_dropout_backward_scalar(y, dy, dx, i, i1, scale);
}

void relu_dropout_backward_avx2(const double* y, const double* dy, double* dx, int64_t i0, int64_t i1, double scale) {
  const __m256d sc = _mm256_set1_pd(scale), zero = _mm256_setzero_pd();
  int64_t i = i0;
  for (; i + 4 <= i1; i += 4) {
    const __m256d live = _mm256_cmp_pd(_mm256_loadu_pd(y + i), zero, _CMP_GT_OQ);
    _mm256_storeu_pd(dx + i, _mm256_and_pd(live, _mm256_mul_pd(_mm256_loadu_pd(dy + i), sc)));
  }
  if (i < i1) relu_dropout_backward_scalar(y, dy, dx, i, i1, scale);
}

}  // namespace attn::kernels

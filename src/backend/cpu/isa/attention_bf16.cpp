// The bf16 attention kernel (see attention_bf16.h), compiled once per ISA (kernel_isa.h); only the
// avx512 object defines it, its dot products in AVX512-BF16 (VDPBF16PS: per f32 lane, the sum of two
// bf16 products added to the accumulator), enabled function by function so that nothing else in the
// avx512 kernels may use those instructions.
// GCC 12 reports its own _mm512_undefined_* in the unpack intrinsics as uninitialized once they are inlined
// into a function with a target attribute (a false positive, as vec_avx512.h notes for -Wmaybe-uninitialized).
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernel_isa.h"
#include "../attention_bf16.h"

#include <algorithm>
#include <cstring>
#include <memory>

#if ATTN_KERNEL_ISA_ID == 3

#define ATTN_BF16_FN __attribute__((target("avx512bf16")))

namespace attn::kernels::avx512 {
namespace {

inline uint32_t load_pair(const uint16_t* p) {
  uint32_t u;
  std::memcpy(&u, p, sizeof u);
  return u;
}

inline __m512bh as_bh(__m512i v) { return (__m512bh)v; }

// The rows of a tile: their query rows, output rows and the biases' rows (null: none).
template <int R>
struct Rows {
  const uint16_t* q[R];
  uint16_t* o[R];
  const float* b0[R];
  const float* b1[R];
};

// Lanes of columns c .. c + 16 below T.
inline __mmask16 valid_lanes(int64_t c, int64_t T) {
  return c + 16 <= T ? __mmask16(0xffff) : c >= T ? __mmask16(0) : __mmask16((1u << (T - c)) - 1u);
}

// S[r][c .. c + 16 NZ) = scale · Q[r] · Kᵀ + the biases, for R rows, the columns below T stored and
// their max folded into mx[r]; kp: the packed K of the head, (HS/2, Tp, 2).
template <int R, int NZ>
ATTN_BF16_FN __attribute__((noinline)) void qk_tile(const Rows<R>& rw, const uint16_t* kp, int64_t Tp, int64_t HS2,
                                                    int64_t c, int64_t T, float scale, float* s, __m512* mx) {
  __m512 acc[R][NZ];
  for (int r = 0; r < R; ++r)
    for (int z = 0; z < NZ; ++z) acc[r][z] = _mm512_setzero_ps();
  for (int64_t d2 = 0; d2 < HS2; ++d2) {
    const uint16_t* kb = kp + (d2 * Tp + c) * 2;
    __m512i kv[NZ];
    for (int z = 0; z < NZ; ++z) kv[z] = _mm512_loadu_si512(kb + 32 * z);
    for (int r = 0; r < R; ++r) {
      const __m512i qb = _mm512_set1_epi32(int(load_pair(rw.q[r] + 2 * d2)));
      for (int z = 0; z < NZ; ++z) acc[r][z] = _mm512_dpbf16_ps(acc[r][z], as_bh(qb), as_bh(kv[z]));
    }
  }
  const __m512 vs = _mm512_set1_ps(scale);
  for (int z = 0; z < NZ; ++z) {
    const int64_t col = c + 16 * z;
    const __mmask16 m = valid_lanes(col, T);
    if (!m) break;
    for (int r = 0; r < R; ++r) {
      __m512 v = _mm512_mul_ps(acc[r][z], vs);
      if (rw.b0[r]) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, rw.b0[r] + col));
      if (rw.b1[r]) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, rw.b1[r] + col));
      _mm512_mask_storeu_ps(s + r * Tp + col, m, v);
      mx[r] = _mm512_mask_max_ps(mx[r], m, mx[r], v);
    }
  }
}

// O[r][g .. g + 16 NZ) = inv[r] · P[r] · V for R rows, rounded to bf16; vp: the packed V, (Te/2, HS, 2).
template <int R, int NZ>
ATTN_BF16_FN __attribute__((noinline)) void pv_tile(const uint16_t* p, int64_t ldp, const uint16_t* vp, int64_t HS,
                                                    int64_t Te2, int64_t g, const float* inv, uint16_t* const* o) {
  __m512 acc[R][NZ];
  for (int r = 0; r < R; ++r)
    for (int z = 0; z < NZ; ++z) acc[r][z] = _mm512_setzero_ps();
  for (int64_t j2 = 0; j2 < Te2; ++j2) {
    const uint16_t* vb = vp + (j2 * HS + g) * 2;
    __m512i vv[NZ];
    for (int z = 0; z < NZ; ++z) vv[z] = _mm512_loadu_si512(vb + 32 * z);
    for (int r = 0; r < R; ++r) {
      const __m512i pb = _mm512_set1_epi32(int(load_pair(p + r * ldp + 2 * j2)));
      for (int z = 0; z < NZ; ++z) acc[r][z] = _mm512_dpbf16_ps(acc[r][z], as_bh(pb), as_bh(vv[z]));
    }
  }
  for (int r = 0; r < R; ++r) {
    const __m512 vi = _mm512_set1_ps(inv[r]);
    for (int z = 0; z < NZ; ++z)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o[r] + g + 16 * z),
                          (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(acc[r][z], vi)));
  }
}

// The scores of R rows across the Tp (padded) keys: 64 keys a step, then 16 at a time.
template <int R>
ATTN_BF16_FN void qk_rows(const Rows<R>& rw, const uint16_t* kp, int64_t Tp, int64_t HS2, int64_t T, float scale,
                          float* s, __m512* mx) {
  int64_t c = 0;
  for (; c + 64 <= Tp; c += 64) qk_tile<R, 4>(rw, kp, Tp, HS2, c, T, scale, s, mx);
  switch ((Tp - c) / 16) {
    case 3: qk_tile<R, 3>(rw, kp, Tp, HS2, c, T, scale, s, mx); break;
    case 2: qk_tile<R, 2>(rw, kp, Tp, HS2, c, T, scale, s, mx); break;
    case 1: qk_tile<R, 1>(rw, kp, Tp, HS2, c, T, scale, s, mx); break;
    default: break;
  }
}

template <int R>
ATTN_BF16_FN void pv_rows(const uint16_t* p, int64_t ldp, const uint16_t* vp, int64_t HS, int64_t Te2,
                          const float* inv, uint16_t* const* o) {
  int64_t g = 0;
  for (; g + 64 <= HS; g += 64) pv_tile<R, 4>(p, ldp, vp, HS, Te2, g, inv, o);
  switch ((HS - g) / 16) {
    case 3: pv_tile<R, 3>(p, ldp, vp, HS, Te2, g, inv, o); break;
    case 2: pv_tile<R, 2>(p, ldp, vp, HS, Te2, g, inv, o); break;
    case 1: pv_tile<R, 1>(p, ldp, vp, HS, Te2, g, inv, o); break;
    default: break;
  }
}

// exp(x) for x <= 0 (a score minus its row's max), to f32 accuracy: x = n ln2 + r, |r| <= ln2/2, e^r by
// RowOps' degree-6 polynomial, and 2^n applied by VSCALEFPS, which goes to 0 far below the range
// (x is clamped at -104 first, so -inf gives 0 and NaN stays NaN).
inline __m512 exp_nonpositive(__m512 x) {
  const __m512 a = _mm512_max_ps(_mm512_set1_ps(-104.f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(a, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), a);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723e-6f), r);
  __m512 p = _mm512_set1_ps(1.382872447e-03f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.375254343e-03f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.166839784e-02f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.666641509e-01f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.999999119e-01f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
  return _mm512_scalef_ps(p, n);
}

// p[0 .. T) = bf16(exp(s[0 .. T) - mx)), p[T .. Te) = 0; returns 1 / the f32 sum of the exps (the
// normalization, applied to the row's output: the flash-attention order).
ATTN_BF16_FN float exp_row(const float* s, float mx, int64_t T, int64_t Te, uint16_t* p) {
  const __m512 vmax = _mm512_set1_ps(mx);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < T; j += 16) {
    const __mmask16 m = valid_lanes(j, T);
    const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + j), vmax));
    sum = _mm512_mask_add_ps(sum, m, sum, e);
    _mm256_mask_storeu_epi16(p + j, m, (__m256i)_mm512_cvtneps_pbh(e));
  }
  for (int64_t j = T; j < Te; ++j) p[j] = 0;
  return 1.f / _mm512_reduce_add_ps(sum);
}

template <int R>
ATTN_BF16_FN void tile(const AttnBf16Args& a, int64_t b, int64_t h, int64_t i0, const uint16_t* kp,
                       const uint16_t* vp, float* s, uint16_t* p) {
  const int64_t Tp = attn_bf16_tp(a), Te = attn_bf16_te(a);
  const float* bias[2] = {nullptr, nullptr};
  for (int t = 0; t < 2; ++t)
    if (a.bias[t]) bias[t] = a.bias[t] + (a.bias_bmod[t] ? b % a.bias_bmod[t] : b) * a.bias_sb[t] + h * a.bias_sh[t];
  Rows<R> rw;
  __m512 mx[R];
  for (int r = 0; r < R; ++r) {
    rw.q[r] = a.q + b * a.q_sb + h * a.q_sh + (i0 + r) * a.q_st;
    rw.o[r] = a.out + b * a.o_sb + h * a.o_sh + (i0 + r) * a.o_st;
    rw.b0[r] = bias[0] ? bias[0] + (i0 + r) * a.bias_si[0] : nullptr;
    rw.b1[r] = bias[1] ? bias[1] + (i0 + r) * a.bias_si[1] : nullptr;
    mx[r] = _mm512_set1_ps(-__builtin_inff());
  }
  qk_rows<R>(rw, kp, Tp, a.HS / 2, a.T, a.scale, s, mx);
  float inv[R];
  for (int r = 0; r < R; ++r) inv[r] = exp_row(s + r * Tp, _mm512_reduce_max_ps(mx[r]), a.T, Te, p + r * Tp);
  pv_rows<R>(p, Tp, vp, a.HS, Te / 2, inv, rw.o);
}

// K of (b, h) into (HS/2, Tp, 2) pairs (a transpose of K read as (T, HS/2) pairs, zeros beyond T), and
// V into (Te/2, HS, 2) pairs (rows 2 j2 and 2 j2 + 1 interleaved, a zero row beyond T).
ATTN_BF16_FN void pack_head(const AttnBf16Args& a, int64_t b, int64_t h, uint16_t* kp, uint16_t* vp) {
  const int64_t T = a.T, HS = a.HS, Tp = attn_bf16_tp(a), Te = attn_bf16_te(a), HS2 = HS / 2;
  const uint16_t* k = a.k + b * a.k_sb + h * a.k_sh;
  auto* kp32 = reinterpret_cast<float*>(kp);   // pairs moved as 32-bit lanes (bit patterns, no arithmetic)
  const bool even = a.k_st % 2 == 0;
  for (int64_t j = 0; j < Tp; j += 16) {
    const int64_t rows = std::max<int64_t>(0, std::min<int64_t>(16, T - j));
    int64_t d2 = 0;
    if (even)
      for (; d2 + 16 <= HS2; d2 += 16)
        Vec::transpose_16x16(reinterpret_cast<const float*>(k + j * a.k_st + 2 * d2), a.k_st / 2, rows,
                             kp32 + d2 * Tp + j, Tp);
    for (; d2 < HS2; ++d2)
      for (int64_t r = 0; r < 16; ++r) {
        const uint32_t u = r < rows ? load_pair(k + (j + r) * a.k_st + 2 * d2) : 0u;
        std::memcpy(kp + (d2 * Tp + j + r) * 2, &u, sizeof u);
      }
  }
  const uint16_t* v = a.v + b * a.v_sb + h * a.v_sh;
  for (int64_t j2 = 0; j2 < Te / 2; ++j2) {
    const uint16_t* r0 = v + 2 * j2 * a.v_st;
    const bool odd_last = 2 * j2 + 1 >= T;
    for (int64_t d = 0; d < HS; d += 16) {
      const __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + d)));
      __m512i hi = _mm512_setzero_si512();
      if (!odd_last) hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + a.v_st + d)));
      _mm512_storeu_si512(vp + (j2 * HS + d) * 2, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
  }
}

}  // namespace

ATTN_BF16_FN void attention_bf16_fwd(const AttnBf16Args& a, int64_t item0, int64_t item1) {
  const int64_t Tp = attn_bf16_tp(a), hi = attn_bf16_head_items(a);
  // This thread's scratch: the packed K and V of the head in hand, a tile's scores and probabilities.
  const std::unique_ptr<uint16_t[]> kv(new uint16_t[size_t(attn_bf16_head_elems(a))]);
  const std::unique_ptr<float[]> s(new float[size_t(kAttnBf16Tile * Tp)]);
  const std::unique_ptr<uint16_t[]> p(new uint16_t[size_t(kAttnBf16Tile * Tp)]);
  uint16_t* kp = kv.get();
  uint16_t* vp = kp + a.HS * Tp;
  int64_t packed = -1;
  for (int64_t item = item0; item < item1; ++item) {
    const int64_t bh = item / hi, b = bh / a.NH, h = bh % a.NH;
    if (bh != packed) pack_head(a, b, h, kp, vp), packed = bh;
    const int64_t rows = attn_bf16_rows(a), r1 = std::min(a.T, (item % hi + 1) * rows);
    for (int64_t i = (item % hi) * rows; i < r1; i += kAttnBf16Tile) {
      switch (std::min<int64_t>(kAttnBf16Tile, r1 - i)) {
        case 6: tile<6>(a, b, h, i, kp, vp, s.get(), p.get()); break;
        case 5: tile<5>(a, b, h, i, kp, vp, s.get(), p.get()); break;
        case 4: tile<4>(a, b, h, i, kp, vp, s.get(), p.get()); break;
        case 3: tile<3>(a, b, h, i, kp, vp, s.get(), p.get()); break;
        case 2: tile<2>(a, b, h, i, kp, vp, s.get(), p.get()); break;
        default: tile<1>(a, b, h, i, kp, vp, s.get(), p.get()); break;
      }
    }
  }
}

}  // namespace attn::kernels::avx512

#endif

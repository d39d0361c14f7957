// The row kernels of vec_dispatch.h, written once over a vector type V (VecScalar, VecAvx2,
// VecAvx512) and instantiated by isa/softmax.cpp, layer_norm.cpp, gelu.cpp and cross_entropy.cpp,
// each compiled once per ISA (internal; isa/kernel_isa.h defines Vec):
//
//   namespace attn::kernels::ATTN_KERNEL_ISA {
//   void softmax_fwd(const float* x, float* y, int64_t rows, int64_t n, bool log) {
//     RowOps<Vec>::softmax_fwd(x, y, rows, n, log);
//   }
//   }
//
// Everything here has internal linkage, so the copies compiled with different ISA flags never
// meet at link time. No STL; from libm only one logf per log_softmax row: exp, erf / the normal
// CDF and the GELU forms are polynomial (f32, ~1e-7 relative; see math below).
#pragma once
#include <cstdint>

namespace attn::kernels {
namespace {

template <class V>
struct RowOps {
  using R = typename V::R;
  using M = typename V::M;
  static constexpr int64_t W = V::W;

  // ---------------- math ----------------

  // exp(hi + lo) for a small correction lo: ~1 ulp. 0 when hi < -87.33 (below FLT_MIN:
  // denormal results flush to 0), inf from hi > 88.38; NaN propagates. Cody-Waite reduction
  // hi = n ln2 + r, |r| <= ln2/2 (n by the 1.5 * 2^23 rounding trick, which also leaves n in the
  // low bits for the scale 2^n), then e^r by a degree-6 polynomial (weighted least squares on
  // Chebyshev nodes, relative error 2e-9).
  static R exp2part(R hi, R lo) {
    // Clamp with the argument second: x86 max/min return the second operand for NaN.
    const R a = V::min(V::set1(89.f), V::max(V::set1(-87.4f), hi));
    const R magic = V::set1(12582912.f);   // 1.5 * 2^23
    const R nm = V::fma(a, V::set1(1.44269504088896341f), magic);
    const R n = V::sub(nm, magic);
    R r = V::fnma(n, V::set1(0.693145751953125f), a);   // ln2 to 16 bits: n * ln2_hi is exact
    r = V::fnma(n, V::set1(1.42860682030941723e-6f), r);
    r = V::add(r, lo);
    R p = V::set1(1.382872447e-03f);
    p = V::fma(p, r, V::set1(8.375254343e-03f));
    p = V::fma(p, r, V::set1(4.166839784e-02f));
    p = V::fma(p, r, V::set1(1.666641509e-01f));
    p = V::fma(p, r, V::set1(4.999999119e-01f));
    p = V::fma(p, r, V::set1(1.f));
    p = V::fma(p, r, V::set1(1.f));
    return V::select(V::lt(hi, V::set1(-87.33f)), V::zero(), V::mul(p, V::exp_scale(nm)));
  }
  static R exp(R x) { return exp2part(x, V::zero()); }

  // Standard normal CDF Phi(x), and E = exp(-x^2 / 2) (for the density), ~2-4 ulp relative
  // everywhere including the far negative tail. With t = |x| / sqrt(2):
  // Phi(-|x|) = erfc(t) / 2 = u E Q(u) / 2, u = 1 / (1 + 0.3 t), where Q(u) = erfc(t) e^{t^2} / u
  // is smooth on u in (0, 1]: a degree-9 polynomial in v = a u + b (u over [1/(1 + 0.3 * 9.5), 1]
  // mapped to [-1, 1]) fitted by Chebyshev least squares to double-precision erfc fits it to
  // 3e-8 relative. -x^2/2 goes to exp as an exact hi + lo pair, so E keeps full relative accuracy
  // far in the tail (where e^{-x^2/2} amplifies any error in x^2), and Phi(x) for x < 0 has no
  // cancellation (unlike 1 + erf).
  static R normal_cdf(R x, R& E) {
    const R ax = V::min(V::abs(x), V::set1(20.f));   // NaN -> 20: internals stay finite
    const R h = V::mul(ax, V::set1(-0.5f));
    const R hi = V::mul(h, ax);                       // -x^2/2 ...
    const R lo = V::mul_err(h, ax, hi);               // ... and its rounding error, exactly
    E = exp2part(hi, lo);
    const R u = V::div(V::set1(1.f), V::fma(ax, V::set1(0.3f * 0.707106781186547524f), V::set1(1.f)));
    const R v = V::fma(u, V::set1(2.701754386f), V::set1(-1.701754386f));
    R q = V::set1(1.477936764e-06f);
    q = V::fma(q, v, V::set1(-4.571036128e-05f));
    q = V::fma(q, v, V::set1(-1.623457175e-04f));
    q = V::fma(q, v, V::set1(4.880921707e-04f));
    q = V::fma(q, v, V::set1(5.869688653e-03f));
    q = V::fma(q, v, V::set1(2.630304688e-02f));
    q = V::fma(q, v, V::set1(7.834242462e-02f));
    q = V::fma(q, v, V::set1(1.743740229e-01f));
    q = V::fma(q, v, V::set1(3.022492392e-01f));
    q = V::fma(q, v, V::set1(4.125800377e-01f));
    const R c = V::mul(V::mul(u, V::set1(0.5f)), V::mul(E, q));   // Phi(-|x|)
    return V::select(V::lt(x, V::zero()), c, V::sub(V::set1(1.f), c));
  }

  // GELU, exact form: gelu(x) = x Phi(x), gelu'(x) = Phi(x) + x phi(x). For |x| <= 4 (nearly all
  // activations, also with a bias added) both are one polynomial each, no exp and no division:
  //   gelu(x) = x (1/2 + x P(s)),  gelu'(x) = 1/2 + x R(s),  s = x^2,
  //   P(s) = erf(x / sqrt(2)) / (2x),  R(s) = P(s) + phi(x),
  // both even in x, smooth in s on [0, 16]: degree 12 and 14 in z = s/8 - 1, fitted by weighted
  // Chebyshev least squares (relative error 7e-9 and 2e-9; ~1e-7 after f32 evaluation). As in
  // PyTorch's x/2 (1 + erf), x in [-4, -1] loses relative (not absolute, ~1e-7) accuracy to the
  // cancellation in 1/2 + x P(s) (Phi(-4) = 3e-5). Vectors with a lane beyond |x| > 4 (or
  // inf) also take the normal_cdf path for those lanes.
  static R gelu_poly(R x, R s) {
    const R z = V::fma(s, V::set1(2.f / 16.f), V::set1(-1.f));
    R p = V::set1(1.710982040e-05f);
    p = V::fma(p, z, V::set1(-6.284911544e-05f));
    p = V::fma(p, z, V::set1(1.494666706e-04f));
    p = V::fma(p, z, V::set1(-4.186654871e-04f));
    p = V::fma(p, z, V::set1(1.160923558e-03f));
    p = V::fma(p, z, V::set1(-2.833221703e-03f));
    p = V::fma(p, z, V::set1(6.237791401e-03f));
    p = V::fma(p, z, V::set1(-1.246922550e-02f));
    p = V::fma(p, z, V::set1(2.251787745e-02f));
    p = V::fma(p, z, V::set1(-3.686969925e-02f));
    p = V::fma(p, z, V::set1(5.593423102e-02f));
    p = V::fma(p, z, V::set1(-8.432143640e-02f));
    p = V::fma(p, z, V::set1(1.759497804e-01f));
    return V::mul(x, V::fma(x, p, V::set1(0.5f)));   // x Phi(x), Phi = 1/2 + x P rounded once
  }
  static R gelu_grad_poly(R x, R s) {
    const R z = V::fma(s, V::set1(2.f / 16.f), V::set1(-1.f));
    R p = V::set1(2.724255995e-05f);
    p = V::fma(p, z, V::set1(-1.083312788e-04f));
    p = V::fma(p, z, V::set1(2.697427021e-04f));
    p = V::fma(p, z, V::set1(-7.780923137e-04f));
    p = V::fma(p, z, V::set1(2.257921291e-03f));
    p = V::fma(p, z, V::set1(-5.743535696e-03f));
    p = V::fma(p, z, V::set1(1.304281327e-02f));
    p = V::fma(p, z, V::set1(-2.656463926e-02f));
    p = V::fma(p, z, V::set1(4.780303076e-02f));
    p = V::fma(p, z, V::set1(-7.482651024e-02f));
    p = V::fma(p, z, V::set1(1.004585768e-01f));
    p = V::fma(p, z, V::set1(-1.148092302e-01f));
    p = V::fma(p, z, V::set1(1.143892448e-01f));
    p = V::fma(p, z, V::set1(-1.135489843e-01f));
    p = V::fma(p, z, V::set1(1.832566637e-01f));
    return V::fma(x, p, V::set1(0.5f));
  }
  static R gelu(R x) {
    const R y = gelu_poly(x, V::mul(x, x));
    const M far = V::gt(V::abs(x), V::set1(4.f));   // NaN: false (the polynomial propagates it)
    if (!V::any(far)) return y;
    R E;
    return V::select(far, V::mul(x, normal_cdf(x, E)), y);
  }
  static R gelu_grad(R x) {
    const R d = gelu_grad_poly(x, V::mul(x, x));
    const M far = V::gt(V::abs(x), V::set1(4.f));
    if (!V::any(far)) return d;
    R E;
    const R cdf = normal_cdf(x, E);
    return V::select(far, V::fma(V::mul(x, E), V::set1(0.398942280401432678f), cdf), d);
  }
  // tanh form: 0.5 x (1 + tanh(k (x + 0.044715 x^3))) = x s, s = sigmoid(2 k (x + 0.044715 x^3)),
  // computed as 1 / (1 + e^{-2u}) (no cancellation for negative x).
  static constexpr float kGeluK = 0.797884560802865355f;   // sqrt(2 / pi)
  static R gelu_tanh(R x) {
    const R x2 = V::mul(x, x);
    const R u = V::mul(V::mul(x, V::set1(kGeluK)), V::fma(x2, V::set1(0.044715f), V::set1(1.f)));
    const R s = V::div(V::set1(1.f), V::add(V::set1(1.f), exp(V::mul(u, V::set1(-2.f)))));
    return V::mul(x, s);
  }
  // d/dx [x s] = s + 2 x s (1 - s) du/dx, du/dx = k (1 + 3 * 0.044715 x^2), with
  // 1 - s = z s (z = e^{-2u}) to avoid the cancellation of 1 - s as s -> 1.
  static R gelu_tanh_grad(R x) {
    const R x2 = V::mul(x, x);
    const R u = V::mul(V::mul(x, V::set1(kGeluK)), V::fma(x2, V::set1(0.044715f), V::set1(1.f)));
    const R z = exp(V::mul(u, V::set1(-2.f)));
    const R s = V::div(V::set1(1.f), V::add(V::set1(1.f), z));
    const R oms = V::select(V::gt(z, V::set1(1e30f)), V::set1(1.f), V::mul(z, s));
    const R du = V::fma(x2, V::set1(kGeluK * 3.f * 0.044715f), V::set1(kGeluK));
    const R t = V::mul(V::mul(V::add(x, x), s), V::mul(oms, du));
    return V::add(s, t);
  }

  // ---------------- softmax ----------------

  static float row_max(const float* x, int64_t n) {
    R m0 = V::set1(-__builtin_inff()), m1 = m0;
    int64_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
      m0 = V::max(m0, V::load(x + i));
      m1 = V::max(m1, V::load(x + i + W));
    }
    for (; i + W <= n; i += W) m0 = V::max(m0, V::load(x + i));
    if (i < n) m0 = V::max(m0, V::load_tail(x + i, V::tail_mask(n - i), -__builtin_inff()));
    return V::hmax(V::max(m0, m1));
  }

  static float row_sum(const float* x, int64_t n) {
    R s0 = V::zero(), s1 = V::zero();
    int64_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
      s0 = V::add(s0, V::load(x + i));
      s1 = V::add(s1, V::load(x + i + W));
    }
    for (; i + W <= n; i += W) s0 = V::add(s0, V::load(x + i));
    if (i < n) s0 = V::add(s0, V::load_tail(x + i, V::tail_mask(n - i), 0.f));
    return V::hsum(V::add(s0, s1));
  }

  // Sum of exp(x - mx) over the row; stores the exponentials to y when y is non-null.
  static float row_sum_exp(const float* x, float* y, int64_t n, float mx) {
    const R vm = V::set1(mx);
    R s0 = V::zero(), s1 = V::zero();
    int64_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
      const R e0 = exp(V::sub(V::load(x + i), vm));
      const R e1 = exp(V::sub(V::load(x + i + W), vm));
      if (y) { V::store(y + i, e0); V::store(y + i + W, e1); }
      s0 = V::add(s0, e0);
      s1 = V::add(s1, e1);
    }
    for (; i + W <= n; i += W) {
      const R e = exp(V::sub(V::load(x + i), vm));
      if (y) V::store(y + i, e);
      s0 = V::add(s0, e);
    }
    if (i < n) {
      const M m = V::tail_mask(n - i);
      const R e = V::select(m, exp(V::sub(V::load_tail(x + i, m, 0.f), vm)), V::zero());
      if (y) V::store_tail(y + i, e, m);
      s0 = V::add(s0, e);
    }
    return V::hsum(V::add(s0, s1));
  }

  // y = a * x + c over n elements (in place allowed).
  static void row_affine(const float* x, float* y, int64_t n, float a, float c) {
    const R va = V::set1(a), vc = V::set1(c);
    int64_t i = 0;
    for (; i + W <= n; i += W) V::store(y + i, V::fma(V::load(x + i), va, vc));
    if (i < n) {
      const M m = V::tail_mask(n - i);
      V::store_tail(y + i, V::fma(V::load_tail(x + i, m, 0.f), va, vc), m);
    }
  }

  static void softmax_fwd(const float* x, float* y, int64_t rows, int64_t n, bool log) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * n;
      float* yr = y + r * n;
      const float mx = row_max(xr, n);
      if (!log) {
        const float sum = row_sum_exp(xr, yr, n, mx);
        row_affine(yr, yr, n, 1.f / sum, 0.f);
      } else {
        // y = (x - max) - log(sum): an all -inf or +inf row gives NaN (max - max), as PyTorch.
        const float sum = row_sum_exp(xr, nullptr, n, mx);
        const R vm = V::set1(mx), vl = V::set1(__builtin_logf(sum));
        int64_t i = 0;
        for (; i + W <= n; i += W) V::store(yr + i, V::sub(V::sub(V::load(xr + i), vm), vl));
        if (i < n) {
          const M m = V::tail_mask(n - i);
          V::store_tail(yr + i, V::sub(V::sub(V::load_tail(xr + i, m, 0.f), vm), vl), m);
        }
      }
    }
  }

  // softmax: dx = y (dy - sum(dy y));  log_softmax: dx = dy - exp(y) sum(dy).
  static void softmax_bwd(const float* dy, const float* y, float* dx, int64_t rows, int64_t n, bool log) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* gr = dy + r * n;
      const float* yr = y + r * n;
      float* dr = dx + r * n;
      R s0 = V::zero(), s1 = V::zero();
      int64_t i = 0;
      if (!log) {
        for (; i + 2 * W <= n; i += 2 * W) {
          s0 = V::fma(V::load(gr + i), V::load(yr + i), s0);
          s1 = V::fma(V::load(gr + i + W), V::load(yr + i + W), s1);
        }
        for (; i + W <= n; i += W) s0 = V::fma(V::load(gr + i), V::load(yr + i), s0);
        if (i < n) {
          const M m = V::tail_mask(n - i);
          s0 = V::fma(V::load_tail(gr + i, m, 0.f), V::load_tail(yr + i, m, 0.f), s0);
        }
        const R dot = V::set1(V::hsum(V::add(s0, s1)));
        for (i = 0; i + W <= n; i += W) {
          const R yv = V::load(yr + i);
          V::store(dr + i, V::mul(yv, V::sub(V::load(gr + i), dot)));
        }
        if (i < n) {
          const M m = V::tail_mask(n - i);
          const R yv = V::load_tail(yr + i, m, 0.f);
          V::store_tail(dr + i, V::mul(yv, V::sub(V::load_tail(gr + i, m, 0.f), dot)), m);
        }
      } else {
        const R sg = V::set1(row_sum(gr, n));
        for (; i + W <= n; i += W)
          V::store(dr + i, V::fnma(exp(V::load(yr + i)), sg, V::load(gr + i)));
        if (i < n) {
          const M m = V::tail_mask(n - i);
          V::store_tail(dr + i, V::fnma(exp(V::load_tail(yr + i, m, 0.f)), sg, V::load_tail(gr + i, m, 0.f)), m);
        }
      }
    }
  }

  // ---------------- cross-entropy rows ----------------

  // Per row r of x (rows x n): mx[r] = max, se[r] = sum of exp(x - max), and, when sx is non-null,
  // sx[r] = sum of x (label smoothing's term). Summed in float within blocks of 1,024 columns and
  // across blocks in double, so long rows (a vocabulary of 8,000) keep ~1e-7 relative at any ISA.
  // The caller forms lse = mx + log(se).
  static void ce_stats(const float* x, int64_t rows, int64_t n, float* mx, double* se, double* sx) {
    constexpr int64_t kBlock = 1024;
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * n;
      mx[r] = row_max(xr, n);
      double e = 0, t = 0;
      for (int64_t b = 0; b < n; b += kBlock) {
        const float* xb = xr + b;
        const int64_t len = n - b < kBlock ? n - b : kBlock;
        e += double(row_sum_exp(xb, nullptr, len, mx[r]));
        if (sx) t += double(row_sum(xb, len));
      }
      se[r] = e;
      if (sx) sx[r] = t;
    }
  }

  // dx = g * (exp(x - lse) - off) over a row of n, lse given as lhi + llo (llo the part a float
  // lhi loses, so large logits keep their digits).
  static void ce_grad(const float* x, float* dx, int64_t n, float lhi, float llo, float g, float off) {
    const R vh = V::set1(lhi), vl = V::set1(-llo), vg = V::set1(g), vo = V::set1(off);
    int64_t i = 0;
    for (; i + W <= n; i += W)
      V::store(dx + i, V::mul(vg, V::sub(exp2part(V::sub(V::load(x + i), vh), vl), vo)));
    if (i < n) {
      const M m = V::tail_mask(n - i);
      V::store_tail(dx + i, V::mul(vg, V::sub(exp2part(V::sub(V::load_tail(x + i, m, 0.f), vh), vl), vo)), m);
    }
  }

  // ---------------- layer norm ----------------

  static void layer_norm_fwd(const float* x, const float* res, const float* w, const float* b, float* s,
                             float* y, float* mean, float* rstd, int64_t rows, int64_t C, float eps) {
    const float inv_c = 1.f / float(C);
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * C;
      float* yr = y + r * C;
      // Pass 1: the sum (and s = x + res, stored), then the row is read back from cache. Values
      // are summed relative to the row's first one, so a large common offset costs no precision.
      const float shift = res ? xr[0] + res[r * C] : xr[0];
      const R vsh = V::set1(shift);
      R a0 = V::zero(), a1 = V::zero();
      int64_t i = 0;
      const float* src = xr;
      if (res) {
        const float* rr = res + r * C;
        float* sr = s + r * C;
        for (; i + 2 * W <= C; i += 2 * W) {
          const R v0 = V::add(V::load(xr + i), V::load(rr + i));
          const R v1 = V::add(V::load(xr + i + W), V::load(rr + i + W));
          V::store(sr + i, v0);
          V::store(sr + i + W, v1);
          a0 = V::add(a0, V::sub(v0, vsh));
          a1 = V::add(a1, V::sub(v1, vsh));
        }
        for (; i + W <= C; i += W) {
          const R v = V::add(V::load(xr + i), V::load(rr + i));
          V::store(sr + i, v);
          a0 = V::add(a0, V::sub(v, vsh));
        }
        if (i < C) {
          const M m = V::tail_mask(C - i);
          const R v = V::add(V::load_tail(xr + i, m, 0.f), V::load_tail(rr + i, m, 0.f));
          V::store_tail(sr + i, v, m);
          a0 = V::add(a0, V::select(m, V::sub(v, vsh), V::zero()));
        }
        src = sr;
      } else {
        for (; i + 2 * W <= C; i += 2 * W) {
          a0 = V::add(a0, V::sub(V::load(xr + i), vsh));
          a1 = V::add(a1, V::sub(V::load(xr + i + W), vsh));
        }
        for (; i + W <= C; i += W) a0 = V::add(a0, V::sub(V::load(xr + i), vsh));
        if (i < C) {
          const M m = V::tail_mask(C - i);
          a0 = V::add(a0, V::select(m, V::sub(V::load_tail(xr + i, m, 0.f), vsh), V::zero()));
        }
      }
      // The mean is shift + mrel; deviations are taken as (x - shift) - mrel, which keeps the
      // precision a rounded mean would lose when |mean| >> std.
      const float mrel = V::hsum(V::add(a0, a1)) * inv_c;
      const R vsh_m = V::set1(mrel);
      // Pass 2: variance about the mean (two-pass: no cancellation).
      a0 = V::zero();
      a1 = V::zero();
      for (i = 0; i + 2 * W <= C; i += 2 * W) {
        const R d0 = V::sub(V::sub(V::load(src + i), vsh), vsh_m);
        const R d1 = V::sub(V::sub(V::load(src + i + W), vsh), vsh_m);
        a0 = V::fma(d0, d0, a0);
        a1 = V::fma(d1, d1, a1);
      }
      for (; i + W <= C; i += W) {
        const R d = V::sub(V::sub(V::load(src + i), vsh), vsh_m);
        a0 = V::fma(d, d, a0);
      }
      if (i < C) {
        const M m = V::tail_mask(C - i);
        const R d = V::select(m, V::sub(V::sub(V::load_tail(src + i, m, 0.f), vsh), vsh_m), V::zero());
        a0 = V::fma(d, d, a0);
      }
      const float var = V::hsum(V::add(a0, a1)) * inv_c;
      const float rs = 1.f / __builtin_sqrtf(var + eps);
      mean[r] = shift + mrel;
      rstd[r] = rs;
      // Pass 3: y = (s - mean) * rstd * w + b.
      const R vrs = V::set1(rs);
      for (i = 0; i + W <= C; i += W) {
        const R xh = V::mul(V::sub(V::sub(V::load(src + i), vsh), vsh_m), vrs);
        V::store(yr + i, V::fma(xh, V::load(w + i), V::load(b + i)));
      }
      if (i < C) {
        const M m = V::tail_mask(C - i);
        const R xh = V::mul(V::sub(V::sub(V::load_tail(src + i, m, 0.f), vsh), vsh_m), vrs);
        V::store_tail(yr + i, V::fma(xh, V::load_tail(w + i, m, 0.f), V::load_tail(b + i, m, 0.f)), m);
      }
    }
  }

  // dx = rstd (dy w - mean(dy w) - xhat mean(dy w xhat)), xhat = (x - mean) rstd;
  // dw += dy xhat, db += dy.
  // Pass 1 of a row: ma = mean(dy w), mb = mean(dy w xhat). Four partial sums each: with two,
  // every vector waited on the previous FMA's latency.
  static void ln_bwd_means(const float* gr, const float* xr, const float* w, float mu, float rs, int64_t C,
                           float& ma, float& mb) {
    const R vmu = V::set1(mu);
    R a0 = V::zero(), a1 = V::zero(), a2 = V::zero(), a3 = V::zero();
    R b0 = V::zero(), b1 = V::zero(), b2 = V::zero(), b3 = V::zero();
    int64_t i = 0;
    for (; i + 4 * W <= C; i += 4 * W) {
      const R g0 = V::mul(V::load(gr + i), V::load(w + i));
      const R g1 = V::mul(V::load(gr + i + W), V::load(w + i + W));
      const R g2 = V::mul(V::load(gr + i + 2 * W), V::load(w + i + 2 * W));
      const R g3 = V::mul(V::load(gr + i + 3 * W), V::load(w + i + 3 * W));
      a0 = V::add(a0, g0);
      a1 = V::add(a1, g1);
      a2 = V::add(a2, g2);
      a3 = V::add(a3, g3);
      b0 = V::fma(g0, V::sub(V::load(xr + i), vmu), b0);
      b1 = V::fma(g1, V::sub(V::load(xr + i + W), vmu), b1);
      b2 = V::fma(g2, V::sub(V::load(xr + i + 2 * W), vmu), b2);
      b3 = V::fma(g3, V::sub(V::load(xr + i + 3 * W), vmu), b3);
    }
    for (; i + W <= C; i += W) {
      const R gw = V::mul(V::load(gr + i), V::load(w + i));
      a0 = V::add(a0, gw);
      b0 = V::fma(gw, V::sub(V::load(xr + i), vmu), b0);
    }
    if (i < C) {
      const M m = V::tail_mask(C - i);
      const R gw = V::mul(V::load_tail(gr + i, m, 0.f), V::load_tail(w + i, m, 0.f));
      a1 = V::add(a1, gw);
      b1 = V::fma(gw, V::select(m, V::sub(V::load_tail(xr + i, m, 0.f), vmu), V::zero()), b1);
    }
    const float inv_c = 1.f / float(C);
    ma = V::hsum(V::add(V::add(a0, a1), V::add(a2, a3))) * inv_c;
    mb = V::hsum(V::add(V::add(b0, b1), V::add(b2, b3))) * inv_c * rs;
  }

  // Per-row constants of pass 2: dx = rs dy w + k (x - mean) + c, k = -rs^2 mb, c = -rs ma.
  struct LnRow {
    const float* g;
    const float* x;
    float* dx;
    R mu, rs, k, c;
  };
  static LnRow ln_row(const float* dy, const float* x, float* dx, const float* mean, const float* rstd,
                      const float* w, int64_t r, int64_t C) {
    float ma, mb;
    const float mu = mean[r], rs = rstd[r];
    ln_bwd_means(dy + r * C, x + r * C, w, mu, rs, C, ma, mb);
    return {dy + r * C, x + r * C, dx + r * C, V::set1(mu), V::set1(rs), V::set1(-rs * rs * mb), V::set1(-rs * ma)};
  }
  // dx of one vector of a row; d = x - mean is returned for the dw sum.
  static R ln_dx(const LnRow& q, R wv, R g, R x, R& d) {
    d = V::sub(x, q.mu);
    return V::fma(q.rs, V::mul(g, wv), V::fma(q.k, d, q.c));
  }

  template <bool kAcc>
  static void layer_norm_bwd_rows(const float* dy, const float* x, const float* mean, const float* rstd,
                                  const float* w, float* dx, float* dw_acc, float* db_acc, int64_t rows,
                                  int64_t C) {
    int64_t r = 0;
    // With the dw / db sums, rows go in pairs so the partial sums are loaded and stored once per
    // two rows (the store port is the bottleneck of this loop).
    if constexpr (kAcc) {
      for (; r + 1 < rows; r += 2) {
        const LnRow p = ln_row(dy, x, dx, mean, rstd, w, r, C);
        const LnRow q = ln_row(dy, x, dx, mean, rstd, w, r + 1, C);
        int64_t i = 0;
        for (; i + W <= C; i += W) {
          const R wv = V::load(w + i);
          const R gp = V::load(p.g + i), gq = V::load(q.g + i);
          R dp, dq;
          V::store(p.dx + i, ln_dx(p, wv, gp, V::load(p.x + i), dp));
          V::store(q.dx + i, ln_dx(q, wv, gq, V::load(q.x + i), dq));
          const R sw = V::fma(V::mul(gp, dp), p.rs, V::fma(V::mul(gq, dq), q.rs, V::load(dw_acc + i)));
          V::store(dw_acc + i, sw);
          V::store(db_acc + i, V::add(V::add(gp, gq), V::load(db_acc + i)));
        }
        if (i < C) {
          const M m = V::tail_mask(C - i);
          const R wv = V::load_tail(w + i, m, 0.f);
          const R gp = V::load_tail(p.g + i, m, 0.f), gq = V::load_tail(q.g + i, m, 0.f);
          R dp, dq;
          V::store_tail(p.dx + i, ln_dx(p, wv, gp, V::load_tail(p.x + i, m, 0.f), dp), m);
          V::store_tail(q.dx + i, ln_dx(q, wv, gq, V::load_tail(q.x + i, m, 0.f), dq), m);
          const R sw = V::fma(V::mul(gp, dp), p.rs, V::fma(V::mul(gq, dq), q.rs, V::load_tail(dw_acc + i, m, 0.f)));
          V::store_tail(dw_acc + i, sw, m);
          V::store_tail(db_acc + i, V::add(V::add(gp, gq), V::load_tail(db_acc + i, m, 0.f)), m);
        }
      }
    }
    for (; r < rows; ++r) {
      const LnRow p = ln_row(dy, x, dx, mean, rstd, w, r, C);
      int64_t i = 0;
      for (; i + W <= C; i += W) {
        const R g = V::load(p.g + i);
        R d;
        V::store(p.dx + i, ln_dx(p, V::load(w + i), g, V::load(p.x + i), d));
        if constexpr (kAcc) {
          V::store(dw_acc + i, V::fma(V::mul(g, d), p.rs, V::load(dw_acc + i)));
          V::store(db_acc + i, V::add(g, V::load(db_acc + i)));
        }
      }
      if (i < C) {
        const M m = V::tail_mask(C - i);
        const R g = V::load_tail(p.g + i, m, 0.f);
        R d;
        V::store_tail(p.dx + i, ln_dx(p, V::load_tail(w + i, m, 0.f), g, V::load_tail(p.x + i, m, 0.f), d), m);
        if constexpr (kAcc) {
          V::store_tail(dw_acc + i, V::fma(V::mul(g, d), p.rs, V::load_tail(dw_acc + i, m, 0.f)), m);
          V::store_tail(db_acc + i, V::add(g, V::load_tail(db_acc + i, m, 0.f)), m);
        }
      }
    }
  }

  static void layer_norm_bwd(const float* dy, const float* x, const float* mean, const float* rstd,
                             const float* w, float* dx, float* dw_acc, float* db_acc, int64_t rows, int64_t C) {
    if (dw_acc && db_acc) layer_norm_bwd_rows<true>(dy, x, mean, rstd, w, dx, dw_acc, db_acc, rows, C);
    else layer_norm_bwd_rows<false>(dy, x, mean, rstd, w, dx, nullptr, nullptr, rows, C);
  }

  // ---------------- GELU ----------------

  template <bool kTanh>
  static R gelu_f(R v) { if constexpr (kTanh) return gelu_tanh(v); else return gelu(v); }
  template <bool kTanh>
  static R gelu_g(R v) { if constexpr (kTanh) return gelu_tanh_grad(v); else return gelu_grad(v); }

  template <bool kTanh, bool kBias>
  static void gelu_fwd_rows(const float* x, const float* bias, float* y, int64_t rows, int64_t C) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * C;
      float* yr = y + r * C;
      int64_t i = 0;
      for (; i + 2 * W <= C; i += 2 * W) {
        R v0 = V::load(xr + i), v1 = V::load(xr + i + W);
        if constexpr (kBias) {
          v0 = V::add(v0, V::load(bias + i));
          v1 = V::add(v1, V::load(bias + i + W));
        }
        V::store(yr + i, gelu_f<kTanh>(v0));
        V::store(yr + i + W, gelu_f<kTanh>(v1));
      }
      for (; i + W <= C; i += W) {
        R v = V::load(xr + i);
        if constexpr (kBias) v = V::add(v, V::load(bias + i));
        V::store(yr + i, gelu_f<kTanh>(v));
      }
      if (i < C) {
        const M m = V::tail_mask(C - i);
        R v = V::load_tail(xr + i, m, 0.f);
        if constexpr (kBias) v = V::add(v, V::load_tail(bias + i, m, 0.f));
        V::store_tail(yr + i, gelu_f<kTanh>(v), m);
      }
    }
  }

  template <bool kTanh, bool kBias, bool kAcc>
  static void gelu_bwd_rows(const float* dy, const float* x, const float* bias, float* dx, float* db_acc,
                            int64_t rows, int64_t C) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* gr = dy + r * C;
      const float* xr = x + r * C;
      float* dr = dx + r * C;
      int64_t i = 0;
      for (; i + W <= C; i += W) {
        R v = V::load(xr + i);
        if constexpr (kBias) v = V::add(v, V::load(bias + i));
        const R d = V::mul(V::load(gr + i), gelu_g<kTanh>(v));
        V::store(dr + i, d);
        if constexpr (kAcc) V::store(db_acc + i, V::add(V::load(db_acc + i), d));
      }
      if (i < C) {
        const M m = V::tail_mask(C - i);
        R v = V::load_tail(xr + i, m, 0.f);
        if constexpr (kBias) v = V::add(v, V::load_tail(bias + i, m, 0.f));
        const R d = V::mul(V::load_tail(gr + i, m, 0.f), gelu_g<kTanh>(v));
        V::store_tail(dr + i, d, m);
        if constexpr (kAcc) V::store_tail(db_acc + i, V::add(V::load_tail(db_acc + i, m, 0.f), d), m);
      }
    }
  }

  static void gelu_fwd(const float* x, const float* bias, float* y, int64_t rows, int64_t C, bool tanh) {
    if (tanh) {
      if (bias) gelu_fwd_rows<true, true>(x, bias, y, rows, C);
      else gelu_fwd_rows<true, false>(x, bias, y, rows, C);
    } else {
      if (bias) gelu_fwd_rows<false, true>(x, bias, y, rows, C);
      else gelu_fwd_rows<false, false>(x, bias, y, rows, C);
    }
  }

  static void gelu_bwd(const float* dy, const float* x, const float* bias, float* dx, float* db_acc,
                       int64_t rows, int64_t C, bool tanh) {
    if (tanh) {
      if (!bias) gelu_bwd_rows<true, false, false>(dy, x, bias, dx, nullptr, rows, C);
      else if (db_acc) gelu_bwd_rows<true, true, true>(dy, x, bias, dx, db_acc, rows, C);
      else gelu_bwd_rows<true, true, false>(dy, x, bias, dx, nullptr, rows, C);
    } else {
      if (!bias) gelu_bwd_rows<false, false, false>(dy, x, bias, dx, nullptr, rows, C);
      else if (db_acc) gelu_bwd_rows<false, true, true>(dy, x, bias, dx, db_acc, rows, C);
      else gelu_bwd_rows<false, true, false>(dy, x, bias, dx, nullptr, rows, C);
    }
  }
};

}  // namespace
}  // namespace attn::kernels

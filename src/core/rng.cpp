// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011) and the
// sampling functions built on it.
#include "attn/core/rng.h"

#include <cmath>
#include <numeric>

#include "attn/core/parallel.h"

namespace attn {

void philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4]) {
  uint32_t c0 = uint32_t(counter), c1 = uint32_t(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = uint64_t(M0) * c0, p1 = uint64_t(M1) * c2;
    const uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0, n1 = uint32_t(p1);
    const uint32_t n2 = uint32_t(p0 >> 32) ^ c3 ^ k1, n3 = uint32_t(p0);
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += W0; k1 += W1;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

static inline float u32_to_unit_float(uint32_t x) { return float(x >> 8) * (1.0f / 16777216.0f); }

float philox_uniform(uint64_t seed, uint64_t offset, uint64_t index) {
  uint32_t r[4];
  philox4x32(seed, offset + index / 4, r);
  return u32_to_unit_float(r[index % 4]);
}

uint64_t Generator::next_u64() {
  uint32_t r[4];
  philox4x32(seed_, offset_++, r);
  return (uint64_t(r[0]) << 32) | r[1];
}

double Generator::uniform() { return double(next_u64() >> 11) * (1.0 / 9007199254740992.0); }

double Generator::normal() {
  // Box-Muller on one counter: two 53-bit uniforms from four u32.
  uint32_t r[4];
  philox4x32(seed_, offset_++, r);
  double u1 = (double((uint64_t(r[0]) << 21) ^ (r[1] >> 11)) + 1.0) * (1.0 / 9007199254740993.0);
  double u2 = double((uint64_t(r[2]) << 21) ^ (r[3] >> 11)) * (1.0 / 9007199254740992.0);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

int64_t Generator::randint(int64_t n) {
  ATTN_CHECK(n > 0, "randint: expected n > 0, got ", n);
  return int64_t(next_u64() % uint64_t(n));
}

Generator& default_generator() {
  static Generator g(0);
  return g;
}

void manual_seed(uint64_t seed) { default_generator().set_state(seed, 0); }

// Fills a fresh tensor with values computed per element index from one reserved counter range,
// so the result does not depend on the thread count.
template <class F>
static Tensor fill_indexed(const Shape& shape, DType dtype, const char* op, F f) {
  Tensor t = Tensor::empty(shape, dtype);
  if (t.is_shapes_only()) return t;   // nothing to fill (ShapesOnlyGuard)
  const int64_t n = t.numel();
  ATTN_DISPATCH_FLOAT(dtype, op, [&] {
    T* p = t.data<T>();
    parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) p[i] = T(f(i));
    });
  });
  return t;
}

Tensor rand(const Shape& shape, Generator& g, DType dtype) { return uniform(shape, 0.0, 1.0, g, dtype); }

Tensor uniform(const Shape& shape, double lo, double hi, Generator& g, DType dtype) {
  const uint64_t seed = g.seed(), off = g.reserve(uint64_t(shape_numel(shape)));
  return fill_indexed(shape, dtype, "uniform", [&](int64_t i) {
    uint32_t r[4];
    philox4x32(seed, off + uint64_t(i), r);
    double u = double((uint64_t(r[0]) << 21) ^ (r[1] >> 11)) * (1.0 / 9007199254740992.0);
    return lo + (hi - lo) * u;
  });
}

static double normal_at(uint64_t seed, uint64_t counter) {
  uint32_t r[4];
  philox4x32(seed, counter, r);
  double u1 = (double((uint64_t(r[0]) << 21) ^ (r[1] >> 11)) + 1.0) * (1.0 / 9007199254740993.0);
  double u2 = double((uint64_t(r[2]) << 21) ^ (r[3] >> 11)) * (1.0 / 9007199254740992.0);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

Tensor randn(const Shape& shape, Generator& g, DType dtype) { return normal(shape, 0.0, 1.0, g, dtype); }

Tensor normal(const Shape& shape, double mean, double std, Generator& g, DType dtype) {
  const uint64_t seed = g.seed(), off = g.reserve(uint64_t(shape_numel(shape)));
  return fill_indexed(shape, dtype, "normal", [&](int64_t i) { return mean + std * normal_at(seed, off + uint64_t(i)); });
}

// 1 where philox_uniform(seed, off + i) < p, else 0.
static Tensor bernoulli_from(const Shape& shape, double p, uint64_t seed, uint64_t off, DType dtype, const char* op) {
  return fill_indexed(shape, dtype, op, [&](int64_t i) {
    uint32_t r[4];
    philox4x32(seed, off + uint64_t(i), r);
    double u = double((uint64_t(r[0]) << 21) ^ (r[1] >> 11)) * (1.0 / 9007199254740992.0);
    return u < p ? 1.0 : 0.0;
  });
}

Tensor bernoulli(const Shape& shape, double p, Generator& g, DType dtype) {
  ATTN_CHECK(p >= 0.0 && p <= 1.0, "bernoulli: expected p in [0, 1], got ", p);
  const uint64_t seed = g.seed(), off = g.reserve(uint64_t(shape_numel(shape)));
  return bernoulli_from(shape, p, seed, off, dtype, "bernoulli");
}

Tensor bernoulli_batch(const Shape& shape, double p, Generator& g, DType dtype) {
  ATTN_CHECK(p >= 0.0 && p <= 1.0, "bernoulli_batch: expected p in [0, 1], got ", p);
  const uint64_t seed = g.seed(), off = g.reserve_batch(uint64_t(shape_numel(shape)));
  return bernoulli_from(shape, p, seed, off, dtype, "bernoulli_batch");
}

Tensor randperm(int64_t n, Generator& g) {
  ATTN_CHECK(n >= 0, "randperm: expected n >= 0, got ", n);
  Tensor t = Tensor::empty({n}, DType::i64);
  if (t.is_shapes_only()) return t;
  int64_t* p = t.data<int64_t>();
  std::iota(p, p + n, int64_t(0));
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[g.randint(i + 1)]);  // Fisher-Yates
  return t;
}

// Inverse of the standard normal CDF via erfinv-style Newton refinement on erf.
static double norm_cdf(double x) { return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))); }
// Acklam's rational approximation (relative error < 1.2e-9, below a float's half ulp of 3e-8 except
// within that margin of a rounding boundary), then `newton` Newton steps on the exact CDF (double
// precision needs them; each costs an erf and an exp, most of the time of initialising a model).
static double norm_icdf(double p, int newton) {
  double x;
  if (p <= 0) return -INFINITY;
  if (p >= 1) return INFINITY;
  const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                      1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
  const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                      6.680131188771972e+01, -1.328068155288572e+01};
  const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                      -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00};
  const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                      3.754408661907416e+00};
  if (p < 0.02425) {
    double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p > 1 - 0.02425) {
    double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else {
    double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  for (int it = 0; it < newton; ++it) {
    double e = norm_cdf(x) - p;
    double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
    if (pdf > 0) x -= e / pdf;
  }
  return x;
}

Tensor trunc_normal(const Shape& shape, double mean, double std, double a, double b, Generator& g,
                    DType dtype) {
  ATTN_CHECK(std > 0 && a < b, "trunc_normal: expected std > 0 and a < b, got std=", std, " a=", a,
             " b=", b);
  const double lo = norm_cdf((a - mean) / std), hi = norm_cdf((b - mean) / std);
  const uint64_t seed = g.seed(), off = g.reserve(uint64_t(shape_numel(shape)));
  const int newton = dtype == DType::f64 ? 2 : 0;   // f32 / bf16 values: the approximation suffices
  return fill_indexed(shape, dtype, "trunc_normal", [&](int64_t i) {
    uint32_t r[4];
    philox4x32(seed, off + uint64_t(i), r);
    double u = double((uint64_t(r[0]) << 21) ^ (r[1] >> 11)) * (1.0 / 9007199254740992.0);
    double v = mean + std * norm_icdf(lo + (hi - lo) * u, newton);
    return std::min(std::max(v, a), b);
  });
}

}  // namespace attn

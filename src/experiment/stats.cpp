// Means, Student's t intervals and verdicts (attn/experiment/stats.h).
#include "attn/experiment/stats.h"

#include <cmath>

#include "attn/core/error.h"

namespace attn::experiment {

Summary summarize(const std::vector<double>& values) {
  ATTN_CHECK(!values.empty(), "summarize: expected at least one value, got none");
  Summary s;
  s.n = int(values.size());
  for (double v : values) {
    ATTN_CHECK(std::isfinite(v), "summarize: expected finite values, got ", v);
    s.mean += v;
  }
  s.mean /= s.n;
  if (s.n > 1) {
    double ss = 0;
    for (double v : values) ss += (v - s.mean) * (v - s.mean);
    s.sd = std::sqrt(ss / (s.n - 1));
  }
  return s;
}

namespace {

// The continued fraction of I_x(a, b) (modified Lentz), valid for x < (a + 1) / (a + b + 2).
double beta_fraction(double a, double b, double x) {
  constexpr double tiny = 1e-300, eps = 1e-15;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  if (std::fabs(d) < tiny) d = tiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 500; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    d = 1 + aa * d;
    if (std::fabs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < eps) break;
  }
  return h;
}

// P(T <= t) for Student's t with df degrees of freedom.
double student_t_cdf(double t, double df) {
  const double x = df / (df + t * t);
  const double tail = 0.5 * incomplete_beta(0.5 * df, 0.5, x);   // P(|T| >= |t|) / 2
  return t >= 0 ? 1 - tail : tail;
}

}  // namespace

double incomplete_beta(double a, double b, double x) {
  ATTN_CHECK(a > 0 && b > 0 && x >= 0 && x <= 1, "incomplete_beta: expected a, b > 0 and x in [0, 1], got ", a, ", ",
             b, ", ", x);
  if (x == 0 || x == 1) return x;
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) +
                                b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * beta_fraction(a, b, x) / a;
  return 1 - front * beta_fraction(b, a, 1 - x) / b;
}

double student_t_quantile(double p, double df) {
  ATTN_CHECK(p > 0 && p < 1 && df >= 1, "student_t_quantile: expected p in (0, 1) and df >= 1, got ", p, " and ", df);
  if (p == 0.5) return 0;
  if (p < 0.5) return -student_t_quantile(1 - p, df);
  double lo = 0, hi = 1;
  while (student_t_cdf(hi, df) < p) hi *= 2;   // df = 1, p = 0.9995: 636.6
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (student_t_cdf(mid, df) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

Interval mean_interval(const std::vector<double>& values, double level) {
  ATTN_CHECK(level > 0 && level < 1, "mean_interval: expected a level in (0, 1), got ", level);
  const Summary s = summarize(values);
  Interval ci;
  ci.estimate = ci.lo = ci.hi = s.mean;
  ci.n = s.n;
  if (s.n < 2) return ci;
  const double half = student_t_quantile(0.5 + 0.5 * level, s.n - 1) * s.sd / std::sqrt(double(s.n));
  ci.lo = s.mean - half;
  ci.hi = s.mean + half;
  ci.defined = true;
  return ci;
}

Verdict judge(Direction d, double delta, const Interval& ci) {
  if (!ci.defined) return Verdict::not_shown;
  if (d == Direction::better) {
    if (ci.lo > 0) return Verdict::supported;
    if (ci.hi < 0) return Verdict::contradicted;
    return Verdict::not_shown;
  }
  ATTN_CHECK(delta > 0, "judge: an 'equal' sub-claim needs a positive delta, got ", delta);
  if (ci.lo > -delta && ci.hi < delta) return Verdict::supported;
  if (ci.lo > delta || ci.hi < -delta) return Verdict::contradicted;
  return Verdict::not_shown;
}

const char* verdict_name(Verdict v) {
  return v == Verdict::supported ? "supported" : v == Verdict::contradicted ? "contradicted" : "not shown";
}

const char* direction_name(Direction d) { return d == Direction::better ? "better" : "equal"; }

}  // namespace attn::experiment

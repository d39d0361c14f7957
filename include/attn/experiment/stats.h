// The statistics of an experiment's table: a mean over seeds with its standard deviation, a 95%
// interval from Student's t, and the verdict a sub-claim gets from its interval.
//
//   experiment::Summary s = experiment::summarize({91.2, 90.8, 91.5});   // mean 91.17, sd 0.35, n 3
//   experiment::Interval ci = experiment::mean_interval({0.4, 0.9, 0.2});   // the paired differences' mean
//   experiment::judge(experiment::Direction::better, 0, ci);            // supported: ci.lo > 0
//   experiment::student_t_quantile(0.975, 2);                           // 4.3027
#pragma once
#include <string>
#include <vector>

namespace attn::experiment {

struct Summary {
  double mean = 0, sd = 0;   // sd: the sample standard deviation (n - 1); 0 for one value
  int n = 0;
};
// Throws attn::Error on an empty list or a non-finite value.
Summary summarize(const std::vector<double>& values);

// The p-quantile of Student's t with df degrees of freedom (p in (0, 1), df >= 1), to about 1e-10:
// bisection on the distribution function, written through the regularized incomplete beta function.
double student_t_quantile(double p, double df);
// The regularized incomplete beta function I_x(a, b) (Lentz's continued fraction).
double incomplete_beta(double a, double b, double x);

struct Interval {
  double estimate = 0, lo = 0, hi = 0;   // lo = hi = estimate when n < 2 (no interval: `defined` false)
  int n = 0;
  bool defined = false;
};
// The mean of `values` with its two-sided `level` interval, mean ± t(n - 1) sd / sqrt(n). An experiment
// gives it the per-seed values of a contrast (variant minus baseline, seed by seed: a paired interval).
Interval mean_interval(const std::vector<double>& values, double level = 0.95);

// What a sub-claim says of its contrast: it is above zero (better), or inside ±delta (equal).
enum class Direction { better, equal };
enum class Verdict { supported, contradicted, not_shown };
// better: supported when the interval lies above zero, contradicted when below, else not shown. equal:
// supported when it lies inside (-delta, delta), contradicted when it lies wholly outside [-delta, delta],
// else not shown. An undefined interval (one seed) shows nothing.
Verdict judge(Direction d, double delta, const Interval& ci);
const char* verdict_name(Verdict v);   // "supported" | "contradicted" | "not shown"
const char* direction_name(Direction d);   // "better" | "equal"

}  // namespace attn::experiment

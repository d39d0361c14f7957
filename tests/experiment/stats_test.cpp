// The experiments' statistics: means and standard deviations, Student's t quantiles against published
// table values, the paired 95% interval, and every branch of the verdicts.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "attn/experiment/stats.h"
#include "errors.h"

using namespace attn;
using namespace attn::experiment;
using test::error_of;

TEST(ExperimentStats, SummarizeMeanAndSampleSd) {
  const Summary s = summarize({91.2, 90.8, 91.5});
  EXPECT_NEAR(s.mean, 91.1666666667, 1e-9);
  EXPECT_NEAR(s.sd, std::sqrt((0.0333333333 * 0.0333333333 + 0.3666666667 * 0.3666666667 +
                               0.3333333333 * 0.3333333333) / 2), 1e-9);
  EXPECT_EQ(s.n, 3);
  EXPECT_EQ(summarize({4.0}).sd, 0.0);
  EXPECT_EQ(error_of([] { summarize({}); }), "summarize: expected at least one value, got none");
  EXPECT_NE(error_of([] { summarize({1.0, NAN}); }).find("expected finite values"), std::string::npos);
}

// Two-sided 95% (p = 0.975) and 99% (p = 0.995) critical values of the standard t table.
TEST(ExperimentStats, StudentTQuantilesMatchTheTable) {
  const std::vector<std::pair<double, double>> p975 = {{1, 12.7062047362}, {2, 4.3026527297}, {3, 3.1824463053},
                                                       {4, 2.7764451052}, {9, 2.2621571628}, {29, 2.0452296421},
                                                       {1000, 1.9623390808}};
  for (auto [df, t] : p975) EXPECT_NEAR(student_t_quantile(0.975, df), t, 1e-7) << df;
  EXPECT_NEAR(student_t_quantile(0.995, 2), 9.9248432009, 1e-7);
  EXPECT_NEAR(student_t_quantile(0.995, 10), 3.1692726726, 1e-7);
  EXPECT_NEAR(student_t_quantile(0.025, 4), -2.7764451052, 1e-7);   // symmetric
  EXPECT_EQ(student_t_quantile(0.5, 3), 0.0);
  // df = 1 is the Cauchy distribution: tan(pi (p - 1/2)).
  EXPECT_NEAR(student_t_quantile(0.9, 1), std::tan(M_PI * 0.4), 1e-8);
  EXPECT_NE(error_of([] { student_t_quantile(1.0, 3); }).find("expected p in (0, 1)"), std::string::npos);
  // I_x(a, 1) = x^a, I_x(1, b) = 1 - (1 - x)^b.
  EXPECT_NEAR(incomplete_beta(2.5, 1, 0.3), std::pow(0.3, 2.5), 1e-12);
  EXPECT_NEAR(incomplete_beta(1, 3.5, 0.7), 1 - std::pow(0.3, 3.5), 1e-12);
}

TEST(ExperimentStats, PairedIntervalIsMeanPlusMinusTSdOverRootN) {
  const Interval ci = mean_interval({0.4, 0.9, 0.2});
  const double m = 0.5, sd = std::sqrt((0.01 + 0.16 + 0.09) / 2), half = 4.3026527297 * sd / std::sqrt(3.0);
  EXPECT_TRUE(ci.defined);
  EXPECT_EQ(ci.n, 3);
  EXPECT_NEAR(ci.estimate, m, 1e-12);
  EXPECT_NEAR(ci.lo, m - half, 1e-7);
  EXPECT_NEAR(ci.hi, m + half, 1e-7);
  const Interval one = mean_interval({1.5});
  EXPECT_FALSE(one.defined);
  EXPECT_EQ(one.lo, 1.5);
  EXPECT_EQ(judge(Direction::better, 0, one), Verdict::not_shown);
}

TEST(ExperimentStats, VerdictsFollowTheInterval) {
  auto ci = [](double lo, double hi) {
    Interval i;
    i.estimate = 0.5 * (lo + hi);
    i.lo = lo;
    i.hi = hi;
    i.n = 3;
    i.defined = true;
    return i;
  };
  EXPECT_EQ(judge(Direction::better, 0, ci(0.1, 2)), Verdict::supported);
  EXPECT_EQ(judge(Direction::better, 0, ci(-2, -0.1)), Verdict::contradicted);
  EXPECT_EQ(judge(Direction::better, 0, ci(-0.1, 2)), Verdict::not_shown);
  EXPECT_EQ(judge(Direction::equal, 1, ci(-0.5, 0.9)), Verdict::supported);
  EXPECT_EQ(judge(Direction::equal, 1, ci(1.1, 3)), Verdict::contradicted);
  EXPECT_EQ(judge(Direction::equal, 1, ci(-3, -1.2)), Verdict::contradicted);
  EXPECT_EQ(judge(Direction::equal, 1, ci(-0.5, 1.5)), Verdict::not_shown);   // straddles the margin
  EXPECT_EQ(judge(Direction::equal, 1, ci(-2, 2)), Verdict::not_shown);       // wider than it
  EXPECT_STREQ(verdict_name(Verdict::not_shown), "not shown");
  EXPECT_NE(error_of([&] { judge(Direction::equal, 0, ci(0, 1)); }).find("positive delta"), std::string::npos);
}

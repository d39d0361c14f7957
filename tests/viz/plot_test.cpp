// Training curves (write_svg_plot): axis ticks at round values (nice_ticks: steps of 1, 2 or 5 × 10^k,
// at most max_ticks of them), labels with the decimals the step needs, and the SVG itself: ticks,
// escaped title and legend, one polyline a line series and one dot a point of a marker series.
#include <gtest/gtest.h>

#include <filesystem>

#include "attn/attn.h"
#include "attn/viz/plot.h"
#include "errors.h"
#include "files.h"
#include "train_checks.h"

using namespace attn;
using viz::nice_ticks;
using viz::tick_label;

namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST(NiceTicks, RoundStepsOfOneTwoOrFive) {
  struct Case {
    double lo, hi;
    std::vector<double> ticks;
  };
  const std::vector<Case> cases = {
      {0.4938, 0.6795, {0.5, 0.55, 0.6, 0.65}},   // step 0.02 would give 9 ticks
      {0, 1, {0, 0.2, 0.4, 0.6, 0.8, 1}},
      {1, 3, {1, 1.5, 2, 2.5, 3}},
      {0.2, 2.6, {0.5, 1, 1.5, 2, 2.5}},
      {0, 2000, {0, 500, 1000, 1500, 2000}},
      {1, 12, {2, 4, 6, 8, 10, 12}},
      {-0.3, 0.3, {-0.3, -0.2, -0.1, 0, 0.1, 0.2, 0.3}},
      {-5, -1, {-5, -4, -3, -2, -1}},
      {3e-7, 9e-7, {3e-7, 4e-7, 5e-7, 6e-7, 7e-7, 8e-7, 9e-7}},
      {2.5, 2.5, {2.5}},
  };
  for (const auto& c : cases) EXPECT_EQ(nice_ticks(c.lo, c.hi), c.ticks) << c.lo << " .. " << c.hi;
  // Fewer allowed ticks take the next round step.
  EXPECT_EQ(nice_ticks(0, 1, 4), (std::vector<double>{0, 0.5, 1}));
  EXPECT_EQ(nice_ticks(0, 100, 2), (std::vector<double>{0, 100}));
  // Every step is 1, 2 or 5 × 10^k and there are 2 to max_ticks ticks (max_ticks >= 5), all inside
  // the range (but for rounding).
  Generator g(5);
  for (int i = 0; i < 200; ++i) {
    const double lo = (g.uniform() - 0.5) * std::pow(10.0, double(g.randint(9) - 4));
    const double hi = lo + std::pow(10.0, double(g.randint(9) - 4)) * (0.1 + g.uniform());
    const int most = 5 + int(g.randint(6));
    const std::vector<double> t = nice_ticks(lo, hi, most);
    ASSERT_GE(t.size(), 2u) << lo << " .. " << hi;
    EXPECT_LE(int(t.size()), most) << lo << " .. " << hi;
    const double step = t[1] - t[0];
    EXPECT_GE(t.front(), lo - 1e-6 * step);
    EXPECT_LE(t.back(), hi + 1e-6 * step);
    const double mant = step / std::pow(10.0, std::round(std::log10(step)));   // 1, 2, or 5 as 0.5
    EXPECT_TRUE(std::abs(mant - 1) < 1e-4 || std::abs(mant - 2) < 1e-4 || std::abs(mant - 0.5) < 1e-4) << step;
  }
  EXPECT_EQ(test::error_of([] { nice_ticks(1, 0); }),
            "nice_ticks: expected finite lo <= hi and max_ticks >= 2, got lo 1, hi 0, max_ticks 8");
  EXPECT_EQ(test::error_of([] { nice_ticks(0, INFINITY); }),
            "nice_ticks: expected finite lo <= hi and max_ticks >= 2, got lo 0, hi inf, max_ticks 8");
  EXPECT_EQ(test::error_of([] { nice_ticks(0, 1, 1); }),
            "nice_ticks: expected finite lo <= hi and max_ticks >= 2, got lo 0, hi 1, max_ticks 1");
}

TEST(NiceTicks, LabelsCarryTheDecimalsOfTheStep) {
  EXPECT_EQ(tick_label(0.5, 0.05), "0.50");
  EXPECT_EQ(tick_label(0.55, 0.05), "0.55");
  EXPECT_EQ(tick_label(1.5, 0.5), "1.5");
  EXPECT_EQ(tick_label(2, 0.5), "2.0");
  EXPECT_EQ(tick_label(3, 1), "3");
  EXPECT_EQ(tick_label(1500, 500), "1500");
  EXPECT_EQ(tick_label(-0.0, 0.1), "0.0");
  EXPECT_EQ(tick_label(-1e-17, 0.1), "0.0");   // a zero that rounding left negative
  EXPECT_EQ(tick_label(-0.2, 0.1), "-0.2");
  EXPECT_EQ(tick_label(0.25, 0.25), "0.25");
  EXPECT_EQ(tick_label(4e-7, 1e-7), "0.0000004");
}

TEST(SvgPlot, AxesAtRoundValues) {
  const std::string dir = test::fresh_tmp_dir("attn_plot_test", "curve");
  const std::string path = dir + "/curve.svg";
  viz::Series loss{"train <loss>", {0.2, 0.6, 1.0, 1.8, 2.6}, {23, 12, 9, 7, 6.2}};
  viz::Series acc{"val accuracy", {1, 2, 3}, {0.4938, 0.61, 0.6795}, true};
  viz::Series dots{"head 0", {1, 3}, {10, 15}};
  dots.markers = true;
  viz::write_svg_plot(path, "a & b", "epoch", {loss, acc, dots});
  const std::string s = test::slurp(path);
  EXPECT_EQ(s.rfind("<svg ", 0), 0u);
  EXPECT_NE(s.find("</svg>"), std::string::npos);
  EXPECT_NE(s.find(">a &amp; b</text>"), std::string::npos);
  EXPECT_NE(s.find(">train &lt;loss&gt;</text>"), std::string::npos);
  EXPECT_NE(s.find(">val accuracy (right axis)</text>"), std::string::npos);
  EXPECT_NE(s.find(">epoch</text>"), std::string::npos);
  // x: 0.2 .. 3 in steps of 0.5; left y: 6.2 .. 23 (and 4% air) in steps of 5; right y: the
  // accuracy 0.4938 .. 0.6795 (and 4% air) in steps of 0.05.
  for (const char* t :
       {">0.5<", ">1.0<", ">1.5<", ">2.0<", ">2.5<", ">3.0<", ">10<", ">15<", ">20<", ">0.50<", ">0.55<", ">0.60<", ">0.65<"})
    EXPECT_EQ(count(s, t), 1u) << t;
  // No label at an unround value (as the range's ends, or fifths of it, would give).
  for (const char* t : {">0.4938<", ">0.6795<", ">0.2<", ">0.76<", ">3<", ">6.2<", ">23<", ">5<", ">25<", ">0.45<"})
    EXPECT_EQ(count(s, t), 0u) << t;
  EXPECT_EQ(count(s, "<polyline"), 2u);
  EXPECT_EQ(count(s, "<circle"), 2u + 1u);   // two points and the legend's dot
  std::filesystem::remove_all(dir);
}

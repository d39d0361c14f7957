// An experiment's Markdown table from its results.json: mean ± sd and a 95% interval over several seeds,
// and for a track of one run per variant (the distillation teachers, BERT pre-training) the value and the
// plain difference, with no spread or interval that one run cannot have. The page of an experiment not run
// yet counts its kept runs of the current settings.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "attn/experiment/experiment.h"
#include "files.h"

using namespace attn::experiment;
using nlohmann::json;

namespace {

// A results.json of one track (two variants, `seeds` runs each) and one "better" sub-claim.
json results(int seeds) {
  json base_runs = json::array(), other_runs = json::array();
  for (int s = 0; s < seeds; ++s) {
    base_runs.push_back({{"seed", s}, {"metric", 90.0}, {"seconds", 60.0}});
    other_runs.push_back({{"seed", s}, {"metric", 91.5}, {"seconds", 90.0}});
  }
  const json lo = seeds > 1 ? json(0.5) : json(nullptr), hi = seeds > 1 ? json(2.5) : json(nullptr);
  const json diff = {{"estimate", 1.5}, {"lo", lo}, {"hi", hi}, {"n", seeds}};
  json track = {{"name", "fmnist"}, {"data", "Fashion-MNIST"}, {"metric", "accuracy"},
                {"metric_label", "test accuracy (%)"}, {"baseline", "a"},
                {"variants",
                 {{{"name", "a"}, {"label", "variant A"}, {"mean", 90.0}, {"sd", seeds > 1 ? 0.25 : 0.0},
                   {"seconds_mean", 60.0}, {"runs", base_runs}},
                  {{"name", "b"}, {"label", "variant B"}, {"mean", 91.5}, {"sd", seeds > 1 ? 0.5 : 0.0},
                   {"seconds_mean", 90.0}, {"runs", other_runs}, {"difference", diff}}}}};
  json claim = {{"text", "B beats A"}, {"direction", "better"}, {"interval", diff},
                {"verdict", seeds > 1 ? "supported" : "not shown"}};
  return {{"tracks", {track}}, {"claims", {claim}}};
}

}  // namespace

TEST(ExperimentReport, SeveralSeedsShowMeanSdAndTheInterval) {
  const std::string md = results_markdown(results(3));
  EXPECT_NE(md.find("mean ± sd over 3 seeds; the difference to variant A seed by seed, with its 95% interval"),
            std::string::npos) << md;
  EXPECT_NE(md.find("| variant A | 90.00 ± 0.25 | (baseline) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| variant B | 91.50 ± 0.50 | +1.50 [+0.50, +2.50] |"), std::string::npos) << md;
  EXPECT_NE(md.find("| B beats A | better: above 0 | +1.50 [+0.50, +2.50] | **supported** |"), std::string::npos)
      << md;
}

TEST(ExperimentReport, OneRunPerVariantShowsNoSpreadOrInterval) {
  const std::string md = results_markdown(results(1));
  EXPECT_NE(md.find("test accuracy (%), one run each; the difference to variant A."), std::string::npos) << md;
  EXPECT_NE(md.find("| variant A | 90.00 | (baseline) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| variant B | 91.50 | +1.50 |"), std::string::npos) << md;
  const size_t claims = md.find("| sub-claim |");
  ASSERT_NE(claims, std::string::npos) << md;
  EXPECT_EQ(md.substr(0, claims).find("±"), std::string::npos) << md;
  EXPECT_EQ(md.find("over 1 seed"), std::string::npos) << md;
  // a sub-claim on one run says why it has no interval
  EXPECT_NE(md.find("+1.50 (one seed: no interval) | not shown |"), std::string::npos) << md;
}

TEST(ExperimentReport, PageCountsTheKeptRunsOfAnExperimentNotFinished) {
  namespace fs = std::filesystem;
  const std::string dir = attn::test::fresh_tmp_dir("attn_experiment_report_test", "kept");
  const Experiment& e = find_experiment("qk-sharing");
  const Track& t = e.tracks.at(0);
  ASSERT_EQ(t.variants.size(), 2u);
  const fs::path runs = fs::path(dir) / "docs" / "experiments" / "runs" / "qk-sharing" / t.name;
  auto keep = [&](const Variant& v, int seed, const json& settings, bool finished) {
    const fs::path run = runs / v.name / ("s" + std::to_string(seed));
    fs::create_directories(run);
    std::ofstream(run / "run.json") << json{{"settings", settings}, {"seed", seed}}.dump(2);
    if (finished) std::ofstream(run / "metrics.json") << json{{"test_accuracy", 0.8}}.dump();
  };
  const json now = run_settings(t, t.variants[0], "full");
  json other = now;
  other["max_steps"] = now.value("max_steps", 0) + 1;
  keep(t.variants[0], 0, now, true);                                      // counts
  keep(t.variants[0], 1, other, true);                                    // of other settings: the runner refuses it
  keep(t.variants[1], 0, run_settings(t, t.variants[1], "full"), false);  // not finished
  keep(t.variants[1], 1, now, true);                                      // another variant's settings
  write_docs(dir + "/none", dir + "/docs/experiments.md");
  std::ifstream f(dir + "/docs/experiments.md");
  const std::string page{std::istreambuf_iterator<char>(f), {}};
  EXPECT_NE(page.find("| not run at full budget yet (1 of 6 runs kept) |"), std::string::npos);
  EXPECT_NE(page.find("Not run at full budget yet. 1 of its 6 runs are kept, with the settings above, in "
                      "`experiments/runs/qk-sharing/`"),
            std::string::npos);
  // An experiment with no kept run says only that it has not run.
  EXPECT_NE(page.find("| not run at full budget yet |"), std::string::npos);
}

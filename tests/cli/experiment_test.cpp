// `attn experiment`: the list, an unknown name, and one experiment at the quick budget (qk-sharing, 2
// variants x 3 seeds, about a minute on 2 cores), whose table, plot and JSON are well formed and whose
// verdict is computed from the printed interval; run again, it trains nothing and prints the same table.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "attn/experiment/stats.h"
#include "attn_cli.h"
#include "files.h"

using namespace attn;
using nlohmann::json;
using test::run_attn;
namespace fs = std::filesystem;

namespace {
std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

TEST(ExperimentCli, ListsAndRefusesUnknownNames) {
  const std::string dir = test::fresh_tmp_dir("attn_experiment_cli", "list");
  const auto l = run_attn(dir, {"experiment", "--list"});
  ASSERT_EQ(l.code, 0) << l.err;
  for (const char* name : {"scaling", "heads", "qk-sharing", "cls-vs-gap", "positions", "inductive-bias",
                           "distillation", "scores", "norm", "transformer-vs-rnn", "pretraining", "attention-distance"})
    EXPECT_NE(l.out.find(name), std::string::npos) << name;
  const auto bad = run_attn(dir, {"experiment", "qk-shring"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("no experiment 'qk-shring' (known: scaling, heads, qk-sharing"), std::string::npos) << bad.err;
  const auto none = run_attn(dir, {"experiment"});
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.err.find("expected an experiment's name"), std::string::npos) << none.err;
}

TEST(ExperimentCli, SlowQuickBudgetWritesTablePlotAndJsonAndResumes) {
  const std::string dir = test::fresh_tmp_dir("attn_experiment_cli", "quick");
  const auto r = run_attn(dir, {"experiment", "qk-sharing", "--budget", "quick", "--out", dir + "/exp", "--threads", "2"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const std::string base = dir + "/exp/qk-sharing/quick";
  const json j = json::parse(std::ifstream(base + "/results.json"));
  EXPECT_EQ(j.at("seeds"), 3);
  ASSERT_EQ(j.at("tracks").size(), 1u);
  const json& variants = j.at("tracks")[0].at("variants");
  ASSERT_EQ(variants.size(), 2u);
  for (const auto& v : variants) {
    ASSERT_EQ(v.at("runs").size(), 3u);
    for (const auto& run : v.at("runs")) {
      const double acc = run.at("metric").get<double>();
      EXPECT_GT(acc, 10.0) << "above chance after 32 steps";   // points
      EXPECT_LE(acc, 100.0);
      EXPECT_GE(run.at("curve").size(), 2u);
    }
  }
  // The verdict follows from the interval of the per-seed differences (recomputed here).
  const json& c = j.at("claims")[0];
  std::vector<double> per_seed;
  for (int s = 0; s < 3; ++s)
    per_seed.push_back(variants[0].at("runs")[s].at("metric").get<double>() -
                       variants[1].at("runs")[s].at("metric").get<double>());
  const experiment::Interval ci = experiment::mean_interval(per_seed);
  EXPECT_NEAR(c.at("interval").at("lo").get<double>(), ci.lo, 1e-9);
  EXPECT_EQ(c.at("verdict").get<std::string>(), experiment::verdict_name(experiment::judge(experiment::Direction::better, 0, ci)));
  // The table printed is table.md; the plot is an SVG with one curve per variant.
  const std::string table = read_text(base + "/table.md");
  EXPECT_NE(r.out.find(table), std::string::npos);
  EXPECT_NE(table.find("| separate W_Q and W_K beat a shared projection | better: above 0 |"), std::string::npos) << table;
  const std::string svg = read_text(base + "/curves-fmnist.svg");
  EXPECT_EQ(svg.rfind("<svg", 0) == 0 || svg.rfind("<?xml", 0) == 0, true) << svg.substr(0, 80);
  EXPECT_NE(svg.find("shared W_Q = W_K"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  // Again: nothing trained, the same table.
  const auto again = run_attn(dir, {"experiment", "qk-sharing", "--budget", "quick", "--out", dir + "/exp"});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.out.find("[6/6] fmnist/shared seed 2: test_accuracy"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("(done before)"), std::string::npos);
  EXPECT_EQ(again.out.find("steps 1-"), std::string::npos) << "no training";
  EXPECT_EQ(read_text(base + "/table.md"), table);
}

// The experiments' catalog: names and variants are unique, every sub-claim names variants of its own
// track, every variant's settings apply to a TrainConfig and build its model; and (outside the
// sanitizer stage) every variant of every experiment trains one step and is read back by the runner,
// whose files are well formed and which resumes a finished experiment without training again.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/attn.h"
#include "attn/experiment/experiment.h"
#include "bert_vocab.h"
#include "errors.h"
#include "files.h"
#include "slow.h"

using namespace attn;
using nlohmann::json;
using test::error_of;
namespace fs = std::filesystem;

TEST(ExperimentCatalog, NamesVariantsAndClaimsAreConsistent) {
  std::set<std::string> names;
  for (const auto& e : experiment::catalog()) {
    EXPECT_TRUE(names.insert(e.name).second) << e.name;
    EXPECT_FALSE(e.claim.empty() || e.source.empty() || e.grid.empty()) << e.name;
    EXPECT_FALSE(e.claims.empty()) << e.name;
    for (const auto& t : e.tracks) {
      std::set<std::string> variants;
      for (const auto& v : t.variants) EXPECT_TRUE(variants.insert(v.name).second) << e.name << " " << v.name;
      for (const auto& c : e.claims) {
        if (c.track != t.name) continue;
        double coeffs = 0;
        bool probe_scalar = false;
        for (const auto& term : c.contrast) {
          coeffs += term.coeff;
          probe_scalar = probe_scalar || !term.metric.empty();
          for (const auto& v : term.variants) EXPECT_TRUE(variants.count(v)) << e.name << ": " << c.text << ": " << v;
        }
        // A contrast sums to zero (differences between variants); only a probe's scalar stands alone.
        if (c.contrast.size() > 1) EXPECT_EQ(coeffs, 0.0) << e.name << ": " << c.text;
        else EXPECT_TRUE(probe_scalar && !t.probe.empty()) << e.name << ": " << c.text;
        for (const auto& term : c.contrast)   // another metric: one the track gives
          if (!term.metric.empty())
            EXPECT_TRUE(!t.probe.empty() || std::find(t.extra_metrics.begin(), t.extra_metrics.end(), term.metric) !=
                                                t.extra_metrics.end())
                << e.name << ": " << c.text << ": " << term.metric;
        if (c.direction == experiment::Direction::equal) EXPECT_GT(c.delta, 0) << c.text;
      }
    }
    for (const auto& c : e.claims) {
      bool found = false;
      for (const auto& t : e.tracks) found = found || t.name == c.track;
      EXPECT_TRUE(found) << e.name << ": " << c.text;
    }
  }
  EXPECT_EQ(error_of([] { experiment::find_experiment("nope"); }).rfind("attn experiment: no experiment 'nope' (known: ", 0),
            0u);
}

// Every variant at every budget: the settings apply, and its model builds with them.
TEST(ExperimentCatalog, EveryVariantsSettingsApplyAndItsModelBuilds) {
  for (const auto& e : experiment::catalog())
    for (const auto& t : e.tracks)
      for (const auto& v : t.variants)
        for (const char* budget : {"quick", "full", "smoke"}) {
          train::TrainConfig cfg;
          ASSERT_NO_THROW(experiment::apply_settings(
              cfg, experiment::resolve_runs(e, t.name, experiment::run_settings(t, v, budget), "out", 0)))
              << e.name << " " << v.name << " " << budget;
          if (std::string(budget) == "smoke") {
            EXPECT_EQ(cfg.max_steps, t.probe.empty() ? 1 : t.stages);
            EXPECT_GT(cfg.limit_train, 0);
          }
          EXPECT_NO_THROW(models::create_shapes_only(cfg.model, cfg.model_config)) << e.name << " " << v.name;
        }
}

// The probe's two numbers from a (layers, heads) table: the slope of the layers' means, and the first
// layer's spread over heads minus the last's.
TEST(ExperimentCatalog, DistanceSlopeAndSpread) {
  const Tensor d = Tensor::from_vector(std::vector<double>{2, 10, 5, 9, 8, 8}, {3, 2});   // means 6, 7, 8
  EXPECT_NEAR(experiment::distance_slope(d), 1.0, 1e-12);
  EXPECT_NEAR(experiment::distance_spread_drop(d), std::sqrt(32.0) - 0.0, 1e-12);   // sd{2, 10} - sd{8, 8}
  EXPECT_NE(error_of([] { experiment::distance_slope(Tensor::zeros({1, 3})); }).find("layers >= 2"), std::string::npos);
}

TEST(ExperimentCatalog, SettingsErrorsNameTheKey) {
  train::TrainConfig cfg;
  EXPECT_EQ(error_of([&] { experiment::apply_settings(cfg, {{"lr", "big"}}); }),
            "experiment settings: key \"lr\": expected a positive number, found the string \"big\"");
  EXPECT_EQ(error_of([&] { experiment::apply_settings(cfg, {{"model_config", 3}}); }),
            "experiment settings: key \"model_config\": expected an object, found the number 3");
  EXPECT_EQ(error_of([&] { experiment::apply_settings(cfg, {{"epoch", 3}}); }).rfind(
                "experiment settings: unknown key \"epoch\"", 0),
            0u);
  const auto& e = experiment::find_experiment("qk-sharing");
  EXPECT_EQ(error_of([&] { experiment::run_settings(e.tracks[0], e.tracks[0].variants[0], "long"); }),
            "attn experiment: expected a budget of quick, full or smoke, got 'long'");
  EXPECT_EQ(error_of([&] { experiment::apply_settings(cfg, {{"distill", "warm"}}); }).rfind(
                "experiment settings: key \"distill\"", 0),
            0u);
}

// A variant that starts from (init) or learns from (teacher) another track's run: the path of that run's
// checkpoint, the same seed's or seed 0's for a track of one run; only an earlier track's runs.
TEST(ExperimentCatalog, RunReferencesResolveToAnEarlierTracksCheckpoint) {
  const auto& e = experiment::find_experiment("distillation");
  const experiment::Track& students = e.tracks.at(1);
  const json s = experiment::run_settings(students, students.variants.at(1), "full");
  EXPECT_EQ(s.at("teacher"), json({{"run", "teachers/cnn"}}));
  EXPECT_EQ(experiment::resolve_runs(e, students.name, s, "out/distillation/full", 2).at("teacher"),
            "out/distillation/full/teachers/cnn/s0/checkpoint.safetensors");
  experiment::Experiment x = e;
  x.tracks.at(0).once = false;   // a teacher per seed
  EXPECT_EQ(experiment::resolve_runs(x, students.name, s, "o", 2).at("teacher"), "o/teachers/cnn/s2/checkpoint.safetensors");
  EXPECT_EQ(error_of([&] { experiment::resolve_runs(e, "teachers", s, "o", 0); }),
            "attn experiment: distillation/teachers takes its teacher from the run 'teachers/cnn', which no earlier "
            "track of the experiment has");
  json bad = s;
  bad["teacher"] = {{"run", "teachers/resnet"}};
  EXPECT_NE(error_of([&] { experiment::resolve_runs(e, students.name, bad, "o", 0); }).find("'teachers/resnet'"),
            std::string::npos);
  bad["teacher"] = {{"path", "x"}};
  EXPECT_EQ(error_of([&] { experiment::resolve_runs(e, students.name, bad, "o", 0); }),
            "attn experiment: \"teacher\" expected a path or {\"run\": \"TRACK/VARIANT\"}, found {\"path\":\"x\"}");
  const auto& p = experiment::find_experiment("pretraining");
  const json ft = experiment::run_settings(p.tracks.at(1), p.tracks.at(1).variants.at(0), "quick");
  EXPECT_EQ(experiment::resolve_runs(p, "wordnet", ft, "o", 1).at("init"), "o/pretrain/bert/s0/checkpoint.safetensors");
}

// One step of every variant of every experiment (the smoke budget, one seed), through the runner: the
// results, table and plots are written, and a second call trains nothing and gives the same numbers.
TEST(ExperimentCatalog, SlowEveryVariantRunsOneStep) {
  ATTN_NEED_BERT_VOCAB(test::bert_vocab_path());   // the pretraining experiment's BERT
  const std::string out = test::fresh_tmp_dir("attn_experiment_test", "smoke");
  set_num_threads(2);
  for (const auto& e : experiment::catalog()) {
    experiment::RunOptions o;
    o.budget = "smoke";
    o.seeds = 1;
    o.out = out;
    o.progress = false;
    const experiment::Report r = experiment::run_experiment(e, o);
    EXPECT_EQ(r.dir, out + "/" + e.name + "/smoke");
    const json j = json::parse(std::ifstream(r.dir + "/results.json"));
    EXPECT_EQ(j.at("experiment"), e.name);
    EXPECT_EQ(j.at("isa"), isa_name(active_isa())) << "every run trained here";
    size_t variants = 0;
    for (const auto& t : e.tracks) variants += t.variants.size();
    size_t got = 0;
    for (const auto& t : j.at("tracks")) got += t.at("variants").size();
    EXPECT_EQ(got, variants) << e.name;
    for (const auto& c : j.at("claims")) EXPECT_EQ(c.at("verdict"), "not shown") << e.name << " (one seed: no interval)";
    for (const auto& p : r.plots) EXPECT_GT(fs::file_size(p), 200u) << p;
    for (const auto& t : e.tracks)
      for (const auto& v : t.variants) {
        const std::string run = r.dir + "/" + t.name + "/" + v.name + "/s0";
        EXPECT_TRUE(fs::exists(run + "/metrics.json")) << run;
        EXPECT_EQ(json::parse(std::ifstream(run + "/metrics.json")).at("steps"), t.probe.empty() ? 1 : t.stages) << run;
        if (!t.probe.empty()) {   // one measurement per stage, (layers, heads) each
          const json probe = json::parse(std::ifstream(run + "/probe.json"));
          ASSERT_EQ(probe.size(), size_t(t.stages)) << run;
          EXPECT_EQ(probe.back().at("step"), t.stages);
          EXPECT_EQ(probe.back().at("distance").size(), 6u);
          EXPECT_EQ(probe.back().at("distance").at(0).size(), 4u);
        }
      }
    // Again: every run is read back; the same numbers.
    const auto mtime = fs::last_write_time(r.dir + "/" + e.tracks[0].name + "/" + e.tracks[0].variants[0].name +
                                           "/s0/metrics.json");
    const experiment::Report again = experiment::run_experiment(e, o);
    EXPECT_EQ(again.results.at("tracks"), r.results.at("tracks")) << e.name;
    EXPECT_EQ(fs::last_write_time(r.dir + "/" + e.tracks[0].name + "/" + e.tracks[0].variants[0].name +
                                  "/s0/metrics.json"),
              mtime);
  }
  // The docs page from full-budget results (the smoke ones standing in): the section's table and verdicts,
  // the kept copies beside the page, and the same page again from those copies alone.
  fs::create_directories(out + "/qk-sharing/full");
  fs::copy_file(out + "/qk-sharing/smoke/results.json", out + "/qk-sharing/full/results.json");
  fs::copy_file(out + "/qk-sharing/smoke/curves-fmnist.svg", out + "/qk-sharing/full/curves-fmnist.svg");
  fs::create_directories(out + "/attention-distance/full");
  for (const char* f : {"results.json", "curves-fmnist.svg", "distance-fmnist.svg"})
    fs::copy_file(out + "/attention-distance/smoke/" + f, out + "/attention-distance/full/" + f);
  const std::string doc = out + "/docs/experiments.md", doc_json_source = out + "/qk-sharing/full/results.json";
  fs::create_directories(out + "/docs");
  // Finished runs are kept too, of an experiment without results yet (distillation) as well, except those
  // whose checkpoint a later track reads (the teachers).
  fs::copy(out + "/qk-sharing/smoke/fmnist", out + "/qk-sharing/full/fmnist", fs::copy_options::recursive);
  fs::copy(out + "/attention-distance/smoke/fmnist", out + "/attention-distance/full/fmnist",
           fs::copy_options::recursive);
  fs::create_directories(out + "/distillation/full");
  for (const auto& t : experiment::find_experiment("distillation").tracks)   // its runs, not its results
    fs::copy(out + "/distillation/smoke/" + t.name, out + "/distillation/full/" + t.name, fs::copy_options::recursive);
  const experiment::DocsWritten written = experiment::write_docs(out, doc);
  EXPECT_EQ(written.experiments, (std::vector<std::string>{"qk-sharing", "attention-distance"}));
  int64_t runs = 0;
  for (const char* name : {"qk-sharing", "attention-distance", "distillation"})
    for (const auto& t : experiment::find_experiment(name).tracks)
      runs += t.name == "teachers" ? 0 : int64_t(t.variants.size());
  EXPECT_EQ(written.runs_kept, runs);
  const std::string kept_runs = out + "/docs/experiments/runs";
  for (const char* f : {"run.json", "metrics.json", "log.jsonl"})
    EXPECT_TRUE(fs::exists(kept_runs + "/qk-sharing/fmnist/separate/s0/" + f)) << f;
  EXPECT_TRUE(fs::exists(kept_runs + "/attention-distance/fmnist/vit/s0/probe.json"));
  EXPECT_FALSE(fs::exists(kept_runs + "/qk-sharing/fmnist/separate/s0/checkpoint.safetensors"));
  EXPECT_FALSE(fs::exists(kept_runs + "/distillation/teachers"));
  EXPECT_TRUE(fs::exists(kept_runs + "/distillation/" + experiment::find_experiment("distillation").tracks.at(1).name));
  // Put back on an empty --out, the kept runs are read back, not trained: the same numbers, no checkpoint.
  for (const char* name : {"qk-sharing", "attention-distance"}) {
    const std::string moved = out + "/moved/" + name + "/smoke";
    fs::create_directories(moved);
    fs::copy(kept_runs + "/" + name, moved, fs::copy_options::recursive);
    // A run trained before metrics.json recorded the ISA: the experiment's ISA says so, with the counts.
    const std::string first = moved + "/fmnist/" + experiment::find_experiment(name).tracks[0].variants[0].name + "/s0";
    json m = json::parse(std::ifstream(first + "/metrics.json"));
    m.erase("isa");
    std::ofstream(first + "/metrics.json") << m.dump();
    experiment::RunOptions o;
    o.budget = "smoke";
    o.seeds = 1;
    o.out = out + "/moved";
    o.progress = false;
    const experiment::Report back = experiment::run_experiment(experiment::find_experiment(name), o);
    const json before = json::parse(std::ifstream(out + "/" + name + "/smoke/results.json"));
    EXPECT_EQ(back.results.at("tracks"), before.at("tracks")) << name;
    const size_t runs_back = experiment::find_experiment(name).tracks[0].variants.size();
    const std::string isa = back.results.at("isa").get<std::string>();
    if (runs_back == 1) {
      EXPECT_EQ(isa, "not recorded") << name;
    } else {
      const std::string recorded = std::string(isa_name(active_isa())) + " (" + std::to_string(runs_back - 1) +
                                   (runs_back == 2 ? " run)" : " runs)");
      EXPECT_NE(isa.find(recorded), std::string::npos) << isa;
      EXPECT_NE(isa.find("not recorded (1 run)"), std::string::npos) << isa;
    }
    for (const auto& entry : fs::recursive_directory_iterator(moved))
      EXPECT_NE(entry.path().filename(), "checkpoint.safetensors") << entry.path();
  }
  auto read = [](const std::string& p) {
    std::ifstream f(p);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const std::string page = read(doc);
  EXPECT_NE(page.find("| separate W_Q and W_K beat a shared projection | better: above 0 |"), std::string::npos);
  EXPECT_NE(page.find("![qk-sharing, Fashion-MNIST](experiments/qk-sharing-fmnist.svg)"), std::string::npos);
  EXPECT_NE(page.find("## positions"), std::string::npos);
  // A probe's figure is shown and kept beside the track's curves.
  EXPECT_NE(page.find("![attention-distance, Fashion-MNIST](experiments/attention-distance-fmnist.svg)"),
            std::string::npos);
  const std::string distance_figure =
      "![attention-distance, Fashion-MNIST, distance](experiments/attention-distance-distance-fmnist.svg)";
  EXPECT_NE(page.find(distance_figure), std::string::npos);
  EXPECT_TRUE(fs::exists(out + "/docs/experiments/attention-distance-distance-fmnist.svg"));
  // The experiment's time is the sum of its runs' (a resumed experiment's invocation trains only a part).
  double trained = 0;
  const json kept = json::parse(std::ifstream(doc_json_source));
  for (const auto& v : kept.at("tracks").at(0).at("variants"))
    trained += v.at("runs").at(0).at("seconds").get<double>();
  const size_t run_line = page.find("- Run: ");
  ASSERT_NE(run_line, std::string::npos);
  EXPECT_NE(page.find("its 2 runs trained for " + format_duration(trained) + " in all"), std::string::npos)
      << trained << " s; " << page.substr(run_line, page.find('\n', run_line) - run_line);
  EXPECT_TRUE(fs::exists(out + "/docs/experiments/qk-sharing.json"));
  fs::remove_all(out + "/qk-sharing/full");
  fs::remove_all(out + "/attention-distance/full");
  experiment::write_docs(out + "/none", doc);
  EXPECT_EQ(read(doc), page);

  // A run directory of other settings is refused, naming it.
  const auto& e = experiment::find_experiment("qk-sharing");
  const std::string run = out + "/qk-sharing/smoke/fmnist/separate/s0/run.json";
  json changed = json::parse(std::ifstream(run));
  changed["settings"]["lr"] = 0.5;
  std::ofstream(run) << changed.dump();
  experiment::RunOptions o;
  o.budget = "smoke";
  o.seeds = 1;
  o.out = out;
  o.progress = false;
  EXPECT_NE(error_of([&] { experiment::run_experiment(e, o); }).find("Remove that directory, or choose another --out"),
            std::string::npos);
}

// An experiment's Markdown (from its results.json) and docs/experiments.md (attn/experiment/experiment.h).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "attn/core/error.h"
#include "attn/core/progress.h"
#include "attn/experiment/experiment.h"
#include "attn/io/safetensors.h"
#include "figures.h"
#include "run_files.h"

namespace attn::experiment {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string fixed(double v, int decimals = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string signed_fixed(double v) { return (v >= 0 ? "+" : "") + fixed(v); }

// "+0.42 [-0.10, +0.94]", or "+0.42 (one seed: no interval)"
std::string interval_text(const json& ci) {
  const std::string est = signed_fixed(ci.at("estimate").get<double>());
  if (ci.at("lo").is_null()) return est + " (one seed: no interval)";
  return est + " [" + signed_fixed(ci.at("lo").get<double>()) + ", " + signed_fixed(ci.at("hi").get<double>()) + "]";
}

std::string verdict_cell(const std::string& v) {
  return v == "supported" ? "**supported**" : v == "contradicted" ? "**contradicted**" : "not shown";
}

// A probe's last stage per layer: the mean over heads, its mean ± sd over seeds, and the spread over heads.
std::string probe_markdown(const json& t) {
  const json& runs = t.at("variants").at(0).at("runs");
  if (!runs.at(0).contains("probe")) return "";
  std::ostringstream md;
  const json& last0 = runs.at(0).at("probe").back();
  md << "Mean attention distance in pixels after " << last0.at("step").get<int64_t>()
     << " steps, per layer: the heads' mean (mean ± sd over seeds) and their spread (sd over heads, mean over "
        "seeds).\n\n| layer | mean distance | spread over heads |\n|---|---|---|\n";
  const size_t layers = last0.at("distance").size();
  for (size_t l = 0; l < layers; ++l) {
    std::vector<double> means, spreads;
    for (const json& run : runs) {
      const json& heads = run.at("probe").back().at("distance").at(l);
      std::vector<double> h;
      for (const json& x : heads) h.push_back(x.get<double>());
      const Summary s = summarize(h);
      means.push_back(s.mean);
      spreads.push_back(s.sd);
    }
    const Summary m = summarize(means);
    md << "| " << l + 1 << " | " << fixed(m.mean) << " ± " << fixed(m.sd) << " | " << fixed(summarize(spreads).mean)
       << " |\n";
  }
  md << "\n";
  return md.str();
}

}  // namespace

std::string results_markdown(const json& r) {
  std::ostringstream md;
  for (const json& t : r.at("tracks")) {
    const size_t seeds = t.at("variants").at(0).at("runs").size();   // a track of one run has 1
    const std::string base = t.at("baseline").get<std::string>();
    std::string base_label;
    for (const json& v : t.at("variants"))
      if (v.at("name") == base) base_label = v.at("label").get<std::string>();
    md << "**" << t.at("data").get<std::string>() << "**: " << t.at("metric_label").get<std::string>();
    if (seeds == 1)   // one run per variant: no spread and no interval to show
      md << ", one run each; the difference to " << base_label << ".\n\n";
    else
      md << ", mean ± sd over " << seeds << " seeds; the difference to " << base_label
         << " seed by seed, with its 95% interval.\n\n";
    md << "| variant | " << t.at("metric_label").get<std::string>() << " | difference to " << base_label
       << " | time per run |\n|---|---|---|---|\n";
    for (const json& v : t.at("variants")) {
      const std::string value =
          fixed(v.at("mean").get<double>()) + (seeds == 1 ? "" : " ± " + fixed(v.at("sd").get<double>()));
      const std::string difference =
          !v.contains("difference") ? "(baseline)"
          : seeds == 1              ? signed_fixed(v.at("difference").at("estimate").get<double>())
                                    : interval_text(v.at("difference"));
      md << "| " << v.at("label").get<std::string>() << " | " << value << " | " << difference << " | "
         << format_duration(v.at("seconds_mean").get<double>()) << " |\n";
    }
    md << "\n";
    md << probe_markdown(t);
  }
  md << "| sub-claim | direction | estimate [95% interval] | verdict |\n|---|---|---|---|\n";
  for (const json& c : r.at("claims")) {
    const std::string dir = c.at("direction").get<std::string>();
    std::string text = c.at("text").get<std::string>();
    if (c.value("best_of", false)) {   // name the variants the validation accuracy picked
      text += " (picked:";
      for (const json& p : c.at("picked")) text += " " + p.get<std::string>();
      text += ")";
    }
    md << "| " << text << " | "
       << (dir == "better" ? std::string("better: above 0") : "equal: inside ±" + fixed(c.at("delta").get<double>()))
       << " | " << interval_text(c.at("interval")) << " | " << verdict_cell(c.at("verdict").get<std::string>())
       << " |\n";
  }
  md << "\n";
  return md.str();
}

namespace {

// The machine time of an experiment: the sum of its runs' training times (a resumed run counts its parts;
// the invocation's own wall time would count only what that invocation trained).
std::pair<double, int> runs_seconds(const json& r) {
  double sum = 0;
  int n = 0;
  for (const json& t : r.at("tracks"))
    for (const json& v : t.at("variants"))
      for (const json& run : v.at("runs")) {
        sum += run.at("seconds").get<double>();
        ++n;
      }
  return {sum, n};
}

std::string doc_header() {
  return "# Experiments\n\n"
         "Each claim below is one command, `attn experiment NAME`: it trains every variant of the claim with the\n"
         "same trainer, recipe and number of steps (unless the row says otherwise), over 3 seeds, and prints a\n"
         "table, a plot of the curves and a verdict. Nothing in a verdict is written by hand:\n\n"
         "- Each claim is split into sub-claims. A sub-claim is a contrast between variants (for example variant A\n"
         "  minus variant B), computed seed by seed: every seed trains all variants on the same data order, so the\n"
         "  differences are paired. Its 95% interval is the mean ± t(n - 1) × sd / √n over the n seeds.\n"
         "- **better**: supported when the interval lies above zero, contradicted when it lies below, otherwise\n"
         "  not shown.\n"
         "- **equal within ±δ**: supported when the interval lies inside ±δ, contradicted when it lies wholly\n"
         "  outside, otherwise not shown.\n"
         "- Where a term names several variants (\"each at its best learning rate\"), the one with the highest mean\n"
         "  validation accuracy is taken; the comparison itself is on the test split.\n\n"
         "`--budget quick` runs the same grid on a few thousand examples in minutes (a check that it runs, not a\n"
         "result); `--budget full` is what this page reports. A half-done experiment resumes where it stopped: each\n"
         "seed of each variant is an ordinary resumable training run under `runs/experiments/NAME/BUDGET/`, next to\n"
         "`results.json` (every number below, per seed), `table.md` and `curves-*.svg`. This page is regenerated\n"
         "from those files by `attn experiment --write-docs docs/experiments.md`, which keeps a copy of each\n"
         "results.json and plot in `docs/experiments/`, and of each finished run (without its checkpoint) in\n"
         "`docs/experiments/runs/`, from where an experiment that is not finished can go on on another machine.\n\n"
         "A claim that this data does not support is reported as such: the point is to find out, not to agree.\n\n";
}

// The runs of `e` whose checkpoint a later track reads ({"run": "TRACK/VARIANT"} as its init or teacher).
std::set<std::string> checkpoint_sources(const Experiment& e) {
  std::set<std::string> out;
  for (const Track& t : e.tracks)
    for (const Variant& v : t.variants) {
      const json s = run_settings(t, v, "full");
      for (const char* key : kRunReferenceKeys)
        if (s.contains(key) && s.at(key).is_object() && s.at(key).contains("run"))
          out.insert(s.at(key).at("run").get<std::string>());
    }
  return out;
}

// Copies the small files of each finished run (a metrics.json) under `from` (out/NAME/full) to the same
// TRACK/VARIANT/sSEED under `to`: what the runner reads back instead of training. Not the checkpoints
// (megabytes each), and so not the runs whose checkpoint a later track reads: without it, the runs that
// read it could not go on, so where the copy is put back the runner trains them again (same seed and
// data order) first. Kept copies are only added or refreshed: a run missing from `from` stays kept.
int64_t keep_runs(const Experiment& e, const fs::path& from, const fs::path& to) {
  if (!fs::is_directory(from)) return 0;
  const std::set<std::string> sources = checkpoint_sources(e);
  int64_t kept = 0;
  for (const auto& entry : fs::recursive_directory_iterator(from)) {
    if (entry.path().filename() != "metrics.json") continue;
    const fs::path dir = entry.path().parent_path(), rel = fs::relative(dir, from);
    const std::vector<fs::path> parts(rel.begin(), rel.end());
    if (parts.size() != 3 || sources.count(parts[0].string() + "/" + parts[1].string())) continue;
    fs::create_directories(to / rel);
    for (const char* f : kKeptRunFiles)
      if (fs::exists(dir / f)) fs::copy_file(dir / f, to / rel / f, fs::copy_options::overwrite_existing);
    ++kept;
  }
  return kept;
}

// Of the runs that `attn experiment NAME --budget full` trains, how many are kept under `kept` with the
// settings the experiment asks for now (a kept run of other settings does not count: the runner refuses
// it), and how many there are.
std::pair<int64_t, int64_t> kept_of_total(const Experiment& e, const fs::path& kept) {
  int64_t have = 0, total = 0;
  for (const Track& t : e.tracks)
    for (const Variant& v : t.variants) {
      const json settings = run_settings(t, v, "full");
      for (int seed = 0; seed < (t.once ? 1 : RunOptions{}.seeds); ++seed, ++total) {
        const fs::path dir = kept / t.name / v.name / seed_dir(seed);
        if (!fs::exists(dir / "metrics.json") || !fs::exists(dir / "run.json")) continue;
        std::ifstream f(dir / "run.json");
        const json had = json::parse(f, nullptr, false);
        have += had == run_record(settings, uint64_t(seed)) ? 1 : 0;
      }
    }
  return {have, total};
}

}  // namespace

DocsWritten write_docs(const std::string& results_root, const std::string& doc_path) {
  std::ostringstream md;
  md << doc_header();
  md << "| experiment | claim | source | verdicts |\n|---|---|---|---|\n";
  std::vector<json> found(catalog().size());
  std::vector<std::pair<int64_t, int64_t>> kept_runs(catalog().size());   // kept_of_total, of those without results
  DocsWritten written;
  std::vector<std::string>& names = written.experiments;
  const fs::path doc_dir = fs::path(doc_path).parent_path();
  for (size_t i = 0; i < catalog().size(); ++i) {
    const Experiment& e = catalog()[i];
    written.runs_kept +=
        keep_runs(e, fs::path(results_root) / e.name / "full", doc_dir / "experiments" / "runs" / e.name);
    // The run's results.json, kept beside the page (experiments/NAME.json) so that the page can be
    // regenerated where the runs are not; without a run here, the kept copy.
    std::string path = results_root + "/" + e.name + "/full/results.json";
    const fs::path kept = doc_dir / "experiments" / (e.name + ".json");
    if (fs::exists(path)) {
      fs::create_directories(kept.parent_path());
      fs::copy_file(path, kept, fs::copy_options::overwrite_existing);
    } else {
      path = kept.string();
    }
    if (!fs::exists(path)) kept_runs[i] = kept_of_total(e, doc_dir / "experiments" / "runs" / e.name);
    std::string verdicts = "not run at full budget yet";
    if (kept_runs[i].first > 0)
      verdicts += " (" + std::to_string(kept_runs[i].first) + " of " + std::to_string(kept_runs[i].second) +
                  " runs kept)";
    if (fs::exists(path)) {
      std::ifstream f(path);
      found[i] = json::parse(f, nullptr, false);
      ATTN_CHECK(!found[i].is_discarded(), "attn experiment --write-docs: '", path, "' is not JSON");
      int sup = 0, con = 0, none = 0;
      for (const json& c : found[i].at("claims")) {
        const std::string v = c.at("verdict").get<std::string>();
        (v == "supported" ? sup : v == "contradicted" ? con : none) += 1;
      }
      verdicts = std::to_string(sup) + " supported, " + std::to_string(con) + " contradicted, " +
                 std::to_string(none) + " not shown";
      names.push_back(e.name);
    }
    md << "| [" << e.name << "](#" << e.name << ") | " << e.claim << " | " << e.source << " | " << verdicts << " |\n";
  }
  md << "\n";
  for (size_t i = 0; i < catalog().size(); ++i) {
    const Experiment& e = catalog()[i];
    md << "## " << e.name << "\n\n" << e.claim << " (" << e.source << ")\n\n";
    md << "- Command: `attn experiment " << e.name << " --budget full` (at most " << fixed(e.full_hours, 0)
       << " hours on 2 cores).\n- Grid: " << e.grid << ".\n";
    for (const Track& t : e.tracks) {
      std::string budget, base;
      for (const auto& [k, v] : t.full.items()) budget += (budget.empty() ? "" : ", ") + k + " " + v.dump();
      for (const auto& [k, v] : t.base.items())
        if (k != "model" && k != "data") base += (base.empty() ? "" : ", ") + k + " " + v.dump();
      md << "- " << t.data_label << ": "
         << (t.base.contains("model") ? t.base.at("model").get<std::string>() + " unless the variant says otherwise"
                                      : std::string("each variant's model"))
         << (base.empty() ? "" : "; settings: " + base) << "; full budget: " << budget
         << (t.once ? "; one run (seed 0), which every seed of the next track builds on.\n" : "; 3 seeds.\n");
    }
    if (found[i].is_null()) {
      md << "\nNot run at full budget yet.";
      if (kept_runs[i].first > 0)
        md << " " << kept_runs[i].first << " of its " << kept_runs[i].second
           << " runs are kept, with the settings above, in `experiments/runs/" << e.name << "/`; `attn experiment "
           << e.name << " --budget full` trains the others after those are put back (see that folder's README).";
      md << "\n\n";
      continue;
    }
    const json& r = found[i];
    const auto [trained, runs] = runs_seconds(r);
    md << "- Run: " << r.at("date").get<std::string>() << ", " << r.at("threads").get<int>() << " threads, ISA "
       << r.at("isa").get<std::string>() << "; its " << runs << " runs trained for " << format_duration(trained)
       << " in all.\n\n";
    md << results_markdown(r);
    // Each track's curves, then its probe's figure where it has one (attention-distance's distance per layer).
    for (const json& t : r.at("tracks")) {
      const std::string track = t.at("name").get<std::string>();
      for (const std::string kind : kFigureKinds) {
        const std::string name = docs_figure_file(e.name, kind, track);
        const fs::path src = fs::path(results_root) / e.name / "full" / figure_file(kind, track);
        if (fs::exists(src)) {
          fs::create_directories(doc_dir / "experiments");
          fs::copy_file(src, doc_dir / "experiments" / name, fs::copy_options::overwrite_existing);
        }
        if (!fs::exists(doc_dir / "experiments" / name)) continue;
        md << "![" << e.name << ", " << t.at("data").get<std::string>() << (kind == "curves" ? "" : ", " + kind)
           << "](experiments/" << name << ")\n\n";
      }
    }
  }
  io::write_file_atomic(doc_path, md.str());
  return written;
}

}  // namespace attn::experiment

// attn experiment NAME [--budget quick|full] [--seeds N] [--out DIR] [--threads N]
// attn experiment --list
// attn experiment --write-docs docs/experiments.md [--out DIR]
// One published claim about attention models, tested: trains every variant of the claim over the seeds (each an
// ordinary resumable training run), then prints each variant's mean ± sd, each sub-claim's paired 95%
// interval and its verdict; writes results.json, table.md and the curves as SVG under
// DIR/NAME/BUDGET/ (attn/experiment/experiment.h). Run again, it resumes where it stopped.
#include <cstdio>
#include <filesystem>
#include <string>

#include "attn/attn.h"
#include "attn/experiment/experiment.h"
#include "../commands.h"

namespace attn::cli {

namespace {

void list_experiments() {
  for (const auto& e : experiment::catalog()) {
    int64_t variants = 0;
    for (const auto& t : e.tracks) variants += int64_t(t.variants.size());
    std::printf("%-20s %s\n%-20s   %lld variants, %zu sub-claims, full budget <= %.0f h; %s\n", e.name.c_str(),
                e.claim.c_str(), "", (long long)variants, e.claims.size(), e.full_hours, e.source.c_str());
  }
}

}  // namespace

void add_experiment(CLI::App& app) {
  auto* c = app.add_subcommand("experiment", "test a published claim about attention models: train its variants over seeds, print the "
                               "table, the intervals and the verdicts, plot the curves");
  struct Opts {
    std::string name, budget = "quick", out = "runs/experiments", docs;
    int seeds = 3, threads = 0;
    bool list = false, no_progress = false;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("name", o->name, "the experiment (--list shows them)");
  c->add_flag("--list", o->list, "list the experiments and their claims");
  c->add_option("--budget", o->budget, "quick (minutes: a check that it runs) or full (the docs' results)")
      ->check(CLI::IsMember({"quick", "full", "smoke"}));
  c->add_option("--seeds", o->seeds, "seeds per variant (0 .. N - 1, the same for every variant)")
      ->check(CLI::PositiveNumber);
  c->add_option("--out", o->out, "where the runs and results go (DIR/NAME/BUDGET/)");
  c->add_option("--threads", o->threads, "threads (0: ATTN_NUM_THREADS or all cores)");
  c->add_flag("--no-progress", o->no_progress, "no progress bar or per-run lines");
  c->add_option("--write-docs", o->docs, "write this Markdown file (docs/experiments.md) from DIR/*/full/results.json");
  c->callback([o] {
    if (o->list) return list_experiments();
    if (!o->docs.empty()) {
      const experiment::DocsWritten w = experiment::write_docs(o->out, o->docs);
      std::printf("%s: %zu experiments with full-budget results; %lld finished runs kept under %s\n",
                  o->docs.c_str(), w.experiments.size(), (long long)w.runs_kept,
                  (std::filesystem::path(o->docs).parent_path() / "experiments" / "runs").c_str());
      return;
    }
    ATTN_CHECK(!o->name.empty(), "attn experiment: expected an experiment's name (attn experiment --list shows them)");
    apply_threads(o->threads);
    experiment::RunOptions ro;
    ro.budget = o->budget;
    ro.seeds = o->seeds;
    ro.out = o->out;
    ro.progress = !o->no_progress;
    ro.command = "attn experiment " + o->name + " --budget " + o->budget + " --seeds " + std::to_string(o->seeds);
    const experiment::Report r = experiment::run_experiment(experiment::find_experiment(o->name), ro);
    std::printf("\n%s\nresults: %s/results.json, %s/table.md\n", r.markdown.c_str(), r.dir.c_str(), r.dir.c_str());
    for (const auto& p : r.plots) std::printf("plot:    %s\n", p.c_str());
  });
}

}  // namespace attn::cli

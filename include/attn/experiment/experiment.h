// Published claims about attention models as experiments: each trains the contrasting models with the one Trainer on
// real data, over several seeds, and reports every variant's mean ± sd, each sub-claim's contrast with
// its 95% interval and a verdict computed from it, the curves as an SVG and the per-seed results as
// JSON.
//
//   const experiment::Experiment& e = experiment::find_experiment("qk-sharing");
//   experiment::RunOptions o;  o.budget = "quick";  o.seeds = 3;  o.out = "runs/experiments";
//   experiment::Report r = experiment::run_experiment(e, o);   // r.markdown: the tables and the verdicts
//   // files: runs/experiments/qk-sharing/quick/{results.json, table.md, curves-fmnist.svg} and one
//   // training run per variant and seed under runs/.../quick/fmnist/<variant>/s<seed>/
//
// An experiment is data: tracks (a data set, a metric, a base recipe and its variants' settings over
// it) and sub-claims (a contrast of variants, a direction, a margin). Adding a claim is adding a table
// entry in src/experiment/catalog.cpp. Every training run is an ordinary resumable `attn train` run:
// a finished one (metrics.json present) is read back, a killed one resumes from its checkpoint, so a
// half-done experiment continues where it stopped.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/experiment/stats.h"
#include "attn/train/trainer.h"

namespace attn::experiment {

// One model trained: its settings over the track's base and budget (keys: see apply_settings).
struct Variant {
  std::string name;          // a directory name: "shared"
  std::string label;         // for tables and plots: "shared W_Q = W_K"
  nlohmann::json settings;   // e.g. {"model_config": {"share_qk": true}}
};

// Variants trained on one data set and compared on one metric.
struct Track {
  std::string name;             // "fmnist"
  std::string data_label;       // "Fashion-MNIST"
  std::string metric;           // metrics.json's key compared: "test_accuracy"
  std::string metric_label;     // "test accuracy (%)"
  double metric_scale = 1;      // shown as metric x scale (100: fractions as points)
  std::string selection;        // metrics.json's key that picks the best of several variants: "val_accuracy"
  std::string curve;            // log.jsonl's key plotted against the step: "val_accuracy"
  nlohmann::json base;          // every variant's settings
  nlohmann::json quick, full;   // the budgets' settings (over base; a variant's own settings win)
  nlohmann::json smoke;         // the smoke budget's (null: 256 examples, one step, 64 evaluated)
  std::vector<std::string> extra_metrics;   // more metrics.json numbers a sub-claim may read (tokens_per_second)
  std::vector<Variant> variants;   // the first is the baseline of the table's differences
  // "attention_distance": each run (a ViT on Fashion-MNIST; its settings must give max_steps) trains in
  // `stages` equal parts, and after each the mean attention distance of every layer and head is measured
  // on the first `probe_images` test images (viz::mean_attention_distance). Its runs then also give the
  // scalars "distance_slope" (the least-squares slope of the layers' mean distance against depth, pixels
  // per layer) and "distance_spread_drop" (the first layer's spread over heads, sd in pixels, minus the
  // last layer's), at the end of training.
  std::string probe;
  int stages = 4;
  int64_t probe_images = 256;
  // One run (seed 0) instead of one per seed of the experiment (--seeds): a model that the runs of a later
  // track start from or learn from (a teacher, a pre-trained encoder), the same for every seed.
  bool once = false;
};

// term: coeff x the metric of `variants` (or the run's scalar `metric`, a probe's); with several variants,
// of the one whose mean `selection` is highest.
struct Term {
  double coeff = 1;
  std::vector<std::string> variants;
  std::string metric;   // "": the track's metric
};

// A sub-claim: per seed, the sum of its terms (in the shown units: the track's metric x its scale, a
// probe's scalar as it is), then its 95% interval over seeds.
struct SubClaim {
  std::string text;
  std::string track;
  std::vector<Term> contrast;
  Direction direction = Direction::better;
  double delta = 0;   // equal: the margin, in the shown units
};

struct Experiment {
  std::string name;      // `attn experiment NAME`
  std::string claim;     // the claim, in a sentence
  std::string source;    // the paper it comes from
  std::string grid;      // the grid in words, for the docs
  double full_hours = 2; // the full budget's bound on 2 cores
  std::vector<Track> tracks;
  std::vector<SubClaim> claims;
};

// Every experiment, in the order of the docs.
const std::vector<Experiment>& catalog();
// Throws attn::Error naming the known experiments when there is none of that name.
const Experiment& find_experiment(const std::string& name);

// Sets the TrainConfig fields that `settings` names: model, task, data, init (strings), model_config (object,
// merged into cfg.model_config), lr, min_lr, warmup_epochs, weight_decay, label_smoothing (numbers), epochs,
// max_steps, warmup_steps, eval_every, checkpoint_every, limit_train, limit_eval, batch (integers; batch
// and limit_eval for every task), augment (boolean), max_minutes (number); distillation: teacher, distill
// (strings), alpha, tau (numbers); translation: vocab_size, max_tokens, limit_test, eval_sentences, beam
// (integers). Any other key, or a value of the wrong type, throws attn::ConfigError. (init and teacher
// are paths here; in a catalog they may be {"run": "TRACK/VARIANT"}, which run_experiment resolves.)
void apply_settings(train::TrainConfig& cfg, const nlohmann::json& settings);

// A run's settings with each {"run": "TRACK/VARIANT"} value (of init or teacher) replaced by the checkpoint of
// that run of experiment `e` under `budget_dir` (out/NAME/BUDGET): the same seed's, or seed 0's when that
// track runs once. The track must come earlier in `e` (its runs are trained first) and have that variant,
// else attn::Error.
nlohmann::json resolve_runs(const Experiment& e, const std::string& track, const nlohmann::json& settings,
                            const std::string& budget_dir, int seed);
// The mean attention distance (L, NH), in pixels, of the ViT in an attn checkpoint, over the first `images`
// Fashion-MNIST test images (normalized as in training) from `data_dir`.
Tensor checkpoint_attention_distance(const std::string& checkpoint, int64_t images,
                                     const std::string& data_dir = "/usr/share/datasets/fashion-mnist");
// From (L, NH) distances: the least-squares slope of the layers' means against the layer index, and the
// first layer's sd over heads minus the last layer's.
double distance_slope(const Tensor& distance);
double distance_spread_drop(const Tensor& distance);

// A run's settings: the track's base, then the budget's (quick | full | smoke: one step of each variant,
// on a few examples, for tests), then the variant's; objects (model_config) merge key by key.
nlohmann::json run_settings(const Track& t, const Variant& v, const std::string& budget);

struct RunOptions {
  std::string budget = "quick";   // quick | full | smoke
  int seeds = 3;                  // seeds 0 .. seeds - 1, the same for every variant (paired)
  std::string out = "runs/experiments";
  bool progress = true;           // the trainer's progress bar, and a line per finished run
  std::string command;            // how it was called, recorded in results.json
};

struct Report {
  std::string dir;               // out/NAME/BUDGET
  nlohmann::json results;        // results.json's content
  std::string markdown;          // table.md's content (also printed by the CLI)
  std::vector<std::string> plots;   // the curves' SVGs, one per track
};

// Trains (or reads back, or resumes) every variant x seed, then writes results.json, table.md and the
// plots under out/NAME/BUDGET/. A run directory trained with other settings than the experiment's now
// is an attn::Error naming it (remove it, or choose another --out).
Report run_experiment(const Experiment& e, const RunOptions& o);

// The Markdown of one experiment from its results.json content: the variants' table per track, the
// sub-claims with their intervals and verdicts. run_experiment writes it as table.md; the docs use it.
std::string results_markdown(const nlohmann::json& results);

struct DocsWritten {
  std::vector<std::string> experiments;   // those with full-budget results, in catalog order
  int64_t runs_kept = 0;                  // finished runs copied under experiments/runs/
};

// docs/experiments.md from the catalog and the full-budget results under `results_root`
// (results_root/NAME/full/results.json, where there is one): each claim, its source, the command, the
// grid, and the table, the plots and the verdicts, or a line saying it has not been run at full budget.
// Each results.json and plot found is copied beside `doc_path` under experiments/ (NAME.json,
// NAME-TRACK.svg), and those copies stand in where results_root has no run. Each finished run under
// results_root/NAME/full, of a finished experiment or not, is kept beside them too, without its
// checkpoint: experiments/runs/NAME/TRACK/VARIANT/sSEED/ holds its run.json, metrics.json, log.jsonl and
// probe.json (where there is one), which the runner reads back instead of training, so copying
// experiments/runs/NAME to results_root/NAME/full carries a half-done experiment to another machine. A run
// whose checkpoint a later track reads (a distillation teacher, a pre-trained model) is not kept: put back
// without it, the runs that read it could not go on, so the runner trains it again first.
DocsWritten write_docs(const std::string& results_root, const std::string& doc_path);

}  // namespace attn::experiment

// Running an experiment: every variant x seed as a resumable training run, then the statistics, the
// verdicts and the files (attn/experiment/experiment.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "attn/core/error.h"
#include "attn/core/json_config.h"
#include "attn/core/parallel.h"
#include "attn/core/progress.h"
#include "attn/experiment/experiment.h"
#include "attn/io/safetensors.h"
#include "attn/core/tensor.h"
#include "attn/viz/plot.h"
#include "figures.h"
#include "run_files.h"

namespace attn::experiment {

namespace fs = std::filesystem;
using nlohmann::json;

void apply_settings(train::TrainConfig& cfg, const json& settings) {
  ConfigReader r(settings, "experiment settings");
  if (r.has("model")) cfg.model = r.get<std::string>("model");
  if (r.has("model_config")) {
    if (!settings.at("model_config").is_object())
      throw ConfigError("experiment settings: key \"model_config\": expected an object, found " +
                        describe_json(settings.at("model_config")));
    cfg.model_config.merge_patch(settings.at("model_config"));
    r.ignore("model_config");
  }
  if (r.has("data")) cfg.data = r.get<std::string>("data");
  if (r.has("task")) cfg.task = r.get<std::string>("task");
  cfg.init = r.get_or<std::string>("init", cfg.init);
  cfg.image.teacher = r.get_or<std::string>("teacher", cfg.image.teacher);
  if (r.has("distill")) cfg.image.distill = r.one_of("distill", {"none", "soft", "hard"});
  cfg.image.alpha = r.get_or<double>("alpha", cfg.image.alpha, Range::unit_interval);
  cfg.image.tau = r.get_or<double>("tau", cfg.image.tau, Range::positive);
  if (r.has("lr")) cfg.lr = r.get<double>("lr", Range::positive);
  if (r.has("min_lr")) cfg.min_lr = r.get<double>("min_lr", Range::non_negative);
  if (r.has("warmup_epochs")) cfg.warmup_epochs = r.get<double>("warmup_epochs", Range::non_negative);
  if (r.has("warmup_steps")) cfg.warmup_steps = r.get<int64_t>("warmup_steps", Range::non_negative);
  if (r.has("weight_decay")) cfg.weight_decay = r.get<double>("weight_decay", Range::non_negative);
  if (r.has("label_smoothing")) cfg.label_smoothing = r.get<double>("label_smoothing", Range::probability);
  if (r.has("epochs")) cfg.epochs = r.get<int64_t>("epochs", Range::positive);
  cfg.max_steps = r.get_or<int64_t>("max_steps", cfg.max_steps, Range::non_negative);
  cfg.eval_every = r.get_or<int64_t>("eval_every", cfg.eval_every, Range::non_negative);
  cfg.checkpoint_every = r.get_or<int64_t>("checkpoint_every", cfg.checkpoint_every, Range::non_negative);
  cfg.limit_train = r.get_or<int64_t>("limit_train", cfg.limit_train, Range::non_negative);
  if (r.has("limit_eval"))
    cfg.image.limit_eval = cfg.text.limit_eval = cfg.pretrain.limit_eval =
        r.get<int64_t>("limit_eval", Range::non_negative);
  if (r.has("batch")) cfg.image.batch = cfg.text.batch = cfg.pretrain.batch = r.get<int64_t>("batch", Range::positive);
  cfg.image.augment = r.get_or("augment", cfg.image.augment);
  cfg.max_minutes = r.get_or<double>("max_minutes", cfg.max_minutes, Range::non_negative);
  cfg.translation.vocab_size = r.get_or<int64_t>("vocab_size", cfg.translation.vocab_size, Range::positive);
  cfg.translation.max_tokens = r.get_or<int64_t>("max_tokens", cfg.translation.max_tokens, Range::positive);
  cfg.translation.limit_test = r.get_or<int64_t>("limit_test", cfg.translation.limit_test, Range::non_negative);
  cfg.translation.eval_sentences =
      r.get_or<int64_t>("eval_sentences", cfg.translation.eval_sentences, Range::non_negative);
  cfg.translation.beam = r.get_or<int64_t>("beam", cfg.translation.beam, Range::positive);
  r.finish();
}

json run_settings(const Track& t, const Variant& v, const std::string& budget) {
  ATTN_CHECK(budget == "quick" || budget == "full" || budget == "smoke",
             "attn experiment: expected a budget of quick, full or smoke, got '", budget, "'");
  json s = t.base.is_null() ? json::object() : t.base;
  if (budget == "smoke") {
    // One step of each variant on a few examples: builds and runs every variant (tests).
    s.merge_patch(t.smoke.is_null() ? json{{"limit_train", 256}, {"max_steps", 1}, {"warmup_steps", 1}, {"limit_eval", 64}}
                                     : t.smoke);
  } else {
    s.merge_patch(budget == "quick" ? t.quick : t.full);
  }
  s.merge_patch(v.settings);
  if (budget == "smoke") s["max_steps"] = t.probe.empty() ? 1 : t.stages;   // a probe measures after each stage
  return s;
}

json resolve_runs(const Experiment& e, const std::string& track, const json& settings, const std::string& budget_dir,
                  int seed) {
  json s = settings;
  for (const char* key : kRunReferenceKeys) {
    if (!s.contains(key) || !s.at(key).is_object()) continue;
    const json& ref = s.at(key);
    ATTN_CHECK(ref.size() == 1 && ref.contains("run") && ref.at("run").is_string(), "attn experiment: \"", key,
               "\" expected a path or {\"run\": \"TRACK/VARIANT\"}, found ", ref.dump());
    const std::string name = ref.at("run").get<std::string>();
    const size_t slash = name.find('/');
    const std::string ref_track = name.substr(0, slash), ref_variant = slash == std::string::npos ? "" : name.substr(slash + 1);
    const Track* found = nullptr;
    for (const Track& t : e.tracks) {
      if (t.name == track) break;   // only an earlier track's runs are trained by then
      if (t.name == ref_track) found = &t;
    }
    const bool has_variant = found && std::any_of(found->variants.begin(), found->variants.end(),
                                                  [&](const Variant& v) { return v.name == ref_variant; });
    ATTN_CHECK(has_variant, "attn experiment: ", e.name, "/", track, " takes its ", key, " from the run '", name,
               "', which no earlier track of the experiment has");
    s[key] = budget_dir + "/" + ref_track + "/" + ref_variant + "/s" + std::to_string(found->once ? 0 : seed) +
             "/checkpoint.safetensors";
  }
  return s;
}

namespace {

// What one finished training run gave.
struct RunResult {
  double metric = NAN, selection = NAN, seconds = NAN;
  std::string isa;               // the kernels' path it trained with ("" where its metrics.json does not say)
  std::vector<double> steps, curve;
  json extra = json::object();   // a probe's scalars
  json probe;                    // a probe's stages: [{"step": s, "distance": (L, NH) rows}, ...]
};

json read_json_file(const std::string& path) {
  std::ifstream f(path);
  ATTN_CHECK(f, "attn experiment: cannot read '", path, "'");
  try {
    return json::parse(f);
  } catch (const json::exception& e) {
    throw Error("attn experiment: '" + path + "' is not JSON: " + e.what());
  }
}

double number_at(const json& j, const std::string& key, const std::string& path) {
  ATTN_CHECK(j.contains(key) && j.at(key).is_number(), "attn experiment: '", path, "' has no number \"", key, "\"");
  return j.at(key).get<double>();
}

RunResult read_run(const Track& t, const std::string& dir) {
  RunResult r;
  const std::string mpath = dir + "/metrics.json";
  const json m = read_json_file(mpath);
  r.metric = number_at(m, t.metric, mpath);
  r.selection = number_at(m, t.selection, mpath);
  r.seconds = number_at(m, "seconds", mpath);
  if (m.contains("isa") && m.at("isa").is_string()) r.isa = m.at("isa").get<std::string>();
  for (const std::string& k : t.extra_metrics) r.extra[k] = number_at(m, k, mpath);
  std::ifstream log(dir + "/log.jsonl");
  std::string line;
  while (std::getline(log, line)) {
    if (line.empty()) continue;
    const json rec = json::parse(line, nullptr, false);
    if (rec.is_discarded() || !rec.contains("step") || !rec.contains(t.curve)) continue;
    r.steps.push_back(rec.at("step").get<double>());
    r.curve.push_back(rec.at(t.curve).get<double>() * t.metric_scale);
  }
  return r;
}

Tensor distance_tensor(const json& rows) {
  std::vector<double> v;
  int64_t L = 0, H = 0;
  for (const auto& r : rows) {
    ++L;
    H = int64_t(r.size());
    for (const auto& x : r) v.push_back(x.get<double>());
  }
  return Tensor::from_vector(v, {L, H});
}

// The probe's stages: train to each stage's end (stop_after, a checkpoint there), measure, record in
// probe.json (atomically), resume for the next. A stage already in probe.json is not run again.
void run_probe_stages(const Track& t, train::TrainConfig cfg, const std::string& dir) {
  ATTN_CHECK(t.probe == "attention_distance", "attn experiment: unknown probe '", t.probe, "'");
  ATTN_CHECK(cfg.max_steps > 0 && cfg.max_steps % t.stages == 0, "attn experiment: a probe's track needs max_steps, "
             "a multiple of its ", t.stages, " stages, got ", cfg.max_steps);
  const std::string ppath = dir + "/probe.json";
  json probe = fs::exists(ppath) ? read_json_file(ppath) : json::array();
  const int64_t stage = cfg.max_steps / t.stages;
  cfg.eval_every = stage;
  for (int k = int(probe.size()) + 1; k <= t.stages; ++k) {
    cfg.stop_after = k < t.stages ? stage * k : 0;
    cfg.resume = fs::exists(dir + "/checkpoint.safetensors");
    if (k < t.stages || !fs::exists(dir + "/metrics.json")) train::train(cfg);
    const Tensor d = checkpoint_attention_distance(dir + "/checkpoint.safetensors", t.probe_images);
    json rows = json::array();
    for (int64_t l = 0; l < d.size(0); ++l) {
      json row = json::array();
      for (int64_t h = 0; h < d.size(1); ++h) row.push_back(d.at({l, h}));
      rows.push_back(row);
    }
    probe.push_back({{"step", stage * k}, {"distance", rows}});
    io::write_file_atomic(ppath, probe.dump() + "\n");
  }
}

// One run: read back when finished, resumed when a checkpoint is there, else trained from the start.
// The settings are recorded in run.json; a directory of other settings is refused.
// `resolved`: the settings with the runs they name replaced by paths (resolve_runs); run.json keeps `settings`.
RunResult train_or_read(const Track& t, const json& settings, const json& resolved, uint64_t seed,
                        const std::string& dir, bool progress) {
  fs::create_directories(dir);
  const json want = run_record(settings, seed);
  const std::string rpath = dir + "/run.json";
  if (fs::exists(rpath)) {
    const json had = read_json_file(rpath);
    ATTN_CHECK(had == want, "attn experiment: '", dir, "' was trained with ", had.dump(), "; this experiment now runs ",
               want.dump(), ". Remove that directory, or choose another --out");
  } else {
    io::write_file_atomic(rpath, want.dump(2) + "\n");
  }
  train::TrainConfig cfg;
  apply_settings(cfg, resolved);
  for (const char* key : kRunReferenceKeys)
    if (settings.contains(key) && settings.at(key).is_object())
      ATTN_CHECK(fs::exists(resolved.at(key).get<std::string>()), "attn experiment: '", dir, "' takes its ", key,
                 " from the run ", settings.at(key).at("run").dump(), ", whose checkpoint '",
                 resolved.at(key).get<std::string>(), "' is not there");
  cfg.seed = seed;
  cfg.out = dir;
  cfg.quiet = true;
  cfg.progress = progress;
  if (!t.probe.empty()) {
    run_probe_stages(t, cfg, dir);
  } else if (!fs::exists(dir + "/metrics.json")) {
    cfg.resume = fs::exists(dir + "/checkpoint.safetensors");
    train::train(cfg);
  }
  RunResult r = read_run(t, dir);
  if (!t.probe.empty()) {
    r.probe = read_json_file(dir + "/probe.json");
    const Tensor d = distance_tensor(r.probe.back().at("distance"));
    r.extra["distance_slope"] = distance_slope(d);
    r.extra["distance_spread_drop"] = distance_spread_drop(d);
  }
  return r;
}

// The kernels' paths the runs trained with, from their metrics.json: "avx512", or, where the runs of an
// experiment came from different CPUs, each with its count ("avx512 (24 runs), avx2 (12 runs)"); a run
// whose metrics.json does not record it counts as "not recorded".
std::string runs_isa(const std::map<std::string, int64_t>& counts) {
  std::vector<std::pair<int64_t, std::string>> order;
  for (const auto& [isa, n] : counts) order.emplace_back(-n, isa.empty() ? "not recorded" : isa);
  std::sort(order.begin(), order.end());
  if (order.size() == 1) return order[0].second;
  std::string out;
  for (const auto& [n, isa] : order)
    out += (out.empty() ? "" : ", ") + isa + " (" + std::to_string(-n) + (n == -1 ? " run)" : " runs)");
  return out;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  return buf;
}

// The mean curve over seeds (the common prefix of their evaluation steps).
viz::Series mean_curve(const std::string& label, const std::vector<RunResult>& runs) {
  viz::Series s;
  s.name = label;
  size_t n = runs.empty() ? 0 : runs[0].steps.size();
  for (const auto& r : runs) n = std::min(n, r.steps.size());
  for (size_t i = 0; i < n; ++i) {
    double sum = 0;
    for (const auto& r : runs) sum += r.curve[i];
    s.x.push_back(runs[0].steps[i]);
    s.y.push_back(sum / double(runs.size()));
  }
  return s;
}

// The probe's curves: each layer's mean distance (over heads and seeds) against the step.
std::string plot_distances(const Experiment& e, const Track& t, const std::vector<RunResult>& runs,
                           const std::string& dir) {
  std::vector<viz::Series> series;
  const size_t stages = runs.front().probe.size();
  const size_t layers = runs.front().probe.at(0).at("distance").size();
  for (size_t l = 0; l < layers; ++l) {
    viz::Series s;
    s.name = "layer " + std::to_string(l + 1);
    s.markers = stages < 3;
    for (size_t k = 0; k < stages; ++k) {
      double sum = 0;
      int64_t n = 0;
      for (const auto& r : runs)
        for (const auto& h : r.probe.at(k).at("distance").at(l)) {
          sum += h.get<double>();
          ++n;
        }
      s.x.push_back(runs.front().probe.at(k).at("step").get<double>());
      s.y.push_back(sum / double(n));
    }
    series.push_back(s);
  }
  const std::string path = dir + "/" + figure_file("distance", t.name);
  viz::write_svg_plot(path, e.name + ": mean attention distance (pixels) per layer, mean of heads and seeds", "step",
                      series);
  return path;
}

json interval_json(const Interval& ci) {
  return {{"estimate", ci.estimate}, {"lo", ci.defined ? json(ci.lo) : json(nullptr)},
          {"hi", ci.defined ? json(ci.hi) : json(nullptr)}, {"n", ci.n}};
}

// The variants' table of one track: per-seed values, mean ± sd, the paired difference to the baseline.
json track_results(const Track& t, const std::map<std::string, std::vector<RunResult>>& runs, int seeds) {
  json variants = json::array();
  const std::vector<RunResult>& base = runs.at(t.variants.front().name);
  for (const Variant& v : t.variants) {
    const std::vector<RunResult>& rs = runs.at(v.name);
    std::vector<double> vals, sel, secs, diffs;
    json per_seed = json::array();
    for (int s = 0; s < seeds; ++s) {
      vals.push_back(rs[s].metric * t.metric_scale);
      sel.push_back(rs[s].selection * t.metric_scale);
      secs.push_back(rs[s].seconds);
      diffs.push_back((rs[s].metric - base[s].metric) * t.metric_scale);
      per_seed.push_back({{"seed", s}, {"metric", vals.back()}, {"selection", sel.back()}, {"seconds", secs.back()},
                          {"steps", rs[s].steps}, {"curve", rs[s].curve}, {"extra", rs[s].extra}});
      if (!rs[s].probe.is_null()) per_seed.back()["probe"] = rs[s].probe;
    }
    const Summary m = summarize(vals);
    json row = {{"name", v.name}, {"label", v.label}, {"settings", v.settings}, {"mean", m.mean}, {"sd", m.sd},
                {"selection_mean", summarize(sel).mean}, {"seconds_mean", summarize(secs).mean}, {"runs", per_seed}};
    if (&v != &t.variants.front()) row["difference"] = interval_json(mean_interval(diffs));
    variants.push_back(row);
  }
  return {{"name", t.name}, {"data", t.data_label}, {"metric", t.metric}, {"metric_label", t.metric_label},
          {"baseline", t.variants.front().name}, {"variants", variants}};
}

// A sub-claim's per-seed contrast, its interval and verdict; a term of several variants takes the one with
// the highest mean selection metric.
json claim_results(const SubClaim& c, const json& track) {
  std::map<std::string, const json*> by_name;
  for (const auto& v : track.at("variants")) by_name[v.at("name").get<std::string>()] = &v;
  const int seeds = int(track.at("variants").at(0).at("runs").size());
  std::vector<double> per_seed(seeds, 0.0);
  json picked = json::array();
  bool best_of = false;
  for (const Term& term : c.contrast) {
    best_of = best_of || term.variants.size() > 1;
    const json* best = nullptr;
    for (const std::string& name : term.variants) {
      ATTN_CHECK(by_name.count(name), "attn experiment: the sub-claim '", c.text, "' names the variant '", name,
                 "', which track '", c.track, "' does not have");
      const json* v = by_name.at(name);
      if (!best || v->at("selection_mean").get<double>() > best->at("selection_mean").get<double>()) best = v;
    }
    picked.push_back(best->at("name"));
    for (int s = 0; s < seeds; ++s) {
      const json& run = best->at("runs").at(s);
      ATTN_CHECK(term.metric.empty() || run.at("extra").contains(term.metric), "attn experiment: the sub-claim '",
                 c.text, "' reads '", term.metric, "', which the runs of '", best->at("name").get<std::string>(),
                 "' do not give");
      per_seed[s] += term.coeff * (term.metric.empty() ? run.at("metric") : run.at("extra").at(term.metric)).get<double>();
    }
  }
  const Interval ci = mean_interval(per_seed);
  return {{"text", c.text}, {"track", c.track}, {"direction", direction_name(c.direction)}, {"delta", c.delta},
          {"interval", interval_json(ci)}, {"per_seed", per_seed}, {"picked", picked}, {"best_of", best_of},
          {"verdict", verdict_name(judge(c.direction, c.delta, ci))}};
}

}  // namespace

Report run_experiment(const Experiment& e, const RunOptions& o) {
  ATTN_CHECK(o.seeds >= 1, "attn experiment: expected --seeds >= 1, got ", o.seeds);
  Report rep;
  rep.dir = o.out + "/" + e.name + "/" + o.budget;
  int64_t total = 0, done = 0;
  auto seeds_of = [&](const Track& t) { return t.once ? 1 : o.seeds; };
  for (const Track& t : e.tracks) total += int64_t(t.variants.size()) * seeds_of(t);
  const auto start = std::chrono::steady_clock::now();
  double trained_seconds = 0;
  int64_t trained = 0;
  std::map<std::string, int64_t> isa_runs;
  json tracks = json::array();
  for (const Track& t : e.tracks) {
    std::map<std::string, std::vector<RunResult>> runs;
    for (const Variant& v : t.variants) {
      const json settings = run_settings(t, v, o.budget);
      for (int s = 0; s < seeds_of(t); ++s) {
        const std::string dir = rep.dir + "/" + t.name + "/" + v.name + "/" + seed_dir(s);
        const bool finished = fs::exists(dir + "/metrics.json");
        const auto t0 = std::chrono::steady_clock::now();
        runs[v.name].push_back(
            train_or_read(t, settings, resolve_runs(e, t.name, settings, rep.dir, s), uint64_t(s), dir, o.progress));
        ++done;
        ++isa_runs[runs[v.name].back().isa];
        if (!finished) {
          trained_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          ++trained;
        }
        if (o.progress)
          std::printf("experiment %s [%lld/%lld] %s/%s seed %d: %s %.2f%s%s\n", e.name.c_str(), (long long)done,
                      (long long)total, t.name.c_str(), v.name.c_str(), s, t.metric.c_str(),
                      runs[v.name].back().metric * t.metric_scale, finished ? " (done before)" : "",
                      trained > 0 && done < total
                          ? ("; about " + format_duration(trained_seconds / double(trained) * double(total - done)) +
                             " left").c_str()
                          : "");
        std::fflush(stdout);
      }
    }
    tracks.push_back(track_results(t, runs, seeds_of(t)));
    std::vector<viz::Series> series;
    for (const Variant& v : t.variants) series.push_back(mean_curve(v.label, runs.at(v.name)));
    const std::string plot = rep.dir + "/" + figure_file("curves", t.name);
    viz::write_svg_plot(plot, e.name + ": " + t.data_label + ", " + t.curve + " (mean of " +
                                  std::to_string(seeds_of(t)) + (seeds_of(t) == 1 ? " seed)" : " seeds)"), "step", series);
    rep.plots.push_back(plot);
    if (!t.probe.empty()) rep.plots.push_back(plot_distances(e, t, runs.at(t.variants.front().name), rep.dir));
  }
  json claims = json::array();
  for (const SubClaim& c : e.claims) {
    const auto it = std::find_if(tracks.begin(), tracks.end(), [&](const json& t) { return t.at("name") == c.track; });
    ATTN_CHECK(it != tracks.end(), "attn experiment: the sub-claim '", c.text, "' names the track '", c.track,
               "', which experiment '", e.name, "' does not have");
    claims.push_back(claim_results(c, *it));
  }
  rep.results = {{"experiment", e.name}, {"claim", e.claim}, {"source", e.source}, {"grid", e.grid},
                 {"budget", o.budget}, {"seeds", o.seeds}, {"date", utc_now()}, {"isa", runs_isa(isa_runs)},
                 {"threads", get_num_threads()}, {"command", o.command}, {"tracks", tracks}, {"claims", claims},
                 {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()}};
  rep.markdown = results_markdown(rep.results);
  io::write_file_atomic(rep.dir + "/results.json", rep.results.dump(1) + "\n");
  io::write_file_atomic(rep.dir + "/table.md", rep.markdown);
  return rep;
}

}  // namespace attn::experiment

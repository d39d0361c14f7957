// The training loop shared by every task (see include/attn/train/trainer.h).
#include "attn/train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "attn/core/error.h"
#include "attn/core/parallel.h"
#include "attn/core/rng.h"
#include "attn/io/checkpoint.h"
#include "attn/io/safetensors.h"
#include "attn/ops/elementwise.h"
#include "attn/optim/adam.h"
#include "attn/optim/clip.h"
#include "attn/optim/schedule.h"
#include "attn/train/checkpoint.h"
#include "attn/train/ema.h"
#include "attn/viz/plot.h"
#include "attn/core/progress.h"
#include "resume_state.h"

namespace attn::train {

// ---- results and settings ----

double TrainResult::metric(const std::string& key) const {
  if (!metrics.is_object() || !metrics.contains(key) || !metrics[key].is_number()) return NAN;
  return metrics[key].get<double>();
}

Precision parse_precision(const std::string& s) {
  if (s == "f32") return Precision::f32;
  if (s == "bf16") return Precision::bf16;
  fail("train: expected precision f32 or bf16, got '", s, "'");
}

// ---- task registry ----

namespace {

std::map<std::string, TaskFactory>& task_table() {
  static std::map<std::string, TaskFactory> t;
  return t;
}

}  // namespace

void register_builtin_tasks();   // tasks/builtin.cpp

void register_task(const std::string& kind, TaskFactory make) { task_table()[kind] = std::move(make); }

std::vector<std::string> task_kinds() {
  register_builtin_tasks();
  std::vector<std::string> out;
  for (const auto& [k, v] : task_table()) out.push_back(k);
  return out;
}

std::unique_ptr<Task> make_task(const TrainConfig& cfg) {
  register_builtin_tasks();
  std::string name = cfg.model;
  std::optional<std::string> task = cfg.task;
  if (cfg.resume) {
    // The checkpoint's model and task decide (a resumed run needs no --model or --task).
    const std::string ckpt = cfg.out.value_or("") + "/checkpoint.safetensors";
    if (cfg.out && std::filesystem::exists(ckpt)) {
      const nlohmann::json meta = io::read_checkpoint_metadata(ckpt);
      name = checkpoint_model_name(meta, ckpt);
      if (meta.contains("task") && meta["task"].is_string()) {
        const std::string saved = meta["task"].get<std::string>();
        ATTN_CHECK(!task || *task == saved, "train --resume: '", ckpt, "' was trained on the task '", saved,
                   "'; this call asks for --task ", *task);
        task = saved;
      }
    }
  }
  if (task) {
    auto it = task_table().find(*task);
    if (it == task_table().end()) {
      std::string known;
      for (const auto& [k, v] : task_table()) known += (known.empty() ? "" : ", ") + k;
      fail("train: expected --task one of ", known, ", got '", *task, "'");
    }
    return it->second(cfg);
  }
  const std::string kind = models::model_entry(name).task;
  auto it = task_table().find(kind);
  ATTN_CHECK(it != task_table().end(), "train: the model ", name, " is trained on the task '", kind,
             "', which has no trainer task", kind == models::kMaskedLM ? " (fine-tune it with --task classify "
             "or --task tag)" : "");
  return it->second(cfg);
}

namespace {

std::string nonfinite_name(double v) { return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"); }

// The settings every task shares, as the CLI spells them; none changes the data order.
std::vector<Task::Setting> common_settings(const TrainConfig& c, int64_t epochs, const OptimDefaults& d) {
  std::vector<Task::Setting> s = {{"--epochs", epochs, false},
                                  {"--max-steps", c.max_steps, false},
                                  {"--lr", c.lr.value_or(d.lr), false}};
  if (d.schedule != OptimDefaults::Schedule::inverse_sqrt) {
    s.push_back({"--min-lr", c.min_lr.value_or(d.min_lr), false});
    s.push_back({"--warmup-epochs", c.warmup_epochs.value_or(d.warmup_epochs), false});
    if (c.warmup_steps) s.push_back({"--warmup-steps", *c.warmup_steps, false});
    if (c.schedule) s.push_back({"--schedule", *c.schedule, false});
  } else {
    s.push_back({"--warmup-steps", c.warmup_steps.value_or(d.warmup_steps), false});
  }
  s.push_back({"--wd", c.weight_decay.value_or(d.weight_decay), false});
  s.push_back({"--label-smoothing", c.label_smoothing, false});
  s.push_back({"--clip-grad", c.clip_grad, false});
  s.push_back({"--ema-decay", c.ema_decay, false});
  if (c.grad_accum != 1) s.push_back({"--grad-accum", c.grad_accum, true});
  return s;
}

// An error naming every data-order setting of this call that differs from the checkpoint's; a note
// (stderr, unless quiet) for the others.
void check_resume_settings(const std::vector<Task::Setting>& now_settings, const nlohmann::json& train_state,
                           const std::string& ckpt, bool quiet) {
  if (!train_state.contains("settings") || !train_state["settings"].is_object()) return;
  const nlohmann::json& saved = train_state["settings"];
  std::string then, now, changed;
  for (const Task::Setting& st : now_settings) {
    if (!saved.contains(st.flag) || saved[st.flag] == st.value) continue;
    if (st.order) {
      then += (then.empty() ? "" : ", ") + st.flag + " " + saved[st.flag].dump();
      now += (now.empty() ? "" : ", ") + st.flag + " " + st.value.dump();
    } else {
      changed += (changed.empty() ? "" : ", ") + st.flag + " " + st.value.dump() + " (was " + saved[st.flag].dump() + ")";
    }
  }
  if (!then.empty())
    fail("train --resume: '", ckpt, "' was trained with ", then, "; this call has ", now,
         ". The data order and augmentation depend on these: pass the run's own values to continue it");
  if (!changed.empty() && !quiet)
    std::fprintf(stderr, "resuming with changed settings: %s; the run no longer equals an uninterrupted one\n",
                 changed.c_str());
}

nlohmann::json window_json(const Window& w) { return {{"loss", w.loss}, {"steps", w.steps}, {"items", w.items}, {"sums", w.sums}}; }

void add_sums(Window& w, const std::vector<double>& sums) {
  if (w.sums.size() < sums.size()) w.sums.resize(sums.size(), 0.0);
  for (size_t i = 0; i < sums.size(); ++i) w.sums[i] += sums[i];
}

// The optimizer, its schedule and the lr of a 0-based step, as the task's defaults and the config say.
struct Optimization {
  std::unique_ptr<optim::AdamW> opt;
  std::unique_ptr<optim::Schedule> sched;
  int64_t offset = 0;   // the inverse-sqrt schedule counts steps from 1, as the paper's step_num
  void apply(int64_t step) const { sched->apply(*opt, step + offset); }
  double lr(int64_t step) const { return sched->lr(step + offset); }
};

Optimization make_optimization(const TrainConfig& c, const OptimDefaults& d, Task& task, int64_t per_epoch,
                               int64_t total) {
  Optimization o;
  const double lr = c.lr.value_or(d.lr), wd = c.weight_decay.value_or(d.weight_decay);
  OptimDefaults::Schedule kind = d.schedule;
  if (c.schedule && kind != OptimDefaults::Schedule::inverse_sqrt) {
    ATTN_CHECK(*c.schedule == "cosine" || *c.schedule == "linear", "train: expected --schedule cosine | linear, got '",
               *c.schedule, "'");
    kind = *c.schedule == "linear" ? OptimDefaults::Schedule::warmup_linear : OptimDefaults::Schedule::warmup_cosine;
  }
  const bool cosine = kind != OptimDefaults::Schedule::inverse_sqrt;
  const int64_t warmup =
      c.warmup_steps ? *c.warmup_steps : int64_t(c.warmup_epochs.value_or(d.warmup_epochs) * double(per_epoch));
  auto groups = optim::param_groups_weight_decay(*task.model(), wd);
  o.opt = std::make_unique<optim::AdamW>(groups, optim::AdamWOptions{.lr = cosine ? lr : 0.0, .beta1 = 0.9,
                                                                      .beta2 = c.beta2.value_or(d.beta2),
                                                                      .eps = c.eps.value_or(d.eps), .weight_decay = wd});
  if (kind == OptimDefaults::Schedule::warmup_linear) {
    // BERT's: lr * step / warmup during warm-up, then linear to min_lr at the last step.
    const double min_lr = c.min_lr.value_or(d.min_lr);
    o.sched = std::make_unique<optim::LambdaSchedule>([lr, min_lr, warmup, total](int64_t step) {
      if (step < warmup) return lr * double(step + 1) / double(warmup);
      const double left = double(std::max<int64_t>(total - step, 0)) / double(std::max<int64_t>(total - warmup, 1));
      return min_lr + (lr - min_lr) * left;
    });
  } else if (cosine) {
    o.sched = std::make_unique<optim::WarmupCosine>(optim::WarmupCosineOptions{
        .base_lr = lr, .total_steps = total, .warmup_steps = warmup,
        .warmup_lr_init = lr * 1e-3, .min_lr = c.min_lr.value_or(d.min_lr)});
  } else {
    o.sched = std::make_unique<optim::InverseSqrt>(optim::InverseSqrtOptions{
        .d_model = task.d_model(), .warmup_steps = std::max<int64_t>(1, c.warmup_steps.value_or(d.warmup_steps)),
        .scale = lr});
    o.offset = 1;
  }
  return o;
}

// One run: the state the loop and its checkpoints share.
class Run {
 public:
  Run(TrainConfig cfg, const std::vector<std::function<void(nn::Module&)>>& grad_hooks,
      const std::vector<std::function<void(const StepInfo&)>>& step_callbacks)
      : cfg_(std::move(cfg)), grad_hooks_(grad_hooks), step_callbacks_(step_callbacks) {}

  TrainResult run();

 private:
  void setup();
  void train_step();
  void evaluate_window();
  void save(int64_t at_step);
  void write_log_from_history();
  void write_plot();
  double run_seconds() const { return prior_seconds_ + elapsed(); }
  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start_).count(); }
  void open_bar();

  TrainConfig cfg_;
  const std::vector<std::function<void(nn::Module&)>>& grad_hooks_;
  const std::vector<std::function<void(const StepInfo&)>>& step_callbacks_;
  std::unique_ptr<Task> task_;
  OptimDefaults defaults_;
  std::string out_;
  int64_t epochs_ = 0, per_epoch_ = 0, total_ = 0, stop_ = 0, eval_every_ = 0;
  Optimization optim_;
  std::unique_ptr<ModelEma> ema_;
  nlohmann::json meta_, train_state_, history_ = nlohmann::json::array(), settings_json_;
  ResumeState resume_;
  int64_t step_ = 0, items_ = 0, prior_items_ = 0;
  double prior_seconds_ = 0;
  Window window_;
  std::chrono::steady_clock::time_point t_start_;
  std::unique_ptr<ProgressBar> bar_;
  bool over_time_ = false;
  TrainResult res_;
};

void Run::setup() {
  ATTN_CHECK(cfg_.grad_accum >= 1, "train: expected --grad-accum >= 1, got ", cfg_.grad_accum);
  ATTN_CHECK(cfg_.precision == Precision::f32, "train: bf16 mixed-precision training is not available yet; "
             "use --precision f32 (bf16 runs inference only: attn predict/bench --dtype bf16)");
  ATTN_CHECK(cfg_.ema_decay >= 0 && cfg_.ema_decay < 1, "train: expected --ema-decay in [0, 1), got ", cfg_.ema_decay);
  task_ = make_task(cfg_);
  defaults_ = task_->defaults();
  if (!cfg_.out) cfg_.out = defaults_.out;
  out_ = *cfg_.out;
  epochs_ = cfg_.epochs.value_or(defaults_.epochs);
  ATTN_CHECK(epochs_ > 0, "train: expected epochs > 0, got ", epochs_);
  std::filesystem::create_directories(out_);
  ATTN_CHECK(std::filesystem::is_directory(out_), "train: cannot create output directory '", out_, "'");
  res_.checkpoint = out_ + "/checkpoint.safetensors";
  res_.log = out_ + "/log.jsonl";
  res_.plot = out_ + "/curve.svg";
  res_.metrics_path = out_ + "/metrics.json";
  // What writes a killed run left half done (its temporaries): a run owns its directory.
  for (const std::string& f : {res_.checkpoint, res_.log, res_.plot, res_.metrics_path}) io::remove_unfinished_writes(f);

  if (cfg_.resume) {
    ATTN_CHECK(std::filesystem::exists(res_.checkpoint), "train --resume: there is no checkpoint to resume at '",
               res_.checkpoint, "' (--out ", out_, "); run without --resume to start training");
    meta_ = io::read_checkpoint_metadata(res_.checkpoint);
    // Checked before the task reads any data; the history's records as the task reads them (the
    // plot, the final metrics).
    resume_ = read_resume_state(meta_, res_.checkpoint);
    with_checkpoint_name(res_.checkpoint, "train_state", [&] { task_->plot_series(resume_.history); });
    train_state_ = meta_["train_state"];
  }
  // The weights draw from the seeded global generator (the task builds the model).
  manual_seed(cfg_.seed);
  if (cfg_.resume) with_checkpoint_name(res_.checkpoint, "", [&] { task_->setup(&meta_); });
  else task_->setup(nullptr);
  task_->model()->train();

  ATTN_CHECK(task_->batches_per_epoch() >= cfg_.grad_accum, "train: an epoch has ", task_->batches_per_epoch(),
             " batches, fewer than --grad-accum ", cfg_.grad_accum);
  per_epoch_ = task_->batches_per_epoch() / cfg_.grad_accum;
  total_ = epochs_ * per_epoch_;
  if (cfg_.max_steps > 0) total_ = cfg_.epochs ? std::min(total_, cfg_.max_steps) : cfg_.max_steps;
  stop_ = cfg_.stop_after > 0 ? std::min(total_, cfg_.stop_after) : total_;
  eval_every_ = cfg_.eval_every > 0 ? cfg_.eval_every : per_epoch_;

  std::vector<Task::Setting> settings = task_->settings();
  for (auto& s : common_settings(cfg_, epochs_, defaults_)) settings.push_back(std::move(s));
  settings_json_ = nlohmann::json::object();
  for (const auto& s : settings) settings_json_[s.flag] = s.value;
  if (cfg_.resume) check_resume_settings(settings, train_state_, res_.checkpoint, cfg_.quiet);

  optim_ = make_optimization(cfg_, defaults_, *task_, per_epoch_, total_);
  if (cfg_.ema_decay > 0) ema_ = std::make_unique<ModelEma>(ModelEma::of(*task_->model(), cfg_.ema_decay));
  if (cfg_.resume) {
    // The EMA comes from the same file as the weights it follows (one write commits both).
    const bool saved_ema = ema_ && io::checkpoint_has_ema(io::open_checkpoint(res_.checkpoint));
    load_checkpoint(res_.checkpoint, *task_->model(), optim_.opt.get(), saved_ema ? &ema_->module() : nullptr);
    if (ema_ && !saved_ema) {
      ema_->set(*task_->model());
      if (!cfg_.quiet) std::fprintf(stderr, "the checkpoint has no EMA weights: the EMA starts from its weights\n");
    }
    step_ = resume_.step;
    default_generator().set_state(resume_.rng_seed, resume_.rng_offset);
    history_ = resume_.history;
    prior_seconds_ = resume_.seconds;
    prior_items_ = resume_.items;
    if (resume_.window && step_ % eval_every_ != 0) window_ = *resume_.window;
    if (!cfg_.quiet) std::fprintf(stderr, "resuming %s from step %lld\n", res_.checkpoint.c_str(), (long long)step_);
  }
  task_->seek(step_ * cfg_.grad_accum, train_state_);
  write_log_from_history();
}

// The log is rewritten from the checkpoint's history, so records after it (a killed run) go.
void Run::write_log_from_history() {
  std::string text;
  for (const auto& h : history_) text += h.dump() + "\n";
  io::write_file_atomic(res_.log, text);
}

void Run::write_plot() {
  viz::write_svg_plot(res_.plot, task_->plot_title(), task_->plot_x(),
                 task_->plot_series(history_));
}

void Run::save(int64_t at_step) {
  nlohmann::json ts = {{"step", at_step},
                       {"seconds", run_seconds()},
                       {"items", prior_items_ + items_},
                       {"rng_seed", default_generator().seed()},
                       {"rng_offset", default_generator().offset()},
                       {"history", history_},
                       {"window", window_json(window_)},
                       {"settings", settings_json_}};
  ts.update(task_->position());
  ts.update(task_->train_state_extra());
  // One file, one rename: the weights, the optimizer, the EMA and the state above are of one step.
  nlohmann::json meta = {{"config", task_->model()->config()}, {"train_state", ts}};
  meta.update(task_->checkpoint_extra());
  save_checkpoint(res_.checkpoint, *task_->model(), optim_.opt.get(), meta, ema_ ? &ema_->module() : nullptr);
}

void Run::open_bar() {
  if (!cfg_.progress || bar_) return;
  const int64_t upto = std::min(total_, (step_ / eval_every_ + 1) * eval_every_);
  std::string label;
  if (cfg_.eval_every == 0)
    label = "epoch " + std::to_string(step_ / per_epoch_ + 1) + "/" + std::to_string(epochs_);
  else
    label = "steps " + std::to_string(step_ + 1) + "-" + std::to_string(upto) + "/" + std::to_string(total_);
  bar_ = std::make_unique<ProgressBar>(label, upto - step_ / eval_every_ * eval_every_, task_->unit());
}

void Run::train_step() {
  optim_.apply(step_);
  const int64_t accum = cfg_.grad_accum;
  double step_loss = 0;
  int64_t step_items = 0;
  for (int64_t k = 0; k < accum; ++k) {
    StepOutput out = task_->step(step_ * accum + k);
    const double lv = out.loss.item();
    if (!std::isfinite(lv)) {
      if (bar_) bar_->finish();
      fail("train: the loss became ", nonfinite_name(lv), " at step ", step_ + 1, " (epoch ", step_ / per_epoch_ + 1,
           "); stopped. The last good checkpoint is kept at ", res_.checkpoint,
           " (resume with --resume after lowering --lr)");
    }
    if (accum == 1) out.loss.backward();
    else mul(out.loss, 1.0 / double(accum)).backward();
    step_loss += lv;
    step_items += out.items;
    add_sums(window_, out.sums);
  }
  if (accum > 1) step_loss /= double(accum);
  for (const auto& hook : grad_hooks_) hook(*task_->model());
  if (cfg_.clip_grad > 0) optim::clip_grad_norm_(task_->model()->parameters(), cfg_.clip_grad);
  optim_.opt->step();
  optim_.opt->zero_grad();
  if (ema_) ema_->update(*task_->model());
  res_.step_losses.push_back(step_loss);
  ++step_;
  items_ += step_items;
  window_.loss += step_loss;
  window_.steps += 1;
  window_.items += step_items;
  if (bar_)
    bar_->update(step_ - (step_ - 1) / eval_every_ * eval_every_, step_items,
                 task_->progress_fields(window_, optim_.lr(step_ - 1)));
  for (const auto& cb : step_callbacks_) cb({step_, total_, step_loss, optim_.lr(step_ - 1), step_items});
}

void Run::evaluate_window() {
  if (bar_) bar_->finish();
  bar_.reset();
  const double secs = elapsed();
  nlohmann::json rec = task_->window_record(window_);
  rec.update(task_->evaluate());
  rec["step"] = step_;
  rec["epoch"] = (step_ - 1) / per_epoch_ + 1;
  rec["epoch_float"] = double(step_) / double(per_epoch_);
  rec["lr"] = optim_.lr(step_ - 1);
  rec["seconds"] = run_seconds();
  const std::string unit = task_->unit();
  rec[unit == "img" ? "images_per_second" : unit == "seq" ? "sequences_per_second" : "tokens_per_second"] =
      double(items_) / secs;
  history_.push_back(rec);
  {
    std::ofstream f(res_.log, std::ios::app);
    f << rec.dump() << "\n";
  }
  write_plot();
  window_ = Window{};
  save(step_);
  if (!cfg_.quiet) std::fprintf(stderr, "%s\n", task_->summary(rec).c_str());
}

TrainResult Run::run() {
  setup();
  t_start_ = std::chrono::steady_clock::now();
  while (step_ < stop_ && !over_time_) {
    open_bar();
    train_step();
    over_time_ = cfg_.max_minutes > 0 && run_seconds() > cfg_.max_minutes * 60.0;
    if (step_ % eval_every_ == 0 || step_ == total_ || over_time_) evaluate_window();
    else if (cfg_.checkpoint_every > 0 && step_ % cfg_.checkpoint_every == 0) save(step_);
  }
  if (bar_) bar_->finish();
  res_.train_seconds = elapsed();
  res_.steps = step_;
  res_.items_per_second = res_.train_seconds > 0 ? double(items_) / res_.train_seconds : 0;
  res_.final_train_loss = res_.step_losses.empty() ? NAN : res_.step_losses.back();
  if (step_ < total_ && !over_time_) return res_;   // stopped as if killed: no final evaluation
  res_.finished = true;
  nlohmann::json m = task_->finish(res_, history_, ema_ ? ema_->model() : nullptr);
  m["model"] = task_->model()->config();
  m["steps"] = step_;
  m["threads"] = get_num_threads();
  m["seconds"] = run_seconds();
  if (cfg_.ema_decay > 0) m["ema_decay"] = cfg_.ema_decay;
  if (cfg_.grad_accum > 1) m["grad_accum"] = cfg_.grad_accum;
  res_.metrics = m;
  io::write_file_atomic(res_.metrics_path, m.dump(2) + "\n");
  return res_;
}

}  // namespace

Trainer::Trainer(TrainConfig cfg) : cfg_(std::move(cfg)) {}
Trainer::~Trainer() = default;

void Trainer::on_gradients(std::function<void(nn::Module&)> hook) { grad_hooks_.push_back(std::move(hook)); }
void Trainer::on_step(std::function<void(const StepInfo&)> callback) { step_callbacks_.push_back(std::move(callback)); }

TrainResult Trainer::run() { return Run(cfg_, grad_hooks_, step_callbacks_).run(); }

TrainResult train(const TrainConfig& cfg) { return Trainer(cfg).run(); }

}  // namespace attn::train

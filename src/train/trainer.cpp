// The training loop shared by every task (see include/attn/train/trainer.h).
#include "attn/train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "attn/autograd/grad_mode.h"
#include "attn/core/error.h"
#include "attn/core/isa.h"
#include "attn/core/parallel.h"
#include "attn/core/rng.h"
#include "attn/io/checkpoint.h"
#include "attn/io/safetensors.h"
#include "attn/ops/batch_norm.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/matmul.h"
#include "attn/optim/adam.h"
#include "attn/optim/clip.h"
#include "attn/optim/schedule.h"
#include "attn/train/checkpoint.h"
#include "attn/train/ema.h"
#include "attn/viz/plot.h"
#include "attn/core/progress.h"
#include "attn/dist/comm.h"
#include "attn/dist/grad_reducer.h"
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

const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "f32"; }

// ---- data parallelism ----

double Shard::share(double local) const {
  if (world == 1 || !comm) return 1.0;
  double total = local;
  comm->allreduce_sum(&total, 1);
  return total > 0 ? local / total : 0.0;
}

Tensor Shard::weighted(const Tensor& loss, double local) const {
  if (world == 1 || !comm) return loss;
  return mul(loss, share(local));
}

void Shard::sum(std::vector<double>& values) const {
  if (world > 1 && comm && !values.empty()) comm->allreduce_sum(values.data(), int64_t(values.size()));
}

void Task::set_shard(const Shard& shard) {
  ATTN_CHECK(shard.world == 1, "train: this task does not train data-parallel yet; run it without mpirun (",
             shard.world, " ranks asked)");
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
  if (c.sync_batch_norm) s.push_back({"--sync-bn", true, false});
  if (c.precision != Precision::f32) s.push_back({"--precision", precision_name(c.precision), false});
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
  ~Run() {
    if (shard_.world > 1) {   // the process-wide settings of a data-parallel run end with it
      default_generator().set_batch_shard(0, 1);
      set_batch_norm_sync({});
    }
  }

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
  void setup_parallel();
  void check_same_config();
  void check_same_parameters();
  bool writer() const { return shard_.rank == 0; }
  nlohmann::json parallel_fields() const;

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
  // Data parallelism (world 1: one process, nothing below is used).
  Shard shard_;
  std::unique_ptr<dist::GradReducer> reducer_;
  // This call's time waiting in GradReducer::finish(), summed over steps: rank 0's own wait (the
  // communication left after its backward plus any wait for slower ranks), and the shortest wait of
  // any rank, that of the rank whose backward ended last: the communication not hidden behind it.
  double wait_seconds_ = 0, exposed_seconds_ = 0;
  int64_t check_every_ = 100;    // steps between parameter checksums across ranks
};

// The settings that must agree across ranks, as one JSON text (rank 0's is the reference).
nlohmann::json parallel_fingerprint(const TrainConfig& c) {
  auto opt = [](const auto& o) { return o ? nlohmann::json(*o) : nlohmann::json(); };
  return {{"model", c.model}, {"task", opt(c.task)}, {"init", c.init}, {"model_config", c.model_config},
          {"data", opt(c.data)}, {"epochs", opt(c.epochs)}, {"max_steps", c.max_steps}, {"max_minutes", c.max_minutes},
          {"lr", opt(c.lr)}, {"min_lr", opt(c.min_lr)}, {"weight_decay", opt(c.weight_decay)}, {"beta2", opt(c.beta2)},
          {"eps", opt(c.eps)}, {"warmup_epochs", opt(c.warmup_epochs)}, {"warmup_steps", opt(c.warmup_steps)},
          {"schedule", opt(c.schedule)}, {"clip_grad", c.clip_grad}, {"label_smoothing", c.label_smoothing},
          {"ema_decay", c.ema_decay}, {"grad_accum", c.grad_accum}, {"sync_bn", c.sync_batch_norm},
          {"precision", precision_name(c.precision)}, {"seed", c.seed}, {"out", opt(c.out)},
          {"checkpoint_every", c.checkpoint_every}, {"eval_every", c.eval_every}, {"resume", c.resume},
          {"limit_train", c.limit_train}, {"stop_after", c.stop_after},
          {"image", {{"data_dir", c.image.data_dir}, {"batch", c.image.batch}, {"limit_eval", c.image.limit_eval},
                     {"augment", c.image.augment}, {"rand_augment", c.image.rand_augment}, {"erase_p", c.image.erase_p},
                     {"mixup", c.image.mixup}, {"cutmix", c.image.cutmix}, {"teacher", c.image.teacher},
                     {"distill", c.image.distill}}},
          {"translation", {{"max_tokens", c.translation.max_tokens}, {"tokenizer", c.translation.tokenizer},
                           {"vocab_size", c.translation.vocab_size}, {"max_length", c.translation.max_length}}},
          {"text", {{"batch", c.text.batch}, {"max_length", c.text.max_length}, {"vocab", c.text.vocab}}},
          {"pretrain", {{"batch", c.pretrain.batch}, {"max_seq_length", c.pretrain.max_seq_length},
                        {"masking", c.pretrain.masking}, {"whole_word_mask", c.pretrain.whole_word_mask},
                        {"dupe_factor", c.pretrain.dupe_factor}, {"limit_eval", c.pretrain.limit_eval}}}};
}

// Where two JSON values differ, as "key: a vs b" items.
void json_differences(const nlohmann::json& a, const nlohmann::json& b, const std::string& at, std::string& out) {
  if (a.is_object() && b.is_object()) {
    for (const auto& [k, v] : a.items())
      json_differences(v, b.contains(k) ? b[k] : nlohmann::json(), at.empty() ? k : at + "." + k, out);
    return;
  }
  if (a != b) out += (out.empty() ? "" : "; ") + at + ": " + a.dump() + " vs " + b.dump();
}

// Every rank must train the same model on the same data with the same flags.
void Run::check_same_config() {
  const std::vector<std::string> all = shard_.comm->allgather(parallel_fingerprint(cfg_).dump());
  const nlohmann::json ref = nlohmann::json::parse(all[0]);
  std::string bad;
  for (size_t r = 1; r < all.size(); ++r) {
    std::string diff;
    json_differences(ref, nlohmann::json::parse(all[r]), "", diff);
    if (!diff.empty()) bad += "\n  rank " + std::to_string(r) + " vs rank 0: " + diff;
  }
  ATTN_CHECK(bad.empty(), "train: the ranks of this data-parallel run were started with different settings "
             "(every rank must run the same command):", bad);
}

// A cheap checksum of the parameters (a sum and a position-weighted sum, in double), equal on every rank.
void Run::check_same_parameters() {
  NoGradGuard ng;
  double sum = 0, weighted = 0;
  int64_t k = 0;
  for (const Tensor& p : task_->model()->parameters()) {
    const std::vector<float> v = p.contiguous().to_vector<float>();
    for (float x : v) {
      sum += double(x);
      weighted += double(x) * double(++k % 1021 + 1);
    }
  }
  char text[64];
  std::snprintf(text, sizeof text, "%.17g %.17g", sum, weighted);
  const std::vector<std::string> all = shard_.comm->allgather(text);
  for (size_t r = 1; r < all.size(); ++r)
    ATTN_CHECK(all[r] == all[0], "train: the parameters of rank ", r, " differ from rank 0's after step ", step_,
               " (checksums ", all[r], " vs ", all[0], "): the ranks no longer train the same model; stopped");
}

// What a data-parallel run records in log.jsonl and metrics.json: ranks, batches, transport.
nlohmann::json Run::parallel_fields() const {
  const bool tokens = !settings_json_.contains("--batch");
  const int64_t batch = settings_json_.value(tokens ? "--max-tokens" : "--batch", int64_t(0));
  return {{"world_size", shard_.world},
          {tokens ? "max_tokens_per_rank" : "batch_per_rank", batch},
          {tokens ? "max_tokens_combined" : "batch_combined", batch * shard_.world},
          {"transport", shard_.comm->transport()},
          {"comm_exposed_seconds", exposed_seconds_},
          {"comm_wait_seconds", wait_seconds_}};
}

void Run::setup_parallel() {
  if (shard_.world == 1) return;
  check_same_config();
}

void Run::setup() {
  ATTN_CHECK(cfg_.grad_accum >= 1, "train: expected --grad-accum >= 1, got ", cfg_.grad_accum);
  ATTN_CHECK(cfg_.precision == Precision::f32 || bf16_gemm_native_available(),
             "train: --precision bf16 needs a CPU with a native bf16 matmul (AVX512-BF16 or AMX), and this one has "
             "none: emulated bf16 GEMMs would train slower than f32. Use --precision f32");
  ATTN_CHECK(cfg_.ema_decay >= 0 && cfg_.ema_decay < 1, "train: expected --ema-decay in [0, 1), got ", cfg_.ema_decay);
  dist::Communicator& comm = dist::world();
  shard_ = Shard{comm.rank(), comm.size(), comm.size() > 1 ? &comm : nullptr};
  setup_parallel();
  if (!writer()) {
    cfg_.progress = false;
    cfg_.quiet = true;
  }
  task_ = make_task(cfg_);
  if (shard_.world > 1) task_->set_shard(shard_);
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
  if (writer())
    for (const std::string& f : {res_.checkpoint, res_.log, res_.plot, res_.metrics_path}) io::remove_unfinished_writes(f);

  if (cfg_.resume) {
    ATTN_CHECK(std::filesystem::exists(res_.checkpoint), "train --resume: there is no checkpoint to resume at '",
               res_.checkpoint, "' (--out ", out_, "); run without --resume to start training");
    meta_ = io::read_checkpoint_metadata(res_.checkpoint);
    // Checked before the task reads any data; the history's records as the task reads them (the
    // plot, the final metrics).
    resume_ = read_resume_state(meta_, res_.checkpoint);
    const int64_t saved_world = meta_["train_state"].value("world_size", int64_t(1));
    ATTN_CHECK(saved_world == shard_.world, "train --resume: '", res_.checkpoint, "' was saved by a run of ", saved_world,
               saved_world == 1 ? " process" : " data-parallel ranks", "; this run has ", shard_.world,
               ". Each rank's share of the data order depends on the count: resume with ", saved_world,
               saved_world == 1 ? " process (no mpirun)" : " ranks (mpirun -np " + std::to_string(saved_world) + ")");
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
  if (writer()) write_log_from_history();
  if (shard_.world > 1) {
    std::vector<Tensor> params;
    for (const Tensor& p : task_->model()->parameters())
      if (p.requires_grad()) params.push_back(p);
    reducer_ = std::make_unique<dist::GradReducer>(*shard_.comm, params);
    check_same_parameters();
    // Dropout, drop-path and attention dropout draw each example's counters as in one process at the
    // combined batch (ops/dropout.h), where the ranks' parts have equal shapes (images); the ranks
    // never share counters. Batch norm: the combined batch's statistics with --sync-bn.
    default_generator().set_batch_shard(shard_.rank, shard_.world);
    if (cfg_.sync_batch_norm) {
      dist::Communicator* comm = shard_.comm;
      set_batch_norm_sync([comm](double* v, int64_t n) { comm->allreduce_sum(v, n); });
    }
    if (!cfg_.quiet) {
      const nlohmann::json f = parallel_fields();
      const bool tokens = f.contains("max_tokens_per_rank");
      std::fprintf(stderr, "data-parallel: %d ranks x %s %lld = %lld per step; gradients all-reduced in %lld buckets (%.1f MB); %s\n",
                   shard_.world, tokens ? "max tokens" : "batch",
                   (long long)f.at(tokens ? "max_tokens_per_rank" : "batch_per_rank").get<int64_t>(),
                   (long long)f.at(tokens ? "max_tokens_combined" : "batch_combined").get<int64_t>(),
                   (long long)reducer_->num_buckets(), double(reducer_->numel()) * 4e-6, shard_.comm->transport().c_str());
    }
  }
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
  if (!writer()) return;
  nlohmann::json ts = {{"step", at_step},
                       {"seconds", run_seconds()},
                       {"items", prior_items_ + items_},
                       {"rng_seed", default_generator().seed()},
                       {"rng_offset", default_generator().offset()},
                       {"history", history_},
                       {"window", window_json(window_)},
                       {"settings", settings_json_},
                       {"world_size", shard_.world}};
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
    // bf16 mixed precision: the forward's and backward's GEMMs in bf16 (autograd/grad_mode.h).
    const AutocastBf16Guard mixed(cfg_.precision == Precision::bf16);
    StepOutput out = task_->step(step_ * accum + k);
    double lv = out.loss.item();
    if (shard_.world > 1) {
      // The step's loss, items and sums over all ranks (each rank's loss is already weighted by its share).
      std::vector<double> v = {lv, double(out.items)};
      v.insert(v.end(), out.sums.begin(), out.sums.end());
      shard_.sum(v);
      lv = v[0];
      out.items = int64_t(v[1]);
      out.sums.assign(v.begin() + 2, v.end());
      if (k == accum - 1) reducer_->arm();
    }
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
  if (reducer_) {
    reducer_->finish();
    const double wait = reducer_->stats().exposed_seconds;
    wait_seconds_ += wait;
    // Ranks whose parts differ in shape (padded text) advance the generator by different amounts:
    // all continue from the furthest, so every rank holds the state a checkpoint saves (rank 0's).
    // In the same call, the shortest wait of any rank (as the maximum of its complement).
    uint64_t v[2] = {default_generator().offset(), ~uint64_t(wait * 1e9)};
    shard_.comm->allreduce_max(v, 2);
    default_generator().set_state(default_generator().seed(), v[0]);
    exposed_seconds_ += double(~v[1]) * 1e-9;
  }
  for (const auto& hook : grad_hooks_) hook(*task_->model());
  if (cfg_.clip_grad > 0) optim::clip_grad_norm_(task_->model()->parameters(), cfg_.clip_grad);
  optim_.opt->step();
  optim_.opt->zero_grad();
  if (ema_) ema_->update(*task_->model());
  res_.step_losses.push_back(step_loss);
  ++step_;
  if (reducer_ && step_ % check_every_ == 0) check_same_parameters();
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
  if (shard_.world > 1) rec.update(parallel_fields());
  history_.push_back(rec);
  if (writer()) {
    std::ofstream f(res_.log, std::ios::app);
    f << rec.dump() << "\n";
    write_plot();
  }
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
    if (cfg_.max_minutes > 0 && shard_.world > 1) {   // every rank stops at the same step: rank 0's clock
      std::vector<double> flag = {writer() && over_time_ ? 1.0 : 0.0};
      shard_.sum(flag);
      over_time_ = flag[0] > 0;
    }
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
  m["isa"] = isa_name(active_isa());   // the kernels' path: runs on different CPUs may differ in the last digits
  m["seconds"] = run_seconds();
  if (cfg_.ema_decay > 0) m["ema_decay"] = cfg_.ema_decay;
  if (cfg_.grad_accum > 1) m["grad_accum"] = cfg_.grad_accum;
  m["precision"] = precision_name(cfg_.precision);
  m["world_size"] = shard_.world;
  if (shard_.world > 1) {
    m.update(parallel_fields());
    m["sync_batch_norm"] = cfg_.sync_batch_norm;
    m["gradient_buckets"] = reducer_->num_buckets();
    m["comm_exposed_fraction"] = res_.train_seconds > 0 ? exposed_seconds_ / res_.train_seconds : 0.0;
    m["comm_wait_fraction"] = res_.train_seconds > 0 ? wait_seconds_ / res_.train_seconds : 0.0;
  }
  res_.metrics = m;
  if (writer()) io::write_file_atomic(res_.metrics_path, m.dump(2) + "\n");
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

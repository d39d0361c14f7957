// One training loop for every model family: the Trainer runs a Task (what is trained on which data,
// its loss and how it is judged) with the optimizer and schedule, gradient clipping, an EMA of the
// weights, atomic checkpoints with exact resume, a JSONL log, an SVG curve, evaluation at a fixed
// cadence, a progress bar and a time budget.
//
//   train::TrainConfig cfg;
//   cfg.model = "vit_fmnist_demo";  cfg.epochs = 5;  cfg.out = "runs/vit";  cfg.image.augment = true;
//   train::TrainResult r = train::train(cfg);            // the task comes from the model's registry entry
//   double acc = r.metric("test_accuracy");              // every final number is in r.metrics
//
//   cfg.model = "transformer";  cfg.data = "bible-en-es";  cfg.max_minutes = 60;
//   r = train::train(cfg);                               // r.metric("test_bleu")
//
// Files in cfg.out: checkpoint.safetensors (latest, written atomically), log.jsonl (one record per
// evaluation), curve.svg, metrics.json (final numbers) and what the task adds.
// Resume (cfg.resume) continues from OUT/checkpoint.safetensors: model, optimizer, schedule step,
// data position, the global generator, the running sums of the current evaluation window, so the
// losses equal those of an uninterrupted run bit for bit. A non-finite loss stops training with an
// attn::Error naming the step; the last checkpoint stays.
//
// Data parallelism: the same program under `mpirun -np N` trains on N ranks (dist/comm.h): each rank
// takes its part of every combined batch (N x the per-rank batch), the gradients are summed over
// ranks in buckets that overlap the backward pass (dist/grad_reducer.h), rank 0 alone writes files,
// and the losses equal one process's at the combined batch up to summation order (docs/design.md,
// "Data-parallel training").
//
// Tasks: image classification (train/tasks/image_classification.h, with DeiT distillation),
// translation (train/tasks/translation.h), BERT pre-training (train/tasks/pretrain.h, "pretrain") and
// BERT fine-tuning, chosen with cfg.task: "classify" (sentences and sentence pairs,
// train/tasks/sequence_classification.h) and "tag" (sequence labelling, train/tasks/token_classification.h).
// A new task implements the Task interface below and registers a factory under the task kind its
// models name in the model registry (models/registry.h), or under a name cfg.task (--task) picks. A
// checkpoint whose metadata has "task" resumes that task.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/core/tensor.h"
#include "attn/models/registry.h"

namespace attn::viz { struct Series; }   // a curve of the training plot (viz/plot.h)
namespace attn::dist { class Communicator; }   // dist/comm.h

namespace attn::train {

// Image-classification settings (train/tasks/image_classification.h says what each does).
struct ImageTaskConfig {
  std::string data_dir = "/usr/share/datasets/fashion-mnist";   // where the Fashion-MNIST files are
  int64_t batch = 128;
  int64_t limit_eval = 0;          // evaluate on the first N examples (0: all)
  bool augment = false;            // random crop (padding 2) + horizontal flip
  int64_t rand_augment = 0;        // RandAugment: N ops per image (0: off)
  int64_t rand_augment_magnitude = 9;
  double erase_p = 0.0;            // random erasing probability
  double mixup = 0.0;              // Mixup alpha (0: off)
  double cutmix = 0.0;             // CutMix alpha (0: off)
  int64_t repeated_aug = 0;        // DeiT's repeated augmentation: each image N times per batch run (0: off)
  // DeiT distillation: the teacher (any attn classifier checkpoint) runs in eval mode, without gradients,
  // on the same augmented batch. A model with a distillation token (deit_*_distilled) distils into its
  // distillation head; any other classifier into its class head (the DeiT paper's "usual distillation").
  std::string teacher;             // teacher checkpoint ("": none)
  std::string distill = "none";    // none | soft | hard
  double alpha = 0.5;              // (1 - alpha) CE(cls, y) + alpha distill
  double tau = 1.0;                // soft distillation temperature
};

// Translation settings (train/tasks/translation.h).
struct TranslationTaskConfig {
  std::string sword_dir = "/usr/share/sword";
  int64_t synthetic_size = 20000;   // pairs of a synthetic task
  int64_t dev_count = 1000, test_count = 1000;   // (synthetic / TSV: min with 10% each)
  std::string tokenizer = "auto";   // auto (sentencepiece for text, char for synthetic) | unigram | bpe | char
  int64_t vocab_size = 8000;        // SentencePiece's (joint source + target vocabulary)
  int64_t max_tokens = 4096;        // per batch: B * max(S, T)
  int64_t max_length = 128;         // longer training pairs are dropped (counted)
  int64_t eval_sentences = 200;     // dev sentences decoded (greedy) for the dev BLEU in the log
  int64_t beam = 4;                 // final test decoding (1: greedy)
  double length_penalty = 0.6;
  int64_t limit_test = 0;           // first N test pairs only (0: all)
};

// BERT fine-tuning settings (train/tasks/sequence_classification.h, token_classification.h).
struct TextTaskConfig {
  int64_t batch = 32;
  int64_t max_length = 128;         // tokens per sequence ([CLS] and [SEP] included); longer ones are cut
  std::string vocab;                // vocab.txt ("": beside --init's weights, else bert-base-uncased's cache)
  int64_t limit_eval = 0;           // evaluate on the first N validation / test examples (0: all)
};

// BERT pre-training settings (train/tasks/pretrain.h; data/pretraining.h says what each does).
struct PretrainTaskConfig {
  std::string vocab;                       // bert-base-uncased's vocab.txt ("": env::bert_vocab_cache())
  std::string sword_dir = "/usr/share/sword";
  std::string wordnet_dir;                 // "": ATTN_WORDNET_DIR or /usr/share/wordnet
  int64_t batch = 32;                      // sequences per micro-batch
  int64_t max_seq_length = 128;
  double short_seq_prob = 0.1;
  double masked_lm_prob = 0.15;
  int64_t max_predictions_per_seq = 20;
  int64_t dupe_factor = 1;                 // passes over the corpus, each its own segmentation
  std::string masking = "dynamic";         // dynamic (drawn afresh each epoch) | static (fixed per duplicate)
  bool whole_word_mask = false;
  double validation_fraction = 0.05;       // of the documents
  int64_t limit_eval = 0;                  // evaluate on the first N validation instances (0: all)
};

enum class Precision { f32, bf16 };
Precision parse_precision(const std::string& s);   // "f32" | "bf16"
const char* precision_name(Precision p);            // its inverse

// One training config for every task. Settings left unset take the task's default (shown by
// `attn train --help`): image classification trains 5 epochs of AdamW at 1e-3 with weight decay 0.05,
// one warm-up epoch and a cosine decay to 1e-5; translation 10 epochs of Adam (0.9, 0.98, 1e-9) on
// the inverse-square-root schedule of "Attention Is All You Need" (lr scale 1.0, 4,000 warm-up steps).
struct TrainConfig {
  std::string model = "mlp";                                // a registry name (`attn info --list`)
  // The task kind (task_kinds(): "pretrain", "classify", "tag", ...); unset: the one the model's registry entry names.
  std::optional<std::string> task;
  // Initial weights (BERT tasks): an attn checkpoint or transformers' weights whose encoder loads into
  // the model; its config sets the model ("": from scratch).
  std::string init;
  nlohmann::json model_config = nlohmann::json::object();   // overrides on the registry defaults
  // image: fashion-mnist | an image folder; translation: bible-en-es | synthetic:<task> | a TSV file;
  // BERT pre-training: bible+wordnet | bible | wordnet
  std::optional<std::string> data;
  std::optional<int64_t> epochs;
  int64_t max_steps = 0;             // stop after this many optimizer steps (0: epochs)
  double max_minutes = 0;            // > 0: stop training after this wall time (then evaluate)
  // optimizer (AdamW) and schedule
  std::optional<double> lr;          // image: peak lr of warm-up + cosine; translation: the inverse-sqrt scale
  std::optional<double> min_lr;      // cosine floor
  std::optional<double> weight_decay;   // not on norms, biases and tokens
  std::optional<double> beta2, eps;
  std::optional<double> warmup_epochs;  // cosine warm-up, in epochs
  std::optional<int64_t> warmup_steps;  // inverse-sqrt warm-up, in steps (warm-up + decay: overrides warmup_epochs)
  std::optional<std::string> schedule;  // the decay after warm-up: cosine | linear (unset: the task's)
  double clip_grad = 0.0;            // global gradient-norm clip (0: off)
  double label_smoothing = 0.1;
  double ema_decay = 0.0;            // > 0: keep an EMA of the weights (timm's ModelEmaV2), e.g. 0.9998
  int64_t grad_accum = 1;            // micro-batches per optimizer step (their gradients summed, each loss / N)
  // Data-parallel runs (mpirun): batch norm with the combined batch's statistics, as PyTorch's
  // SyncBatchNorm (ops/batch_norm.h); false: each rank's own part's. No effect in one process.
  bool sync_batch_norm = false;
  Precision precision = Precision::f32;
  uint64_t seed = 0;
  std::optional<std::string> out;    // output directory (image: runs/default; translation: runs/<model>)
  int64_t checkpoint_every = 0;      // also checkpoint every N steps (0: at each evaluation only)
  int64_t eval_every = 0;            // steps between evaluations (0: each epoch)
  bool resume = false;
  int64_t limit_train = 0;           // use only the first N training examples (0: all)
  int64_t stop_after = 0;            // stop after this step as if killed (no final evaluation): resume tests
  bool progress = true;
  bool quiet = false;                // no per-evaluation summary lines
  ImageTaskConfig image;
  TranslationTaskConfig translation;
  TextTaskConfig text;
  PretrainTaskConfig pretrain;
};

struct TrainResult {
  int64_t steps = 0;
  std::vector<double> step_losses;   // the loss of every optimizer step run in this call
  double final_train_loss = NAN;
  double train_seconds = 0;          // this call's time in the training loop (evaluations included)
  double items_per_second = 0;       // images or target tokens per second of train_seconds
  bool finished = false;             // false: stopped by stop_after, before the final evaluation
  nlohmann::json metrics = nlohmann::json::object();   // metrics.json's content (final numbers)
  std::string checkpoint, log, plot, metrics_path;
  // A number of `metrics`; NaN when absent.
  double metric(const std::string& key) const;
};

// What the Trainer is told after every optimizer step.
struct StepInfo {
  int64_t step;          // optimizer steps done (1 after the first)
  int64_t total;         // steps of the whole run
  double loss;           // this step's loss (the mean over its micro-batches)
  double lr;
  int64_t items;         // images or target tokens in this step
};

// Running sums of an evaluation window (the steps since the last evaluation): saved in
// checkpoints so a resumed window reports what the uninterrupted one would.
struct Window {
  double loss = 0;
  int64_t steps = 0, items = 0;
  std::vector<double> sums;   // the task's own (e.g. correct predictions, examples)
};

// What one micro-batch contributes: its loss (a scalar to backpropagate), how many items it holds
// (for the rate), and the task's sums for the window.
struct StepOutput {
  Tensor loss;
  int64_t items = 0;
  std::vector<double> sums;
};

// The optimizer and schedule a task trains with by default (TrainConfig's unset fields).
struct OptimDefaults {
  // warmup_linear: linear warm-up from 0, then linear decay to min_lr at the last step (BERT's).
  enum class Schedule { warmup_cosine, warmup_linear, inverse_sqrt } schedule = Schedule::warmup_cosine;
  double lr = 1e-3, min_lr = 1e-5, weight_decay = 0.05, beta2 = 0.999, eps = 1e-8;
  double warmup_epochs = 1.0;   // warmup_cosine
  int64_t warmup_steps = 4000;  // inverse_sqrt
  int64_t epochs = 5;
  std::string data, out;
};

// A task's place in a data-parallel run (`mpirun -np N attn train ...`; dist/comm.h). Each rank's
// micro-batch is its part of the combined batch (N x the per-rank batch) that one process would
// take, in order, so the ranks' parts of a step together are the single-process batch. Its loss is
// weighted by its share of the step's items (images, target tokens, masked tokens), so the sum of
// the ranks' gradients, which the Trainer all-reduces, is the gradient of the combined batch.
struct Shard {
  int rank = 0, world = 1;
  dist::Communicator* comm = nullptr;   // null: one process
  // local / (the sum of local over ranks); exactly 1 in one process (0 when the sum is 0).
  double share(double local) const;
  // `loss` (a mean over `local` items) times share(local); `loss` itself in one process.
  Tensor weighted(const Tensor& loss, double local) const;
  // Sums over ranks, in place (identity in one process).
  void sum(std::vector<double>& values) const;
  // This rank's part [first, second) of n items split in order into `world` contiguous parts.
  std::pair<int64_t, int64_t> part(int64_t n) const { return {n * rank / world, n * (rank + 1) / world}; }
};

// A task: a model of one kind on its data, its loss, its evaluation. The Trainer calls:
//   setup(resume_meta) once; then per step next micro-batches -> loss(); evaluate() at the cadence;
//   finish() after the last step. The task never runs the optimizer.
class Task {
 public:
  virtual ~Task() = default;
  // The model config, data and model. `resume_meta`: the checkpoint's metadata when resuming (the
  // task rebuilds its model from it and may take settings from it), null otherwise. The global
  // generator is seeded before this call (the weights draw from it).
  virtual void setup(const nlohmann::json* resume_meta) = 0;
  // Called before setup() in a data-parallel run (world > 1): the task then batches, weights its
  // loss and evaluates as Shard says, its window sums and evaluation equal to one process's. A task
  // that cannot refuses (the default).
  virtual void set_shard(const Shard& shard);
  virtual std::shared_ptr<models::Model> model() const = 0;
  virtual int64_t batches_per_epoch() const = 0;   // micro-batches
  virtual int64_t d_model() const { return 512; }  // the inverse-sqrt schedule's width
  // The data position to resume at: `micro_batches` were consumed; `state` is the checkpoint's train_state.
  virtual void seek(int64_t micro_batches, const nlohmann::json& state) = 0;
  virtual nlohmann::json position() const { return nlohmann::json::object(); }   // saved in train_state
  // Next micro-batch's forward pass; `micro` counts micro-batches from the start of the run.
  virtual StepOutput step(int64_t micro) = 0;
  // Evaluation on the held-out split: the record's fields (e.g. val_loss, val_accuracy).
  virtual nlohmann::json evaluate() = 0;
  // The window's fields of the log record (e.g. train_loss, train_accuracy).
  virtual nlohmann::json window_record(const Window& w) const = 0;
  virtual std::vector<std::pair<std::string, double>> progress_fields(const Window& w, double lr) const = 0;
  virtual std::string unit() const = 0;            // what items are: "img", "tok"
  virtual std::string summary(const nlohmann::json& record) const = 0;   // one line per evaluation
  // The training curve: its title (e.g. "fashion-mnist: vit_fmnist"), the x axis ("epoch", "step") and
  // the series of the log's records.
  virtual std::string plot_title() const { return model()->config().value("model", std::string()); }
  virtual std::string plot_x() const = 0;
  virtual std::vector<viz::Series> plot_series(const nlohmann::json& history) const = 0;
  // Metadata saved with every checkpoint besides config and train_state (e.g. the tokenizer).
  virtual nlohmann::json checkpoint_extra() const { return nlohmann::json::object(); }
  virtual nlohmann::json train_state_extra() const { return nlohmann::json::object(); }
  // Settings as (flag, value, order): stored in checkpoints; --resume refuses a changed `order` one.
  struct Setting {
    std::string flag;
    nlohmann::json value;
    bool order;
  };
  virtual std::vector<Setting> settings() const = 0;
  // After the last step: the final evaluation; its numbers go to metrics.json.
  // `history`: the log's records; `ema`: the EMA weights (null without an EMA).
  virtual nlohmann::json finish(const TrainResult& result, const nlohmann::json& history,
                                const std::shared_ptr<models::Model>& ema) = 0;
  virtual OptimDefaults defaults() const = 0;
};

// The tasks, by the kind named in the model registry ("image-classification", "translation", ...) or
// in TrainConfig::task ("classify", "tag"). Resuming, the checkpoint's metadata "task" (when there is
// one) names the task.
using TaskFactory = std::function<std::unique_ptr<Task>(const TrainConfig& cfg)>;
void register_task(const std::string& kind, TaskFactory make);
std::unique_ptr<Task> make_task(const TrainConfig& cfg);   // by the model's kind; resume: the checkpoint's model
std::vector<std::string> task_kinds();

class Trainer {
 public:
  explicit Trainer(TrainConfig cfg);
  ~Trainer();
  // Between backward and the optimizer step, once per step (after the micro-batches and, in a
  // data-parallel run, after the gradients were summed over ranks).
  void on_gradients(std::function<void(nn::Module&)> hook);
  // After every optimizer step.
  void on_step(std::function<void(const StepInfo&)> callback);
  TrainResult run();

 private:
  TrainConfig cfg_;
  std::vector<std::function<void(nn::Module&)>> grad_hooks_;
  std::vector<std::function<void(const StepInfo&)>> step_callbacks_;
};

// Trainer(cfg).run().
TrainResult train(const TrainConfig& cfg);

}  // namespace attn::train

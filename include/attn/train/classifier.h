// Training and evaluating image classifiers end to end: data, model, AdamW + warm-up/cosine,
// label smoothing, progress bar, JSONL log, SVG training curve, atomic checkpoints, exact resume.
//
//   train::TrainConfig cfg;  cfg.model = "mlp";  cfg.epochs = 5;  cfg.out = "runs/mlp";
//   train::TrainResult r = train::train_classifier(cfg);      // r.test_accuracy, r.checkpoint, ...
//   auto m = train::load_classifier(r.checkpoint);              // model rebuilt from its config
//   train::EvalResult e = train::evaluate(*m, data::FashionMnist::load(dir, data::Split::test));
//
// Files in cfg.out: checkpoint.safetensors (latest, written atomically), log.jsonl (one record per
// evaluation), curve.svg (training curve), metrics.json (final numbers).
// DeiT distillation: cfg.teacher = "runs/resnet/checkpoint.safetensors", cfg.distill = "hard" with
// cfg.model = "deit_fmnist_distilled"; the log then also has val_accuracy_cls / _dist / _both.
// A non-finite loss stops training with an attn::Error naming the step; the last checkpoint stays.
// Resume (cfg.resume): continues from checkpoint.safetensors — model, optimizer, schedule step,
// data order and dropout RNG — so the losses equal those of an uninterrupted run bit for bit.
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/data/dataset.h"
#include "attn/models/registry.h"

namespace attn::train {

struct TrainConfig {
  std::string model = "mlp";
  nlohmann::json model_config = nlohmann::json::object();   // overrides on the registry defaults
  std::string data = "fashion-mnist";
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int64_t epochs = 5;
  int64_t batch = 128;
  double lr = 1e-3;
  double min_lr = 1e-5;
  double weight_decay = 0.05;
  double warmup_epochs = 1.0;
  double label_smoothing = 0.1;
  double clip_grad = 0.0;          // 0: no clipping
  bool augment = false;            // random crop (padding 2) + horizontal flip
  // The DeiT recipe's extras (each off at 0): RandAugment(N, M) in the loader, random erasing,
  // Mixup / CutMix (timm's Mixup, mode "batch", drawn from a per-step generator so resume is exact),
  // and an EMA of the weights (timm's ModelEmaV2) kept in OUT/checkpoint_ema.safetensors and
  // evaluated beside the model at the end.
  int64_t rand_augment = 0;        // N ops
  int64_t rand_augment_magnitude = 9;
  double erase_p = 0.0;
  double mixup = 0.0;              // mixup alpha
  double cutmix = 0.0;             // cutmix alpha
  double ema_decay = 0.0;          // e.g. 0.9998
  int64_t repeated_aug = 0;        // DeiT's repeated augmentation: each image N times per batch run (0: off; DeiT: 3)
  uint64_t seed = 0;
  std::string out = "runs/default";
  int64_t checkpoint_every = 0;    // steps; 0: at the end of each epoch only
  bool resume = false;
  int64_t limit_train = 0;         // use only the first N training examples (0: all)
  int64_t limit_eval = 0;          // evaluate on the first N examples (0: all)
  int64_t max_steps = 0;           // stop after this many steps (0: epochs * steps per epoch)
  int64_t stop_after = 0;          // stop after this global step as if killed (the schedule still
                                   // spans max_steps / epochs; no final evaluation): resume tests
  bool progress = true;
  bool quiet = false;              // no per-epoch summary lines

  // DeiT distillation (train/distill.h), for models with a distillation token (deit_*_distilled),
  // whose forward_heads gives (class head, distillation head) logits. The teacher (any attn
  // checkpoint, loaded with load_classifier) runs in eval mode, without gradients, on the same
  // augmented batch. distill none with a distilled model trains the class head only, as DeiT does.
  std::string teacher;             // teacher checkpoint ("" : none)
  std::string distill = "none";    // none | soft | hard
  double alpha = 0.5;              // distillation weight: (1 - alpha) CE(cls, y) + alpha distill
  double tau = 1.0;                // soft distillation temperature
};

struct EvalResult {
  double loss = 0, accuracy = 0;
  int64_t count = 0;
  std::vector<int64_t> predictions;
  std::vector<int64_t> labels;   // the true class of each prediction
  // Distilled (DeiT) models: the accuracy of the class head and of the distillation head alone
  // (accuracy is that of forward(), both heads combined). NaN for other models.
  double accuracy_cls = NAN, accuracy_dist = NAN;
};

struct TrainResult {
  double test_accuracy = 0, test_loss = 0, val_accuracy = 0;
  double test_accuracy_cls = NAN, test_accuracy_dist = NAN;   // distilled models (see EvalResult)
  double test_accuracy_ema = NAN;  // the EMA weights (ema_decay > 0)
  double final_train_loss = 0;
  double images_per_second = 0;    // end to end, with loading and augmentation
  int64_t steps = 0;
  std::vector<double> step_losses; // the loss of every step run in this call
  std::string checkpoint, log, plot, metrics;
};

TrainResult train_classifier(const TrainConfig& cfg);

// The model of a checkpoint, rebuilt from its config and loaded (strict).
std::shared_ptr<models::ImageClassifier> load_classifier(const std::string& checkpoint);
// The same, streamed (one tensor at a time from the file) into a model whose Linear weights are
// `linear_dtype` (DType::bf16: converted tensor by tensor, the f32 copy never held whole).
std::shared_ptr<models::ImageClassifier> load_classifier(const std::string& checkpoint, DType linear_dtype);

// Accuracy and mean cross-entropy on a dataset (eval mode, no grad), normalised as in training.
EvalResult evaluate(models::ImageClassifier& model, const data::Dataset& ds, const std::vector<float>& mean,
                    const std::vector<float>& std, int64_t batch = 256, int64_t limit = 0);

// Normalisation constants of a dataset name ("fashion-mnist": mean 0.2860, std 0.3530).
std::pair<std::vector<float>, std::vector<float>> dataset_normalization(const std::string& data);

}  // namespace attn::train

// The image-classification task of the Trainer (train/trainer.h): Fashion-MNIST or an image folder,
// cross-entropy with label smoothing, the DeiT recipe's extras (RandAugment, random erasing, Mixup /
// CutMix, repeated augmentation, EMA), DeiT distillation (into a distillation token's head, or into the
// class head of a model without one), and accuracy on the held-out splits.
//
//   train::TrainConfig cfg;  cfg.model = "deit_fmnist_distilled";  cfg.image.augment = true;
//   cfg.image.teacher = "runs/resnet/checkpoint.safetensors";  cfg.image.distill = "hard";
//   train::TrainResult r = train::train(cfg);   // r.metric("test_accuracy"), "test_accuracy_cls", ...
//   auto m = models::load_classifier_checkpoint(r.checkpoint);     // models/pretrained.h
//   auto [mean, std] = data::dataset_normalization("fashion-mnist");
//   train::EvalResult e = train::evaluate(*m, data::FashionMnist::load(dir, data::Split::test), mean, std);
//
// Data (cfg.data): "fashion-mnist" (default; its fixed validation split held out of the training
// file), or a folder DIR/train/<class>/*.png|jpg with DIR/test/ (or val/) read at the model's
// image_size and in_channels (the class count from train/ unless --model-config sets num_classes).
// The log records train_loss, train_accuracy, val_loss, val_accuracy (distilled models also
// val_accuracy_cls / _dist / _both); metrics.json the test accuracy and loss (and of the EMA weights).
// Checkpoints carry the dataset, its normalization and class names in train_state.
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attn/data/dataset.h"
#include "attn/models/registry.h"
#include "attn/train/trainer.h"

namespace attn::train {

struct EvalResult {
  double loss = 0, accuracy = 0;
  int64_t count = 0;
  std::vector<int64_t> predictions;
  std::vector<int64_t> labels;   // the true class of each prediction
  // Distilled (DeiT) models: the accuracy of the class head and of the distillation head alone
  // (accuracy is that of forward(), both heads combined). NaN for other models.
  double accuracy_cls = NAN, accuracy_dist = NAN;
};

// Accuracy and mean cross-entropy on a dataset (eval mode, no grad), normalised as in training.
EvalResult evaluate(models::ImageClassifier& model, const data::Dataset& ds, const std::vector<float>& mean,
                    const std::vector<float>& std, int64_t batch = 256, int64_t limit = 0,
                    const Shard* shard = nullptr);   // a data-parallel run: this rank's part, sums over ranks

// The task (registered as models::kImageClassification).
std::unique_ptr<Task> make_image_classification_task(const TrainConfig& cfg);

}  // namespace attn::train

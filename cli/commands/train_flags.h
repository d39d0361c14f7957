// The flags of `attn train` and `attn demo`, bound to one train::TrainConfig.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "attn/train/trainer.h"

namespace attn::cli {

struct TrainFlags {
  train::TrainConfig cfg;
  int threads = 0;
  std::string model_json;
  std::optional<int64_t> batch, limit_eval;   // image and BERT models' --batch / --limit-eval
  std::optional<std::string> vocab;           // BERT's --vocab (pre-training and fine-tuning)
};

void add_common_train_flags(CLI::App* c, TrainFlags& f);   // every task's
void add_image_train_flags(CLI::App* c, TrainFlags& f);    // image classification (no distillation)
void add_translation_train_flags(CLI::App* c, TrainFlags& f);
void add_pretrain_train_flags(CLI::App* c, TrainFlags& f);   // BERT pre-training
void add_text_train_flags(CLI::App* c, TrainFlags& f);       // BERT fine-tuning (--init)
// After parsing: --threads, --model-config, --batch, --limit-eval and --vocab applied.
void finish_train_flags(TrainFlags& f);
void print_result(const train::TrainResult& r);

}  // namespace attn::cli

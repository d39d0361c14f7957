// The flags of `attn train` and `attn demo`, bound to one train::TrainConfig.
#pragma once
#include <string>

#include <CLI/CLI.hpp>

#include "attn/train/trainer.h"

namespace attn::cli {

struct TrainFlags {
  train::TrainConfig cfg;
  int threads = 0;
  std::string model_json;
};

void add_common_train_flags(CLI::App* c, TrainFlags& f);   // every task's
void add_image_train_flags(CLI::App* c, TrainFlags& f);    // image classification (no distillation)
void add_translation_train_flags(CLI::App* c, TrainFlags& f);
void add_text_train_flags(CLI::App* c, TrainFlags& f);       // BERT fine-tuning (--init, --vocab)
// After parsing: --threads and --model-config applied.
void finish_train_flags(TrainFlags& f);
void print_result(const train::TrainResult& r);

}  // namespace attn::cli

// What a resumed run reads back from its checkpoint's metadata, every value checked (private to the
// Trainer, src/train/trainer.cpp).
//
//   const ResumeState rs = read_resume_state(meta, "runs/vit/checkpoint.safetensors");
//   step = rs.step;   // errors: train --resume: '<file>': key "train_state.step": expected ..., found ...
//   with_checkpoint_name(checkpoint, "", [&] { task.setup(&meta); });
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "attn/core/json_config.h"
#include "attn/train/trainer.h"

namespace attn::train {

struct ResumeState {
  int64_t step = 0;
  uint64_t rng_seed = 0, rng_offset = 0;
  nlohmann::json history = nlohmann::json::array();   // the log's records (a list of objects)
  double seconds = 0;                                 // of the run so far
  int64_t items = 0;
  std::optional<Window> window;                       // the running sums of the open window
};

// The train_state of a checkpoint's metadata `meta` (read from `checkpoint`).
ResumeState read_resume_state(const nlohmann::json& meta, const std::string& checkpoint);

// The model name of the checkpoint's config ("config.model").
std::string checkpoint_model_name(const nlohmann::json& meta, const std::string& checkpoint);

// Runs f(); a ConfigError it throws (a value of the checkpoint's metadata, read without a context)
// comes back as an Error naming the checkpoint: "train --resume: '<checkpoint>': <part>: <message>"
// (without "<part>: " when part is empty).
template <class F>
void with_checkpoint_name(const std::string& checkpoint, const std::string& part, F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    fail("train --resume: '", checkpoint, "': ", part, part.empty() ? "" : ": ", e.what());
  }
}

}  // namespace attn::train

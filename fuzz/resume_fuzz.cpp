// libFuzzer target for resuming training (train::train with TrainConfig::resume): the trainer and
// its task read back a checkpoint's metadata (the model "config", "train_state" with the step, the
// generator, the data position, the evaluation window, the history and the settings, and the
// translation task's "tokenizer" and "kind").
//
//   scripts/fuzz.sh resume_fuzz          # or: build-fuzz/fuzz/resume_fuzz fuzz/corpus/resume_fuzz
//
// At start-up the harness trains two tiny runs for one step each, in a temporary directory: an MLP on
// a 2-class folder of 8 x 8 PNGs (image classification) and a 1-layer Transformer on the synthetic
// copy task (translation). Input: one byte choosing the run (even: image, odd: translation), then a
// JSON object whose entries replace the run's checkpoint metadata entries of the same names (a
// string as it is, another value as its JSON text, as io::write_checkpoint stores them). The
// checkpoint, with the run's own tensors, is written back and the run resumed, stopping after step 1.
// Seeds: each run's own metadata (fuzz/write_seeds.cpp). A "config" with a number over 64 in
// magnitude or a list over 8 entries is not resumed (a large model is trained for real: slow, not
// wrong; fuzz_support.h).
// An attn::Error is the expected outcome for metadata that is wrong. Anything else is a finding: a
// sanitizer report, a crash, a leak, another exception (nlohmann::json's type_error or out_of_range
// for metadata of the wrong type, or missing, included), or a timeout.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "attn/core/error.h"
#include "attn/io/safetensors.h"
#include "attn/train/trainer.h"
#include "fuzz_support.h"
#include "resume_runs.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  attn::fuzz::resume_runs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const nlohmann::json edits = nlohmann::json::parse(data + 1, data + size, nullptr, /*allow_exceptions=*/false);
  if (edits.is_discarded() || !edits.is_object()) return 0;
  const attn::fuzz::ResumeRun& run = attn::fuzz::resume_runs()[data[0] % 2];
  attn::io::Metadata md = run.checkpoint.metadata;
  for (auto it = edits.begin(); it != edits.end(); ++it)
    md[it.key()] = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
  // The config as the checkpoint reader will see it (a string entry is parsed as JSON).
  const nlohmann::json config = nlohmann::json::parse(md["config"], nullptr, /*allow_exceptions=*/false);
  if (!config.is_discarded() && !attn::fuzz::small_config(config, 64, 8)) return 0;
  attn::io::save_safetensors(*run.cfg.out + "/checkpoint.safetensors", run.checkpoint.tensors, md);
  try {
    attn::train::train(run.cfg);
  } catch (const attn::Error&) {
  }
  return 0;
}

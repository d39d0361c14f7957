// libFuzzer target for attn checkpoints as the loaders read them: the file's metadata (format,
// "config", "train_state", "kind", the base64 "tokenizer", "id2label", ...) through
// io::read_checkpoint_metadata, models::checkpoint_inputs, models::load_pretrained (an image
// classifier: model rebuilt from "config", its weights, then their EMA, streamed in) and
// infer::load_translator (a translation model and its tokenizer), and every tensor through
// io::read_checkpoint.
//
//   scripts/fuzz.sh checkpoint_fuzz      # or: build-fuzz/fuzz/checkpoint_fuzz fuzz/corpus/checkpoint_fuzz
//
// Input: the checkpoint file's bytes (safetensors), read by path from a memfd. Seeds: small
// checkpoints of an MLP, a ViT (also with EMA weights), a ResNet, a Transformer and an RNN translator
// (fuzz/write_seeds.cpp).
// A checkpoint whose "config" holds a number over 512 in magnitude or a list over 16 entries is read
// but its model not built (fuzz_support.h, small_config).
// An attn::Error is the expected outcome for a malformed checkpoint. Anything else is a finding: a
// sanitizer report, a crash, a leak, another exception (nlohmann::json's type_error for metadata of
// the wrong type included), or a broken property:
//   * read_checkpoint splits the file's tensors into model, "optim." and "ema." ones, none lost;
//   * a loaded classifier has the checkpoint's class count; a loaded translator's model and tokenizer
//     agree on the vocabulary and it translates a short text to valid UTF-8.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "attn/core/error.h"
#include "attn/infer/translate.h"
#include "attn/io/checkpoint.h"
#include "attn/models/pretrained.h"
#include "attn/text/utf8.h"
#include "fuzz_support.h"

namespace {

void check_tensors(const std::string& path) {
  attn::io::CheckpointFile f;
  try {
    f = attn::io::read_checkpoint(path);
  } catch (const attn::Error&) {
    return;
  }
  const attn::io::SafetensorsReader r(path);
  const size_t optim = f.optimizer ? f.optimizer->tensors.size() : 0;
  size_t optim_keys = 0, ema_keys = 0;
  for (const auto& e : r.entries()) {
    optim_keys += e.name.rfind(attn::io::kCheckpointOptimizerPrefix, 0) == 0;
    ema_keys += e.name.rfind(attn::io::kCheckpointEmaPrefix, 0) == 0;
  }
  // The optimizer's tensors are kept only with its "optimizer" metadata; the others all land somewhere.
  if (f.model.size() + f.ema.size() + optim_keys != r.entries().size() || f.ema.size() != ema_keys ||
      (f.optimizer && optim != optim_keys))
    __builtin_trap();
}

void load_classifier(const std::string& path, const nlohmann::json& meta, attn::io::CheckpointWeights weights) {
  attn::models::PretrainedSource s = attn::models::PretrainedSource::checkpoint(path);
  s.pack_linear_weights = false;
  s.weights = weights;
  attn::models::Pretrained p;
  try {
    p = attn::models::load_pretrained(s);
  } catch (const attn::Error&) {
    return;
  }
  const attn::models::CheckpointInputs in = attn::models::checkpoint_inputs(meta, path);
  if (!p.model || (!p.labels.empty() && int64_t(p.labels.size()) != in.num_classes)) __builtin_trap();
}

void load_translator(const std::string& path) {
  try {
    const attn::infer::Translator t = attn::infer::load_translator(path);
    if (t.model().vocab_size() != t.tokenizer().vocab_size()) __builtin_trap();
    const std::vector<std::string> out = t.translate({"ab"}, /*beam=*/1, 0.6, /*max_len=*/4);
    if (out.size() != 1 || !attn::text::is_valid_utf8(out[0])) __builtin_trap();
  } catch (const attn::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const attn::fuzz::MemFile file(data, size);
  nlohmann::json meta;
  try {
    meta = attn::io::read_checkpoint_metadata(file.path());
  } catch (const attn::Error&) {
    return 0;
  }
  if (!meta.is_object()) __builtin_trap();
  try {
    (void)attn::models::checkpoint_inputs(meta, file.path());
  } catch (const attn::Error&) {
  }
  (void)attn::infer::is_translation_checkpoint(file.path());
  check_tensors(file.path());
  if (!attn::fuzz::small_config(meta.contains("config") ? meta["config"] : nlohmann::json(), 512)) return 0;
  load_classifier(file.path(), meta, attn::io::CheckpointWeights::model);
  load_classifier(file.path(), meta, attn::io::CheckpointWeights::ema);
  load_translator(file.path());
  return 0;
}

// The attn checkpoint file: ONE safetensors file holding a model's state dict under its own names,
// an optimizer's state under "optim.<key>", an exponential moving average of the model's weights (a
// run with --ema-decay) under "ema.<key>", and __metadata__
//   {"format": "attn-checkpoint-v1", "config": <JSON string>, "train_state": <JSON string>,
//    "optimizer": "AdamW", ...other keys of `extra`}.
// One file, so one atomic rename commits the model, the optimizer, the EMA and the training state
// together. The file only: putting a module / optimizer into it and back is train::save_checkpoint /
// train::load_checkpoint (attn/train/checkpoint.h), loading an image classifier for inference
// models::load_pretrained (attn/models/pretrained.h).
//
//   io::write_checkpoint("ckpt.safetensors", model.state_dict(), io::OptimizerState{"AdamW", opt_sd},
//                        {{"config", cfg_json}, {"train_state", {{"step", step}}}}, ema.state_dict());
//   io::CheckpointFile f = io::read_checkpoint("ckpt.safetensors");   // f.model, f.optimizer, f.ema, f.metadata
//   int64_t step = io::read_checkpoint_metadata("ckpt.safetensors")["train_state"]["step"];   // the header only
//   // a key of the file -> the model key it holds, for the weights asked for (nullopt: another part's)
//   std::optional<std::string> k = io::checkpoint_weight_key("ema.head.weight", io::CheckpointWeights::ema);
//
// Writes are atomic (a unique temporary + fsync + rename + directory fsync). A file that is not an
// attn checkpoint or is truncated / corrupt throws attn::Error ("load_checkpoint: ...") naming the file.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "attn/io/safetensors.h"

namespace attn::io {

inline constexpr const char* kCheckpointFormat = "attn-checkpoint-v1";
// The prefix of the optimizer's keys in the file.
inline constexpr const char* kCheckpointOptimizerPrefix = "optim.";
// The prefix of the EMA weights' keys in the file.
inline constexpr const char* kCheckpointEmaPrefix = "ema.";

// Which weights of a checkpoint: the model's own, or the moving average of them a run with
// --ema-decay keeps beside them.
enum class CheckpointWeights { model, ema };

// An optimizer's state as the file keeps it: its name (metadata "optimizer") and its tensors.
struct OptimizerState {
  std::string name;
  TensorList tensors;
};

struct CheckpointFile {
  TensorList model;                         // every key outside "optim." and "ema."
  std::optional<OptimizerState> optimizer;  // when the metadata names one ("optim." dropped from the keys)
  TensorList ema;                           // the EMA weights ("ema." dropped); empty when the file has none
  nlohmann::json metadata;                  // as read_checkpoint_metadata
};

// extra: a JSON object; each key becomes a metadata entry (strings as they are, other values as
// their JSON text). "config" and "train_state" default to {}; "format" and "optimizer" are reserved,
// and so are the "optim." and "ema." prefixes for model keys. ema: the EMA weights (a state dict of the
// model's keys), stored under "ema."; empty: none.
void write_checkpoint(const std::string& path, const TensorList& model, const std::optional<OptimizerState>& optimizer,
                      const nlohmann::json& extra = nlohmann::json::object(), const TensorList& ema = {});

// The model key that the file's key `key` holds for `which` weights (an "ema." key without its prefix,
// a model key as it is), or nullopt for a key of another part (the optimizer's, the other weights').
std::optional<std::string> checkpoint_weight_key(const std::string& key, CheckpointWeights which);
// Whether the file holds EMA weights (from its header).
bool checkpoint_has_ema(const SafetensorsReader& file);

// Every tensor, split into the model's and the optimizer's, and the metadata (format checked).
CheckpointFile read_checkpoint(const std::string& path);

// The file opened for streaming (attn/io/safetensors.h), its format checked from the header.
SafetensorsReader open_checkpoint(const std::string& path);

// The metadata only (also checks the format), e.g. to build the model from "config" first: entries that
// parse as JSON (config, train_state) parsed, others (format, optimizer) as strings. Reads the header,
// no tensor.
nlohmann::json read_checkpoint_metadata(const std::string& path);
// The same from a file already open for streaming.
nlohmann::json checkpoint_metadata(const SafetensorsReader& file);

}  // namespace attn::io

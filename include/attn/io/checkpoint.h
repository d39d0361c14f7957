// Training checkpoints: ONE safetensors file holding the model's state dict under its own names,
// the optimizer's state under "optim.<key>", and __metadata__
//   {"format": "attn-checkpoint-v1", "config": <JSON string>, "train_state": <JSON string>,
//    "optimizer": "AdamW", ...other keys of `extra`}.
//
//   io::save_checkpoint("ckpt.safetensors", model, &opt,
//                       {{"config", cfg_json}, {"train_state", {{"step", step}, {"seed", g.seed()},
//                                                               {"offset", g.offset()}}}});
//   nlohmann::json meta = io::load_checkpoint("ckpt.safetensors", model, &opt);
//   int64_t step = meta["train_state"]["step"];
//
// Writes are atomic (tmp + fsync + rename). Loading is strict and all-or-nothing: a file that is
// not an attn checkpoint, is for another model (the first mismatched keys and shapes are named),
// lacks the optimizer state asked for, or is truncated/corrupt throws attn::Error before the model
// or optimizer changes.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "attn/io/safetensors.h"

namespace attn::nn { class Module; }
namespace attn::optim { class Optimizer; }

namespace attn::io {

inline constexpr const char* kCheckpointFormat = "attn-checkpoint-v1";

// extra: a JSON object; each key becomes a metadata entry (strings as they are, other values as
// their JSON text). "config" and "train_state" default to {}; "format" and "optimizer" are reserved.
void save_checkpoint(const std::string& path, const nn::Module& module, const optim::Optimizer* optimizer,
                     const nlohmann::json& extra = nlohmann::json::object());

// Loads into module (and optimizer when not null) and returns the metadata as JSON: entries that
// parse as JSON (config, train_state) parsed, others as strings.
nlohmann::json load_checkpoint(const std::string& path, nn::Module& module, optim::Optimizer* optimizer);

// The metadata only (also checks the format), e.g. to build the model from "config" first. Reads the
// header, no tensor.
nlohmann::json read_checkpoint_metadata(const std::string& path);
// The same from a file already open for streaming.
nlohmann::json checkpoint_metadata(const SafetensorsReader& file);

}  // namespace attn::io

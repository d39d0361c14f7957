// Training checkpoints: a module's state dict, an optimizer's state and JSON metadata in one attn
// checkpoint file (the layout: attn/io/checkpoint.h).
//
//   train::save_checkpoint("ckpt.safetensors", model, &opt,
//                          {{"config", cfg_json}, {"train_state", {{"step", step}, {"seed", g.seed()},
//                                                                  {"offset", g.offset()}}}});
//   nlohmann::json meta = train::load_checkpoint("ckpt.safetensors", model, &opt);
//   int64_t step = meta["train_state"]["step"];
//
// Writes are atomic (tmp + fsync + rename). Loading is strict and all-or-nothing: a file that is
// not an attn checkpoint, is for another model (the first mismatched keys and shapes are named),
// lacks the optimizer state asked for, or is truncated/corrupt throws attn::Error before the model
// or optimizer changes. For inference, models::load_pretrained (attn/models/pretrained.h) builds the
// model from the checkpoint's config and streams the weights in.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace attn::nn { class Module; }
namespace attn::optim { class Optimizer; }

namespace attn::train {

// extra: a JSON object; each key becomes a metadata entry (strings as they are, other values as
// their JSON text). "config" and "train_state" default to {}; "format" and "optimizer" are reserved.
void save_checkpoint(const std::string& path, const nn::Module& module, const optim::Optimizer* optimizer,
                     const nlohmann::json& extra = nlohmann::json::object());

// Loads into module (and optimizer when not null) and returns the metadata as JSON: entries that
// parse as JSON (config, train_state) parsed, others as strings.
nlohmann::json load_checkpoint(const std::string& path, nn::Module& module, optim::Optimizer* optimizer);

}  // namespace attn::train

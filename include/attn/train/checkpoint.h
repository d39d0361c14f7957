// Training checkpoints: a module's state dict, an optimizer's state, the EMA of the module's weights
// and JSON metadata in one attn checkpoint file (the layout: attn/io/checkpoint.h).
//
//   train::save_checkpoint("ckpt.safetensors", model, &opt,
//                          {{"config", cfg_json}, {"train_state", {{"step", step}, {"seed", g.seed()},
//                                                                  {"offset", g.offset()}}}},
//                          &ema.module());                    // optional: the EMA weights ("ema.")
//   nlohmann::json meta = train::load_checkpoint("ckpt.safetensors", model, &opt, &ema.module());
//   int64_t step = meta["train_state"]["step"];
//
// Writes are atomic (a unique temporary + fsync + rename). Loading is strict and all-or-nothing: a
// file that is not an attn checkpoint, is for another model (the first mismatched keys and shapes
// are named), lacks the optimizer state or EMA weights asked for, or is truncated/corrupt throws
// attn::Error before the model, optimizer or EMA changes. Parts not asked for (the optimizer state,
// the EMA weights) are ignored. For inference, models::load_pretrained (attn/models/pretrained.h)
// builds the model from the checkpoint's config and streams the weights in.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace attn::nn { class Module; }
namespace attn::optim { class Optimizer; }

namespace attn::train {

// extra: a JSON object; each key becomes a metadata entry (strings as they are, other values as
// their JSON text). "config" and "train_state" default to {}; "format" and "optimizer" are reserved.
// ema: when not null, a module of the same architecture whose weights are stored as the EMA's.
// Tied tensors (nn::tied_names, attn/nn/tied.h: BERT's MLM decoder weight, which is its word embeddings) are
// stored once, under their first name; the metadata "tied" records {"tied name": "first name"}, and
// loading the first name loads both (nn::Module::load_state_dict).
void save_checkpoint(const std::string& path, const nn::Module& module, const optim::Optimizer* optimizer,
                     const nlohmann::json& extra = nlohmann::json::object(), const nn::Module* ema = nullptr);

// Loads into module (and optimizer, and ema, when not null) and returns the metadata as JSON: entries
// that parse as JSON (config, train_state) parsed, others as strings.
nlohmann::json load_checkpoint(const std::string& path, nn::Module& module, optim::Optimizer* optimizer,
                               nn::Module* ema = nullptr);

}  // namespace attn::train

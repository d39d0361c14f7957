// Training checkpoints: a module, an optimizer and an EMA through the checkpoint file (attn/io/checkpoint.h).
#include "attn/train/checkpoint.h"

#include <optional>
#include <set>

#include "attn/core/error.h"
#include "attn/io/checkpoint.h"
#include "attn/nn/module.h"
#include "attn/nn/tied.h"
#include "attn/optim/optimizer.h"

namespace attn::train {

namespace {

// The state dict with each tied tensor once, under its first name (nn::tied_names).
io::TensorList untied_state_dict(const nn::Module& m, nlohmann::json* tied) {
  std::set<std::string> drop;
  for (const auto& [name, first] : nn::tied_names(m)) {
    drop.insert(name);
    if (tied) (*tied)[name] = first;
  }
  io::TensorList sd;
  for (auto& [name, t] : m.state_dict())
    if (!drop.count(name)) sd.emplace_back(name, std::move(t));
  return sd;
}

}  // namespace

void save_checkpoint(const std::string& path, const nn::Module& module, const optim::Optimizer* optimizer,
                     const nlohmann::json& extra, const nn::Module* ema) {
  std::optional<io::OptimizerState> opt;
  if (optimizer) opt = io::OptimizerState{optimizer->name(), optimizer->state_dict()};
  nlohmann::json tied = nlohmann::json::object();
  io::TensorList model = untied_state_dict(module, &tied);
  nlohmann::json meta = extra.is_null() ? nlohmann::json::object() : extra;
  if (!tied.empty()) meta["tied"] = tied;
  io::write_checkpoint(path, model, opt, meta, ema ? untied_state_dict(*ema, nullptr) : io::TensorList{});
}

nlohmann::json load_checkpoint(const std::string& path, nn::Module& module, optim::Optimizer* optimizer,
                               nn::Module* ema) {
  io::CheckpointFile f = io::read_checkpoint(path);
  const std::string why = module.state_dict_mismatch(f.model, /*strict=*/true, /*max_listed=*/5);
  if (!why.empty()) fail("load_checkpoint: '", path, "' is for another model: ", why);
  if (ema) {
    ATTN_CHECK(!f.ema.empty(), "load_checkpoint: '", path, "' has no EMA weights (saved without an EMA)");
    const std::string ema_why = ema->state_dict_mismatch(f.ema, /*strict=*/true, /*max_listed=*/5);
    if (!ema_why.empty()) fail("load_checkpoint: '", path, "': the EMA weights do not match: ", ema_why);
  }
  if (optimizer) {
    ATTN_CHECK(f.optimizer && !f.optimizer->tensors.empty(), "load_checkpoint: '", path,
               "' has no optimizer state (saved without an optimizer)");
    ATTN_CHECK(f.optimizer->name == optimizer->name(), "load_checkpoint: '", path, "' holds ", f.optimizer->name,
               " state, but the optimizer is ", optimizer->name());
    try {
      optimizer->load_state_dict(f.optimizer->tensors);   // checks everything before changing anything
    } catch (const Error& e) {
      fail("load_checkpoint: '", path, "': optimizer state does not match: ", e.what());
    }
  }
  module.load_state_dict(f.model);   // checked above: cannot fail now
  if (ema) ema->load_state_dict(f.ema);
  return f.metadata;
}

}  // namespace attn::train

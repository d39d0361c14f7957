// Training checkpoints: a module, an optimizer and an EMA through the checkpoint file (attn/io/checkpoint.h).
#include "attn/train/checkpoint.h"

#include <optional>

#include "attn/core/error.h"
#include "attn/io/checkpoint.h"
#include "attn/nn/module.h"
#include "attn/optim/optimizer.h"

namespace attn::train {

void save_checkpoint(const std::string& path, const nn::Module& module, const optim::Optimizer* optimizer,
                     const nlohmann::json& extra, const nn::Module* ema) {
  std::optional<io::OptimizerState> opt;
  if (optimizer) opt = io::OptimizerState{optimizer->name(), optimizer->state_dict()};
  io::write_checkpoint(path, module.state_dict(), opt, extra, ema ? ema->state_dict() : io::TensorList{});
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

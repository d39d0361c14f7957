// Gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_.
//
//   double norm = optim::clip_grad_norm_(model.parameters(), 1.0);   // before opt.step()
//
// total = the norm of all defined gradients viewed as one vector (norm_type 2, or INFINITY for the
// max-abs norm); every gradient is multiplied by min(1, max_norm / (total + 1e-6)). Returns total
// (0 when no parameter has a gradient). A non-finite total is applied as PyTorch does (inf gives
// the coefficient 0, NaN gives NaN gradients); with error_if_nonfinite it throws instead.
#pragma once
#include <vector>

#include "attn/core/tensor.h"

namespace attn::optim {

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
// The norm alone (nothing is scaled).
double grad_norm(const std::vector<Tensor>& params, double norm_type = 2.0);

}  // namespace attn::optim

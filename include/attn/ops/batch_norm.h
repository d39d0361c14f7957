// Batch normalisation (as torch.nn.functional.batch_norm), forward and backward, f32 and f64.
//
//   Tensor rm = Tensor::zeros({32}), rv = Tensor::ones({32});
//   Tensor y = attn::batch_norm(x, rm, rv, gamma, beta, /*training=*/true);   // x (N, 32, H, W)
//   // rm, rv updated in place; later, in eval: attn::batch_norm(x, rm, rv, gamma, beta, false)
//
// Training normalises with the batch statistics over every dim but 1 (biased variance) and, when
// running_mean / running_var are defined, updates them in place:
//   running = (1 - momentum) running + momentum stat   (the unbiased variance for running_var).
// Eval normalises with the running statistics. weight / bias (C) may be undefined (1 and 0).
#pragma once
#include "attn/core/tensor.h"

namespace attn {

// x (N, C, ...) -> same shape; running_mean / running_var / weight / bias (C) or undefined.
Tensor batch_norm(const Tensor& x, Tensor running_mean, Tensor running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5);

}  // namespace attn

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
//
// Synchronized batch norm (data parallelism, as PyTorch's SyncBatchNorm): with a sum set by
// set_batch_norm_sync, training-mode statistics (per-channel sums, counts, squared deviations) and the
// backward's per-channel sums for dx are summed over the processes by it, so every process
// normalises with the statistics of the combined batch; the weight and bias gradients stay this
// process's own (the data-parallel all-reduce sums those). Every process must run the same layers.
#pragma once
#include <functional>

#include "attn/core/tensor.h"

namespace attn {

// x (N, C, ...) -> same shape; running_mean / running_var / weight / bias (C) or undefined.
Tensor batch_norm(const Tensor& x, Tensor running_mean, Tensor running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5);

// In-place sum of n doubles over the processes of a data-parallel run; empty: each process's own
// statistics (the default). For this thread's batch_norm calls; a forward keeps the sum it saw for
// its backward.
using BatchNormSync = std::function<void(double* data, int64_t n)>;
void set_batch_norm_sync(BatchNormSync sum);
const BatchNormSync& batch_norm_sync();

}  // namespace attn

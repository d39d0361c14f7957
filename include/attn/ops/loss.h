// Loss functions with PyTorch's semantics: cross_entropy (F.cross_entropy), kl_div (F.kl_div),
// mse_loss (F.mse_loss).
//
//   Tensor loss = attn::cross_entropy(logits, labels);                  // (N, C), (N) i64 -> 0-d
//   attn::CrossEntropyOptions o; o.label_smoothing = 0.1; o.ignore_index = 0;
//   Tensor per = attn::cross_entropy(logits, labels, {.reduction = attn::Reduction::none});
//   Tensor kd = attn::kl_div_batchmean(log_softmax(student), teacher_probs);
//
// Losses are f32 or f64; sums accumulate in double in a fixed order (thread-count independent).
#pragma once
#include <cstdint>

#include "attn/core/tensor.h"

namespace attn {

enum class Reduction { none, mean, sum };

struct CrossEntropyOptions {
  double label_smoothing = 0.0;
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::mean;
};

// logits: (N, C), (N, C, d1, ...) or unbatched (C). target: i64 class indices of shape (N) /
// (N, d1, ...) / () , or a floating tensor of the logits' shape and dtype holding class
// probabilities (soft targets; ignore_index does not apply). Mean over non-ignored targets for
// class indices (nan when all are ignored, as torch), over N * d1 * ... for soft targets. One
// fused log-softmax pass; differentiable w.r.t. logits.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& opts = {});

// KL divergence with input = log-probabilities; target probabilities (or log-probabilities when
// log_target). Elementwise target * (log target - input) (0 where target == 0), input and target
// broadcast together. mean = over all elements (torch's 'mean'). Differentiable w.r.t. both.
Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean,
              bool log_target = false);
// torch's reduction='batchmean': sum / input.size(0) (the plain sum for a 0-d input).
Tensor kl_div_batchmean(const Tensor& input, const Tensor& target, bool log_target = false);

// (input - target)^2, broadcast together. Differentiable w.r.t. both.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);

}  // namespace attn

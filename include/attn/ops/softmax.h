// Softmax and log-softmax along one dim, forward and backward.
//
//   Tensor p = attn::softmax(scores, -1);          // (B, H, T, T), rows sum to 1
//   Tensor lp = attn::log_softmax(logits);         // (N, V)
//
// Numerically stable (the row max is subtracted first), so large inputs stay finite. Special
// values behave as in PyTorch: a row holding +inf or NaN, or only -inf, gives NaN. f32 over the
// last dim runs the vectorised kernels (AVX-512 / AVX2 / scalar, see attn/core/isa.h); other
// dims and f64 run the reference kernels.
#pragma once
#include <cstdint>

#include "attn/core/tensor.h"

namespace attn {

Tensor softmax(const Tensor& x, int64_t dim = -1);        // stable (max-subtracted); any dim
Tensor log_softmax(const Tensor& x, int64_t dim = -1);

}  // namespace attn

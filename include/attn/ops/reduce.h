// Reductions along dimensions, forward and backward.
//
//   Tensor m = attn::mean(x, {-1}, /*keepdim=*/true);    // (B, T, 1)
//   auto [v, i] = attn::max(logits, -1);                 // values and i64 indices
//
// Sums accumulate in double for f32 inputs, so results do not depend on the thread count.
#pragma once
#include <utility>
#include <vector>

#include "attn/core/tensor.h"

namespace attn {

Tensor sum(const Tensor& a);                                                  // all elements, 0-d
Tensor sum(const Tensor& a, std::vector<int64_t> dims, bool keepdim = false);
Tensor mean(const Tensor& a);
Tensor mean(const Tensor& a, std::vector<int64_t> dims, bool keepdim = false);
// Variance with `correction` (1 = unbiased, as torch.var's default; 0 = population).
Tensor var(const Tensor& a, std::vector<int64_t> dims, int64_t correction = 1, bool keepdim = false);
// Max along one dim: values (differentiable, gradient to the first maximal index) and indices.
std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& a);                                                  // all elements, 0-d
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim = false);           // i64

// Sums `g` down to `shape` over broadcast dims (the backward of broadcasting).
Tensor sum_to(const Tensor& g, const Shape& shape);

}  // namespace attn

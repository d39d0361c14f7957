// 2-d pooling (as torch.nn.functional.max_pool2d / avg_pool2d / adaptive_avg_pool2d with
// ceil_mode=False), forward and backward. Inputs are (N, C, H, W) or unbatched (C, H, W).
//
//   Tensor p = attn::max_pool2d(x, {2, 2});                      // (N, C, H/2, W/2), stride = kernel
//   Tensor a = attn::avg_pool2d(x, {3, 3}, {1, 1}, {1, 1});      // padded zeros counted in the mean
//   Tensor g = attn::adaptive_avg_pool2d(x, {1, 1});             // global average: (N, C, 1, 1)
//
// max_pool2d sends the gradient to the window's maximum (the first one on ties, the last NaN when
// a window holds NaNs, as torch's CPU kernel); a stride of {0, 0} means stride = kernel.
#pragma once
#include <array>
#include <cstdint>

#include "attn/core/tensor.h"

namespace attn {

using Pair = std::array<int64_t, 2>;

Tensor max_pool2d(const Tensor& x, Pair kernel, Pair stride = {0, 0} /*0 = kernel*/, Pair padding = {0, 0});
Tensor avg_pool2d(const Tensor& x, Pair kernel, Pair stride = {0, 0}, Pair padding = {0, 0},
                  bool count_include_pad = true);
// Output cell (i, j) averages rows [floor(i H / Ho), ceil((i + 1) H / Ho)) and likewise columns.
Tensor adaptive_avg_pool2d(const Tensor& x, Pair output_size);

}  // namespace attn

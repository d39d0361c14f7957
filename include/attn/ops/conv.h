// 2-d convolution (as torch.nn.functional.conv2d), forward and backward.
//
//   Tensor w = attn::randn({32, 3, 3, 3});                       // (O, C/groups, kH, kW)
//   Tensor y = attn::conv2d(x, w, b, {1, 1}, {1, 1});            // x (N, 3, H, W) -> (N, 32, H, W)
//   Tensor p = attn::conv2d(img, pw, pb, {16, 16});              // ViT patch embedding: (N, D, H/16, W/16)
//
// f32 runs on oneDNN's convolution primitives; f64 (and the fallback) on im2col + GEMM; a kernel
// equal to the stride with no padding (patch embedding) is a reshape/permute and one GEMM. All
// paths are tested against the naive reference in src/backend/reference/conv_reference.h.
#pragma once
#include <array>
#include <cstdint>

#include "attn/core/tensor.h"

namespace attn {

using Pair = std::array<int64_t, 2>;

// x (N, C, H, W), weight (O, C/groups, kH, kW), bias (O) or undefined -> (N, O, Ho, Wo), with
// Ho = (H + 2 padding[0] - dilation[0] (kH - 1) - 1) / stride[0] + 1 (and likewise Wo).
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), Pair stride = {1, 1},
              Pair padding = {0, 0}, Pair dilation = {1, 1}, int64_t groups = 1);

}  // namespace attn

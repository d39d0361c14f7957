// 2-d convolution (as torch.nn.functional.conv2d), forward and backward.
//
//   Tensor w = attn::randn({32, 3, 3, 3});                       // (O, C/groups, kH, kW)
//   Tensor y = attn::conv2d(x, w, b, {1, 1}, {1, 1});            // x (N, 3, H, W) -> (N, 32, H, W)
//   Tensor p = attn::conv2d(img, pw, pb, {16, 16});              // ViT patch embedding: (N, D, H/16, W/16)
//   Tensor t = attn::conv2d_patch_tokens(img, pw, pb);           // the same as tokens: (N, H/16 * W/16, D)
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

// The patch embedding as tokens: conv2d(x, weight, bias, stride = kernel) laid out as
// (N, Ho * Wo, O), row-major over the patch grid, i.e. conv2d(...).flatten(2).transpose(1, 2),
// without building the (N, O, Ho, Wo) tensor first (one reshape of x into patch rows, one GEMM).
// Rows and columns of x past the last whole patch are ignored, as conv2d does.
Tensor conv2d_patch_tokens(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace attn

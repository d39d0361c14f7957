// The conv2d oracle: direct loops over every output and tap, accumulated in double. Slow; used
// by the tests to check the oneDNN, im2col and patch paths, and as ConvPath::reference.
//
//   auto p = kernels::conv_params(x.shape(), w.shape(), stride, padding, dilation, groups);
//   Tensor y = reference::conv2d_forward_naive(x, w, bias, p);
#pragma once
#include "attn/core/tensor.h"
#include "../cpu/conv_kernels.h"

namespace attn::reference {

// x (N, C, H, W), w (O, C/G, kh, kw), bias (O) or undefined -> (N, O, Ho, Wo), x's dtype.
Tensor conv2d_forward_naive(const Tensor& x, const Tensor& w, const Tensor& bias, const kernels::ConvParams& p);
// Gradient of sum(dout * conv2d(x, w)) with respect to x: (N, C, H, W).
Tensor conv2d_backward_input_naive(const Tensor& dout, const Tensor& w, const kernels::ConvParams& p);
// ... and with respect to w: (O, C/G, kh, kw).
Tensor conv2d_backward_weight_naive(const Tensor& dout, const Tensor& x, const kernels::ConvParams& p);

}  // namespace attn::reference

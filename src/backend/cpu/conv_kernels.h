// Internal conv2d kernels: geometry, im2col/col2im, oneDNN convolution primitives and the path
// switch the tests use to run every path on the same inputs.
//
//   kernels::ConvParams p = kernels::conv_params(x.shape(), w.shape(), {1, 1}, {1, 1}, {1, 1}, 1);
//   Tensor col = kernels::im2col(x, p);          // (N, G, C/G * kH * kW, Ho * Wo)
//   kernels::set_conv_path(kernels::ConvPath::im2col);   // tests: force a path, then restore
#pragma once
#include <array>
#include <cstdint>

#include "attn/core/tensor.h"

namespace attn::kernels {

// Geometry of one conv2d call; shapes are validated by attn::conv2d before this is built.
struct ConvParams {
  int64_t N = 0, C = 0, H = 0, W = 0;      // input (N, C, H, W)
  int64_t O = 0, kh = 0, kw = 0;           // weight (O, C / groups, kh, kw)
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
  int64_t Ho = 0, Wo = 0;                  // output (N, O, Ho, Wo)
  int64_t Cg() const { return C / groups; }
  int64_t Og() const { return O / groups; }
  int64_t K() const { return Cg() * kh * kw; }   // rows of one group's column matrix
  int64_t L() const { return Ho * Wo; }          // columns: output positions
};

ConvParams conv_params(const Shape& x, const Shape& w, std::array<int64_t, 2> stride,
                       std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation, int64_t groups);

// Which implementation conv2d runs. automatic: oneDNN for f32, im2col + GEMM for f64, the
// patch path when kernel == stride, padding 0, dilation 1, groups 1. A forced path that does not
// apply (oneDNN on f64, patch on a padded conv) falls back to automatic's choice.
enum class ConvPath { automatic, onednn, im2col, patch, reference };
void set_conv_path(ConvPath p);
ConvPath conv_path();

// x (N, C, H, W) contiguous f32/f64 -> col (N, G, K, L): col[n, g, (ci kh + ky) kw + kx, oy Wo + ox]
// = x[n, g Cg + ci, oy sh - ph + ky dh, ox sw - pw + kx dw] (0 outside the input).
Tensor im2col(const Tensor& x, const ConvParams& p);
// The adjoint: col (N, G, K, L) contiguous -> (N, C, H, W), overlapping taps summed.
Tensor col2im(const Tensor& col, const ConvParams& p);

// oneDNN convolution primitives (f32), cached by geometry; attn tensors are plain NCHW / OIHW,
// reordered to and from the layouts the primitives choose.
bool conv_onednn_supports(DType dt);
Tensor conv2d_onednn_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const ConvParams& p);
// dx (shape of x) when want_x, dw (shape of w) when want_w, db (O) when want_b; others undefined.
void conv2d_onednn_backward(const Tensor& dout, const Tensor& x, const Tensor& w, const ConvParams& p, bool want_x,
                            bool want_w, bool want_b, Tensor& dx, Tensor& dw, Tensor& db);

}  // namespace attn::kernels

// Unary elementwise kernels (forward and backward), f32 and f64. The loops are written so the
// compiler vectorises them; transcendental ones call libm per element, except GELU (exact and
// tanh forms) in f32, which runs the vectorised kernels of vec_dispatch.h.
//
//   Tensor y = attn::kernels::unary_forward(Unary::gelu, x, 0, 0);
#pragma once
#include "attn/core/tensor.h"

namespace attn::kernels {

enum class Unary {
  add_scalar, mul_scalar, div_scalar, rsub_scalar, rdiv_scalar, pow, neg, exp, log, sqrt, rsqrt, abs, tanh,
  sigmoid, relu, gelu, gelu_tanh, clamp
};

const char* unary_name(Unary k);
bool unary_backward_needs_input(Unary k);
bool unary_backward_needs_output(Unary k);
// out = f(a); p0, p1 are the scalar parameters (scalar operand, exponent, clamp bounds).
Tensor unary_forward(Unary k, const Tensor& a, double p0, double p1);
// da = dout * f'(a), from the saved input x and/or output y.
Tensor unary_backward(Unary k, const Tensor& dout, const Tensor& x, const Tensor& y, double p0, double p1);

}  // namespace attn::kernels

// Broadcasting elementwise ops, forward and backward (PyTorch broadcasting rules).
//
//   Tensor y = attn::gelu(x + b);                  // (B, T, C) + (C)
//   Tensor z = attn::where(mask, x, Tensor::scalar(0.f));
//
// Binary ops need both operands of one dtype (no implicit promotion: convert with .to()).
#pragma once
#include "attn/core/tensor.h"

namespace attn {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);    // gradient to the larger; ties split 1/2
Tensor minimum(const Tensor& a, const Tensor& b);

Tensor add(const Tensor& a, double s);
Tensor mul(const Tensor& a, double s);
Tensor div(const Tensor& a, double s);                // a / s, rounded as a true division (as torch)
Tensor pow(const Tensor& a, double exponent);
Tensor rsub(double s, const Tensor& a);               // s - a
Tensor rdiv(double s, const Tensor& a);               // s / a

Tensor neg(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a);
enum class GeluApprox { none, tanh };                  // exact erf form, or the tanh approximation
Tensor gelu(const Tensor& a, GeluApprox approx = GeluApprox::none);
Tensor clamp(const Tensor& a, double lo, double hi);

// Comparisons give u8 (0/1) tensors and record no history.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, double s);
Tensor lt(const Tensor& a, double s);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator+(const Tensor& a, double s) { return add(a, s); }
inline Tensor operator+(double s, const Tensor& a) { return add(a, s); }
inline Tensor operator-(const Tensor& a, double s) { return add(a, -s); }
inline Tensor operator-(double s, const Tensor& a) { return rsub(s, a); }
inline Tensor operator*(const Tensor& a, double s) { return mul(a, s); }
inline Tensor operator*(double s, const Tensor& a) { return mul(a, s); }
inline Tensor operator/(const Tensor& a, double s) { return div(a, s); }
inline Tensor operator/(double s, const Tensor& a) { return rdiv(s, a); }

// In place, no autograd (optimizer updates): a += alpha * b, a *= s.
void add_(Tensor& a, const Tensor& b, double alpha = 1.0);
void mul_(Tensor& a, double s);

}  // namespace attn

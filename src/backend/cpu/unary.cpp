// Unary elementwise kernels, forward and backward. GELU (both forms) in f32 runs the vectorised
// row kernels (vec_dispatch.h: AVX-512 / AVX2 / scalar, polynomial erf/exp, ~1e-7 relative);
// everything else, and f64 GELU (exact, libm), runs the loops below.
#include "unary.h"

#include <cmath>
#include <type_traits>

#include "attn/core/parallel.h"
#include "vec_dispatch.h"

namespace attn::kernels {

const char* unary_name(Unary k) {
  switch (k) {
    case Unary::add_scalar: return "add_scalar";
    case Unary::mul_scalar: return "mul_scalar";
    case Unary::div_scalar: return "div_scalar";
    case Unary::rsub_scalar: return "rsub_scalar";
    case Unary::rdiv_scalar: return "rdiv_scalar";
    case Unary::pow: return "pow";
    case Unary::neg: return "neg";
    case Unary::exp: return "exp";
    case Unary::log: return "log";
    case Unary::sqrt: return "sqrt";
    case Unary::rsqrt: return "rsqrt";
    case Unary::abs: return "abs";
    case Unary::tanh: return "tanh";
    case Unary::sigmoid: return "sigmoid";
    case Unary::relu: return "relu";
    case Unary::gelu: return "gelu";
    case Unary::gelu_tanh: return "gelu_tanh";
    case Unary::clamp: return "clamp";
  }
  return "?";
}

bool unary_backward_needs_input(Unary k) {
  switch (k) {
    case Unary::pow: case Unary::log: case Unary::abs: case Unary::relu: case Unary::gelu:
    case Unary::gelu_tanh: case Unary::clamp: case Unary::rdiv_scalar:
      return true;
    default:
      return false;
  }
}

bool unary_backward_needs_output(Unary k) {
  switch (k) {
    case Unary::exp: case Unary::sqrt: case Unary::rsqrt: case Unary::tanh: case Unary::sigmoid:
      return true;
    default:
      return false;
  }
}

namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;

template <class T>
inline T fwd(Unary k, T x, T p0, T p1) {
  switch (k) {
    case Unary::add_scalar: return x + p0;
    case Unary::mul_scalar: return x * p0;
    case Unary::div_scalar: return x / p0;
    case Unary::rsub_scalar: return p0 - x;
    case Unary::rdiv_scalar: return p0 / x;
    case Unary::pow: return p0 == T(2) ? x * x : std::pow(x, p0);
    case Unary::neg: return -x;
    case Unary::exp: return std::exp(x);
    case Unary::log: return std::log(x);
    case Unary::sqrt: return std::sqrt(x);
    case Unary::rsqrt: return T(1) / std::sqrt(x);
    case Unary::abs: return std::abs(x);
    case Unary::tanh: return std::tanh(x);
    case Unary::sigmoid: return T(1) / (T(1) + std::exp(-x));
    case Unary::relu: return x > T(0) ? x : (x != x ? x : T(0));
    case Unary::gelu: return T(0.5) * x * (T(1) + std::erf(x * T(kInvSqrt2)));
    case Unary::gelu_tanh: {
      const T u = T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x);
      return T(0.5) * x * (T(1) + std::tanh(u));
    }
    case Unary::clamp: return x != x ? x : (x < p0 ? p0 : (x > p1 ? p1 : x));
  }
  return x;
}

template <class T>
inline T bwd(Unary k, T g, T x, T y, T p0, T p1) {
  switch (k) {
    case Unary::add_scalar: return g;
    case Unary::mul_scalar: return g * p0;
    case Unary::div_scalar: return g / p0;
    case Unary::rsub_scalar: return -g;
    case Unary::rdiv_scalar: return -g * p0 / (x * x);
    case Unary::pow: return p0 == T(0) ? T(0) : g * p0 * std::pow(x, p0 - T(1));
    case Unary::neg: return -g;
    case Unary::exp: return g * y;
    case Unary::log: return g / x;
    case Unary::sqrt: return g / (T(2) * y);
    case Unary::rsqrt: return g * T(-0.5) * y * y * y;
    case Unary::abs: return x > T(0) ? g : (x < T(0) ? -g : T(0));
    case Unary::tanh: return g * (T(1) - y * y);
    case Unary::sigmoid: return g * y * (T(1) - y);
    case Unary::relu: return x > T(0) ? g : T(0);
    case Unary::gelu: {
      const T cdf = T(0.5) * (T(1) + std::erf(x * T(kInvSqrt2)));
      const T pdf = T(kInvSqrt2Pi) * std::exp(T(-0.5) * x * x);
      return g * (cdf + x * pdf);
    }
    case Unary::gelu_tanh: {
      const T x2 = x * x;
      const T u = T(kSqrt2OverPi) * (x + T(0.044715) * x2 * x);
      const T t = std::tanh(u);
      const T du = T(kSqrt2OverPi) * (T(1) + T(3 * 0.044715) * x2);
      return g * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du);
    }
    case Unary::clamp: return (x >= p0 && x <= p1) ? g : T(0);
  }
  return g;
}

}  // namespace

namespace {
constexpr int64_t kGeluGrain = 16384;
bool is_gelu(Unary k) { return k == Unary::gelu || k == Unary::gelu_tanh; }
// Calls f(std::integral_constant<Unary, k>{}): the kind becomes a compile-time constant inside
// f's loop, so the switch in fwd/bwd folds away and simple kinds (relu, scalar arithmetic)
// vectorise.
template <class F>
void with_kind(Unary k, F&& f) {
  switch (k) {
#define ATTN_UNARY_CASE(K) \
  case Unary::K: f(std::integral_constant<Unary, Unary::K>{}); return;
    ATTN_UNARY_CASE(add_scalar) ATTN_UNARY_CASE(mul_scalar) ATTN_UNARY_CASE(div_scalar)
    ATTN_UNARY_CASE(rsub_scalar) ATTN_UNARY_CASE(rdiv_scalar) ATTN_UNARY_CASE(pow) ATTN_UNARY_CASE(neg)
    ATTN_UNARY_CASE(exp) ATTN_UNARY_CASE(log) ATTN_UNARY_CASE(sqrt) ATTN_UNARY_CASE(rsqrt)
    ATTN_UNARY_CASE(abs) ATTN_UNARY_CASE(tanh) ATTN_UNARY_CASE(sigmoid) ATTN_UNARY_CASE(relu)
    ATTN_UNARY_CASE(gelu) ATTN_UNARY_CASE(gelu_tanh) ATTN_UNARY_CASE(clamp)
#undef ATTN_UNARY_CASE
  }
}

}  // namespace

Tensor unary_forward(Unary k, const Tensor& a_in, double p0, double p1) {
  Tensor a = a_in.contiguous();
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  if (is_gelu(k) && a.dtype() == DType::f32) {
    const float* x = a.data<float>();
    float* o = out.data<float>();
    const auto& rk = row_kernels();
    const bool tanh = k == Unary::gelu_tanh;
    parallel_for(0, a.numel(), kGeluGrain, [&](int64_t b, int64_t e) { rk.gelu_fwd(x + b, nullptr, o + b, 1, e - b, tanh); });
    return out;
  }
  if (!is_floating(a.dtype()) && (k == Unary::add_scalar || k == Unary::mul_scalar ||
                                  k == Unary::neg || k == Unary::abs || k == Unary::relu)) {
    ATTN_DISPATCH_ALL(a.dtype(), unary_name(k), [&] {
      const T* x = a.data<T>();
      T* o = out.data<T>();
      for (int64_t i = 0; i < a.numel(); ++i) o[i] = T(fwd<double>(k, double(x[i]), p0, p1));
    });
    return out;
  }
  ATTN_DISPATCH_FLOAT(a.dtype(), unary_name(k), [&] {
    const T* x = a.data<T>();
    T* o = out.data<T>();
    const T q0 = T(p0), q1 = T(p1);
    parallel_for(0, a.numel(), 16384, [&](int64_t b, int64_t e) {
      with_kind(k, [&](auto kc) {
        for (int64_t i = b; i < e; ++i) o[i] = fwd<T>(kc.value, x[i], q0, q1);
      });
    });
  });
  return out;
}

Tensor unary_backward(Unary k, const Tensor& dout_in, const Tensor& x_in, const Tensor& y_in,
                      double p0, double p1) {
  Tensor g = dout_in.contiguous();
  Tensor x = x_in.defined() ? x_in.contiguous() : Tensor();
  Tensor y = y_in.defined() ? y_in.contiguous() : Tensor();
  Tensor out = Tensor::empty(g.shape(), g.dtype());
  if (is_gelu(k) && g.dtype() == DType::f32 && x.dtype() == DType::f32) {
    const float* pg = g.data<float>();
    const float* px = x.data<float>();
    float* o = out.data<float>();
    const auto& rk = row_kernels();
    const bool tanh = k == Unary::gelu_tanh;
    parallel_for(0, g.numel(), kGeluGrain, [&](int64_t b, int64_t e) {
      rk.gelu_bwd(pg + b, px + b, nullptr, o + b, nullptr, 1, e - b, tanh);
    });
    return out;
  }
  ATTN_DISPATCH_FLOAT(g.dtype(), unary_name(k), [&] {
    const T* pg = g.data<T>();
    const T* px = x.defined() ? x.data<T>() : nullptr;
    const T* py = y.defined() ? y.data<T>() : nullptr;
    T* o = out.data<T>();
    const T q0 = T(p0), q1 = T(p1);
    parallel_for(0, g.numel(), 16384, [&](int64_t b, int64_t e) {
      with_kind(k, [&](auto kc) {
        constexpr Unary K = decltype(kc)::value;
        if (px && py) {
          for (int64_t i = b; i < e; ++i) o[i] = bwd<T>(K, pg[i], px[i], py[i], q0, q1);
        } else if (px) {
          for (int64_t i = b; i < e; ++i) o[i] = bwd<T>(K, pg[i], px[i], T(0), q0, q1);
        } else if (py) {
          for (int64_t i = b; i < e; ++i) o[i] = bwd<T>(K, pg[i], T(0), py[i], q0, q1);
        } else {
          for (int64_t i = b; i < e; ++i) o[i] = bwd<T>(K, pg[i], T(0), T(0), q0, q1);
        }
      });
    });
  });
  return out;
}

}  // namespace attn::kernels

// Broadcasting elementwise ops and their backward passes.
#include "attn/core/profile.h"
#include "attn/ops/elementwise.h"

#include <cmath>

#include "attn/autograd/grad_mode.h"
#include "attn/autograd/node.h"
#include "attn/ops/reduce.h"
#include "../core/strided.h"
#include "../backend/cpu/unary.h"

namespace attn {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    ATTN_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", a, " and ", b,
               " do not broadcast (dim ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace {

enum class Bin { add, sub, mul, div, max, min };

template <class T>
inline T apply_bin(Bin k, T x, T y) {
  switch (k) {
    case Bin::add: return x + y;
    case Bin::sub: return x - y;
    case Bin::mul: return x * y;
    case Bin::div: return x / y;
    case Bin::max: return (x != x || y != y) ? (x != x ? x : y) : (x > y ? x : y);
    case Bin::min: return (x != x || y != y) ? (x != x ? x : y) : (x < y ? x : y);
  }
  return x;
}

// d[i] = x[i·SX] op y[i·SY] for i < n, SX and SY in {0, 1} (0: a broadcast scalar): the op is
// chosen once per row, not per element, so add / sub / mul vectorise.
template <int SX, int SY, class T>
void bin_row(Bin k, T* d, const T* x, const T* y, int64_t n) {
  auto run = [&](auto f) {
    for (int64_t i = 0; i < n; ++i) d[i] = f(x[i * SX], y[i * SY]);
  };
  switch (k) {
    case Bin::add: run([](T a, T b) { return a + b; }); break;
    case Bin::sub: run([](T a, T b) { return a - b; }); break;
    case Bin::mul: run([](T a, T b) { return a * b; }); break;
    default: run([k](T a, T b) { return apply_bin(k, a, b); }); break;
  }
}

const char* bin_name(Bin k) {
  switch (k) {
    case Bin::add: return "add";
    case Bin::sub: return "sub";
    case Bin::mul: return "mul";
    case Bin::div: return "div";
    case Bin::max: return "maximum";
    case Bin::min: return "minimum";
  }
  return "?";
}

Tensor binary_forward(Bin k, const Tensor& a, const Tensor& b) {
  ATTN_PROFILE("elementwise");
  const char* op = bin_name(k);
  ATTN_CHECK(a.dtype() == b.dtype(), op, ": dtypes differ (", dtype_name(a.dtype()), " and ",
             dtype_name(b.dtype()), "); convert one with .to()");
  Shape s = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor out = Tensor::empty(s, a.dtype());
  ATTN_DISPATCH_ALL(a.dtype(), op, [&] {
    T* o = out.data<T>();
    // The strided walk merges the dims both operands walk alike (contiguous operands of one shape:
    // a single row, cut into segments across threads).
    Tensor ea = a.detach().expand(s), eb = b.detach().expand(s);
    check_not_gemm_packed(a);
    check_not_gemm_packed(b);
    const T* pa = static_cast<const T*>(a.impl().storage->data);
    const T* pb = static_cast<const T*>(b.impl().storage->data);
    Shape so = out.strides();
    detail::for_each_row<3>(s, {&so, &ea.strides(), &eb.strides()}, {0, ea.offset(), eb.offset()},
                            [&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
                              T* d = o + off[0];
                              const T* x = pa + off[1];
                              const T* y = pb + off[2];
                              if (st[1] == 1 && st[2] == 1) bin_row<1, 1>(k, d, x, y, n);
                              else if (st[1] == 1 && st[2] == 0) bin_row<1, 0>(k, d, x, y, n);
                              else if (st[1] == 0 && st[2] == 1) bin_row<0, 1>(k, d, x, y, n);
                              else
                                for (int64_t i = 0; i < n; ++i) d[i] = apply_bin(k, x[i * st[1]], y[i * st[2]]);
                            });
  });
  return out;
}

struct AddSubNode : autograd::Node {
  Shape a_shape, b_shape;
  bool subtract = false;
  const char* name() const override { return subtract ? "sub" : "add"; }
  std::vector<Tensor> backward(const Tensor& dout) override {
    Tensor db = sum_to(dout, b_shape);
    return {sum_to(dout, a_shape), subtract ? neg(db) : db};
  }
};

struct MulNode : autograd::Node {
  Tensor a, b;
  const char* name() const override { return "mul"; }
  std::vector<Tensor> backward(const Tensor& dout) override {
    Tensor da, db;
    if (next[0].fn || next[0].leaf) da = sum_to(mul(dout, b), a.shape());
    if (next[1].fn || next[1].leaf) db = sum_to(mul(dout, a), b.shape());
    return {da, db};
  }
  void release() override { a = Tensor(); b = Tensor(); }
};

struct DivNode : autograd::Node {
  Tensor a, b;
  const char* name() const override { return "div"; }
  std::vector<Tensor> backward(const Tensor& dout) override {
    Tensor da, db;
    Tensor q = div(dout, b);
    if (next[0].fn || next[0].leaf) da = sum_to(q, a.shape());
    if (next[1].fn || next[1].leaf) db = sum_to(neg(mul(q, div(a, b))), b.shape());
    return {da, db};
  }
  void release() override { a = Tensor(); b = Tensor(); }
};

struct MaxMinNode : autograd::Node {
  Tensor a, b;
  bool is_max = true;
  const char* name() const override { return is_max ? "maximum" : "minimum"; }
  std::vector<Tensor> backward(const Tensor& dout) override {
    // Weight 1 to the chosen operand, 1/2 each on ties (as PyTorch).
    Shape s = broadcast_shapes(a.shape(), b.shape(), name());
    Tensor wa = Tensor::empty(s, a.dtype());
    ATTN_DISPATCH_FLOAT(a.dtype(), name(), [&] {
      Tensor ea = a.expand(s).contiguous(), eb = b.expand(s).contiguous();
      const T* x = ea.data<T>();
      const T* y = eb.data<T>();
      T* w = wa.data<T>();
      for (int64_t i = 0; i < wa.numel(); ++i)
        w[i] = x[i] == y[i] ? T(0.5) : ((is_max ? x[i] > y[i] : x[i] < y[i]) ? T(1) : T(0));
    });
    return {sum_to(mul(dout, wa), a.shape()), sum_to(mul(dout, rsub(1.0, wa)), b.shape())};
  }
};

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(Bin::add, a, b);
  if (autograd::needs_grad({a, b})) {
    auto n = std::make_shared<AddSubNode>();
    n->a_shape = a.shape(); n->b_shape = b.shape();
    autograd::attach(out, n, {a, b});
  }
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(Bin::sub, a, b);
  if (autograd::needs_grad({a, b})) {
    auto n = std::make_shared<AddSubNode>();
    n->a_shape = a.shape(); n->b_shape = b.shape(); n->subtract = true;
    autograd::attach(out, n, {a, b});
  }
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(Bin::mul, a, b);
  if (autograd::needs_grad({a, b})) {
    auto n = std::make_shared<MulNode>();
    n->a = a.detach(); n->b = b.detach();
    autograd::attach(out, n, {a, b});
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(Bin::div, a, b);
  if (autograd::needs_grad({a, b})) {
    auto n = std::make_shared<DivNode>();
    n->a = a.detach(); n->b = b.detach();
    autograd::attach(out, n, {a, b});
  }
  return out;
}

static Tensor maxmin(const Tensor& a, const Tensor& b, bool is_max) {
  Tensor out = binary_forward(is_max ? Bin::max : Bin::min, a, b);
  if (autograd::needs_grad({a, b})) {
    auto n = std::make_shared<MaxMinNode>();
    n->a = a.detach(); n->b = b.detach(); n->is_max = is_max;
    autograd::attach(out, n, {a, b});
  }
  return out;
}
Tensor maximum(const Tensor& a, const Tensor& b) { return maxmin(a, b, true); }
Tensor minimum(const Tensor& a, const Tensor& b) { return maxmin(a, b, false); }

// ---- unary ops (including scalar operands) ----

namespace {

struct UnaryNode : autograd::Node {
  kernels::Unary kind;
  double p0 = 0, p1 = 0;
  Tensor x, y;   // input and output, as the backward formula needs
  const char* name() const override { return kernels::unary_name(kind); }
  std::vector<Tensor> backward(const Tensor& dout) override {
    return {kernels::unary_backward(kind, dout, x, y, p0, p1)};
  }
  void release() override { x = Tensor(); y = Tensor(); }
};

Tensor unary(kernels::Unary k, const Tensor& a, double p0 = 0, double p1 = 0) {
  ATTN_PROFILE("elementwise");
  Tensor out = kernels::unary_forward(k, a, p0, p1);
  if (autograd::needs_grad({a})) {
    auto n = std::make_shared<UnaryNode>();
    n->kind = k; n->p0 = p0; n->p1 = p1;
    if (kernels::unary_backward_needs_input(k)) n->x = a.detach();
    if (kernels::unary_backward_needs_output(k)) n->y = out.detach();
    autograd::attach(out, n, {a});
  }
  return out;
}

}  // namespace

Tensor add(const Tensor& a, double s) { return unary(kernels::Unary::add_scalar, a, s); }
Tensor mul(const Tensor& a, double s) { return unary(kernels::Unary::mul_scalar, a, s); }
Tensor div(const Tensor& a, double s) { return unary(kernels::Unary::div_scalar, a, s); }
Tensor pow(const Tensor& a, double e) { return unary(kernels::Unary::pow, a, e); }
Tensor rsub(double s, const Tensor& a) { return unary(kernels::Unary::rsub_scalar, a, s); }
Tensor rdiv(double s, const Tensor& a) { return unary(kernels::Unary::rdiv_scalar, a, s); }
Tensor neg(const Tensor& a) { return unary(kernels::Unary::neg, a); }
Tensor exp(const Tensor& a) { return unary(kernels::Unary::exp, a); }
Tensor log(const Tensor& a) { return unary(kernels::Unary::log, a); }
Tensor sqrt(const Tensor& a) { return unary(kernels::Unary::sqrt, a); }
Tensor rsqrt(const Tensor& a) { return unary(kernels::Unary::rsqrt, a); }
Tensor abs(const Tensor& a) { return unary(kernels::Unary::abs, a); }
Tensor tanh(const Tensor& a) { return unary(kernels::Unary::tanh, a); }
Tensor sigmoid(const Tensor& a) { return unary(kernels::Unary::sigmoid, a); }
Tensor relu(const Tensor& a) { return unary(kernels::Unary::relu, a); }
Tensor gelu(const Tensor& a, GeluApprox approx) {
  ATTN_PROFILE("gelu");
  return unary(approx == GeluApprox::none ? kernels::Unary::gelu : kernels::Unary::gelu_tanh, a);
}
Tensor clamp(const Tensor& a, double lo, double hi) { return unary(kernels::Unary::clamp, a, lo, hi); }

// ---- comparisons ----

static Tensor compare(const Tensor& a, const Tensor& b, int kind, const char* op) {
  ATTN_CHECK(a.dtype() == b.dtype(), op, ": dtypes differ (", dtype_name(a.dtype()), " and ",
             dtype_name(b.dtype()), ")");
  Shape s = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor ea = a.detach().expand(s).contiguous(), eb = b.detach().expand(s).contiguous();
  Tensor out = Tensor::empty(s, DType::u8);
  uint8_t* o = out.data<uint8_t>();
  ATTN_DISPATCH_ALL(a.dtype(), op, [&] {
    const T* x = ea.data<T>();
    const T* y = eb.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i)
      o[i] = kind == 0 ? x[i] == y[i] : kind == 1 ? x[i] > y[i] : x[i] < y[i];
  });
  return out;
}
Tensor eq(const Tensor& a, const Tensor& b) { return compare(a, b, 0, "eq"); }
Tensor gt(const Tensor& a, double s) { return compare(a, Tensor::scalar(s, a.dtype()), 1, "gt"); }
Tensor lt(const Tensor& a, double s) { return compare(a, Tensor::scalar(s, a.dtype()), 2, "lt"); }

// ---- in place ----

void add_(Tensor& a, const Tensor& b, double alpha) {
  ATTN_CHECK(a.dtype() == b.dtype(), "add_: dtypes differ (", dtype_name(a.dtype()), " and ",
             dtype_name(b.dtype()), ")");
  Tensor eb = b.detach().expand(a.shape());
  ATTN_DISPATCH_FLOAT(a.dtype(), "add_", [&] {
    check_not_gemm_packed(a);
    check_not_gemm_packed(eb);
    T* pa = static_cast<T*>(a.impl().storage->data);
    const T* pb = static_cast<const T*>(eb.impl().storage->data);
    const T al = T(alpha);
    Shape sa = a.strides();
    detail::for_each_row<2>(a.shape(), {&sa, &eb.strides()}, {a.offset(), eb.offset()},
                            [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
                              T* d = pa + off[0];
                              const T* s = pb + off[1];
                              if (st[0] == 1 && st[1] == 1) {
                                for (int64_t i = 0; i < n; ++i) d[i] += al * s[i];
                              } else if (st[0] == 1 && st[1] == 0) {
                                const T v = al * *s;
                                for (int64_t i = 0; i < n; ++i) d[i] += v;
                              } else {
                                for (int64_t i = 0; i < n; ++i) d[i * st[0]] += al * s[i * st[1]];
                              }
                            });
  });
}

void mul_(Tensor& a, double s) {
  check_not_gemm_packed(a);
  ATTN_DISPATCH_FLOAT(a.dtype(), "mul_", [&] {
    T* pa = static_cast<T*>(a.impl().storage->data);
    const T f = T(s);
    Shape sa = a.strides();
    detail::for_each_row<1>(a.shape(), {&sa}, {a.offset()},
                            [&](const std::array<int64_t, 1>& off, int64_t n, const std::array<int64_t, 1>& st) {
                              T* d = pa + off[0];
                              if (st[0] == 1) {
                                for (int64_t i = 0; i < n; ++i) d[i] *= f;
                              } else {
                                for (int64_t i = 0; i < n; ++i) d[i * st[0]] *= f;
                              }
                            });
  });
}

}  // namespace attn

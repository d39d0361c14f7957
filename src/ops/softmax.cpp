// Softmax and log-softmax along any dim, with their backward passes. f32 over the last dim runs
// the vectorised row kernels (backend/cpu/vec_dispatch.h); other dims and f64 run the
// reference kernels (backend/reference/norm_reference.h), which walk an (outer, n, inner) layout.
#include "attn/core/profile.h"
#include "attn/ops/softmax.h"

#include "attn/autograd/grad_mode.h"
#include "attn/autograd/node.h"
#include "attn/core/parallel.h"
#include "../backend/cpu/vec_dispatch.h"
#include "../backend/reference/norm_reference.h"

namespace attn {

namespace {

const char* op_name(bool log) { return log ? "log_softmax" : "softmax"; }

struct Layout {
  int64_t outer = 1, n = 1, inner = 1;
};

Layout layout_of(const Shape& s, int64_t d) {
  Layout l;
  if (s.empty()) return l;   // 0-d: one row of one element
  for (int64_t i = 0; i < d; ++i) l.outer *= s[size_t(i)];
  l.n = s[size_t(d)];
  for (int64_t i = d + 1; i < int64_t(s.size()); ++i) l.inner *= s[size_t(i)];
  return l;
}

int64_t row_grain(int64_t n) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)); }

// x contiguous.
Tensor compute_forward(const Tensor& x, int64_t d, bool log) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  if (x.numel() == 0) return out;
  const Layout l = layout_of(x.shape(), d);
  if (x.dtype() == DType::f32 && l.inner == 1) {
    const float* px = x.data<float>();
    float* py = out.data<float>();
    const auto& k = kernels::row_kernels();
    parallel_for(0, l.outer, row_grain(l.n), [&](int64_t r0, int64_t r1) {
      k.softmax_fwd(px + r0 * l.n, py + r0 * l.n, r1 - r0, l.n, log);
    });
    return out;
  }
  ATTN_DISPATCH_FLOAT(x.dtype(), op_name(log), [&] {
    reference::softmax_forward<T>(x.data<T>(), out.data<T>(), l.outer, l.n, l.inner, log);
  });
  return out;
}

// dout, y contiguous, same shape.
Tensor compute_backward(const Tensor& dout, const Tensor& y, int64_t d, bool log) {
  Tensor dx = Tensor::empty(y.shape(), y.dtype());
  if (y.numel() == 0) return dx;
  const Layout l = layout_of(y.shape(), d);
  if (y.dtype() == DType::f32 && l.inner == 1) {
    const float* pg = dout.data<float>();
    const float* py = y.data<float>();
    float* pd = dx.data<float>();
    const auto& k = kernels::row_kernels();
    parallel_for(0, l.outer, row_grain(l.n), [&](int64_t r0, int64_t r1) {
      k.softmax_bwd(pg + r0 * l.n, py + r0 * l.n, pd + r0 * l.n, r1 - r0, l.n, log);
    });
    return dx;
  }
  ATTN_DISPATCH_FLOAT(y.dtype(), op_name(log), [&] {
    reference::softmax_backward<T>(dout.data<T>(), y.data<T>(), dx.data<T>(), l.outer, l.n, l.inner, log);
  });
  return dx;
}

struct SoftmaxNode : autograd::Node {
  Tensor y;   // the output
  int64_t dim = 0;
  bool log = false;
  const char* name() const override { return op_name(log); }
  std::vector<Tensor> backward(const Tensor& dout) override {
    ATTN_CHECK(dout.dtype() == y.dtype(), name(), ": expected a gradient of dtype ", dtype_name(y.dtype()),
               ", got ", dtype_name(dout.dtype()));
    return {compute_backward(dout.contiguous(), y, dim, log)};
  }
  void release() override { y = Tensor(); }
};

Tensor softmax_impl(const Tensor& x, int64_t dim, bool log) {
  ATTN_PROFILE("softmax");
  const char* op = op_name(log);
  ATTN_CHECK(x.defined(), op, ": expected a tensor, got an undefined one");
  const int64_t nd = std::max<int64_t>(x.dim(), 1);
  const int64_t d = dim < 0 ? dim + nd : dim;
  ATTN_CHECK(d >= 0 && d < nd, op, ": dim ", dim, " is out of range for shape ", x.shape());
  Tensor out = compute_forward(x.detach().contiguous(), d, log);
  if (autograd::needs_grad({x})) {
    auto n = std::make_shared<SoftmaxNode>();
    n->y = out.detach();
    n->dim = d;
    n->log = log;
    autograd::attach(out, n, {x});
  }
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, true); }

}  // namespace attn

// Dropout on the counter-based Philox stream: element i is kept iff
// philox_uniform(seed, offset, i) >= p. One philox4x32 call yields the draws of 4 consecutive
// elements (philox_uniform's layout: counter offset + i / 4, lane i % 4), so the kernel calls it
// once per group of 4 (backend/cpu/dropout.cpp; dropout_avx2.cpp: 8 counters at once); the
// backward regenerates the same mask from (seed, offset). relu_dropout = dropout(relu(x)) in one
// pass on the same stream; its backward needs only its output.
#include "attn/ops/dropout.h"

#include <algorithm>
#include <cmath>

#include "attn/autograd/grad_mode.h"
#include "attn/autograd/node.h"
#include "attn/core/isa.h"
#include "attn/core/parallel.h"
#include "attn/ops/elementwise.h"
#include "../backend/cpu/dropout_kernels.h"

namespace attn {

namespace {

template <class T>
T keep_scale(double p) { return p >= 1 ? T(0) : T(1) / T(1 - p); }

// out = x * (keep ? 1/(1-p) : 0), or relu(x) * (keep ? 1/(1-p) : 0) with relu, in blocks of 32
// elements (8 Philox counters) across threads.
Tensor masked_scale(const Tensor& x, uint64_t seed, uint64_t offset, double p, bool relu = false) {
  Tensor xc = x.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  kernels::DropoutStream s;
  s.seed = seed;
  s.offset = offset;
  // philox_uniform(.) = (word >> 8) / 2^24 >= p  <=>  (word >> 8) >= ceil(p * 2^24) (exact in double)
  s.threshold = uint32_t(std::ceil(p * 16777216.0));
  const bool avx2 = active_isa() >= Isa::avx2;
  detail::note_kernel_path(avx2 ? KernelPath::avx2 : KernelPath::scalar);   // the AVX2 kernel on AVX-512 too
  const int64_t n = x.numel();
  const int64_t blocks = (n + 31) / 32;
  ATTN_DISPATCH_FLOAT(x.dtype(), "dropout", [&] {
    const T scale = keep_scale<T>(p);
    const T* px = xc.data<T>();
    T* py = out.data<T>();
    parallel_for(0, blocks, 512, [&](int64_t b0, int64_t b1) {
      const int64_t i0 = b0 * 32, i1 = std::min(n, b1 * 32);
      if (avx2) kernels::dropout_avx2(px, py, i0, i1, s, scale, relu);
      else kernels::dropout_scalar(px, py, i0, i1, s, scale, relu);
    });
  });
  return out;
}

struct DropoutNode : autograd::Node {
  uint64_t seed = 0, offset = 0;
  double p = 0;
  const char* name() const override { return "dropout"; }
  std::vector<Tensor> backward(const Tensor& dout) override { return {masked_scale(dout, seed, offset, p)}; }
};

// relu_dropout's backward from its output y alone: dx = y > 0 ? dy / (1 - p) : 0.
struct ReluDropoutNode : autograd::Node {
  Tensor y;
  double p = 0;
  const char* name() const override { return "relu_dropout"; }
  std::vector<Tensor> backward(const Tensor& dout) override {
    Tensor d = dout.contiguous();
    Tensor dx = Tensor::empty(y.shape(), y.dtype());
    const bool avx2 = active_isa() >= Isa::avx2;
    detail::note_kernel_path(avx2 ? KernelPath::avx2 : KernelPath::scalar);
    const int64_t n = y.numel();
    ATTN_DISPATCH_FLOAT(y.dtype(), "relu_dropout backward", [&] {
      const T scale = keep_scale<T>(p);
      const T *py = y.data<T>(), *pd = d.data<T>();
      T* px = dx.data<T>();
      parallel_for(0, n, 16384, [&](int64_t i0, int64_t i1) {
        if (avx2) kernels::relu_dropout_backward_avx2(py, pd, px, i0, i1, scale);
        else kernels::relu_dropout_backward_scalar(py, pd, px, i0, i1, scale);
      });
    });
    return {dx};
  }
  void release() override { y = Tensor(); }
};

// The common part of dropout and relu_dropout once p, training and the dtype are settled: draws
// numel counters from g and returns the masked output, with the stream's (seed, offset).
Tensor draw_masked(const char* op, const Tensor& x, double p, Generator& g, bool relu, uint64_t& seed,
                   uint64_t& offset) {
  ATTN_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, op, ": expected a f32 or f64 tensor, got ",
             dtype_name(x.dtype()));
  seed = g.seed();
  offset = g.reserve_batch(uint64_t(x.numel()), 4);   // x's leading dim is the batch; 4 elements a counter
  return masked_scale(x.detach(), seed, offset, p, relu);
}

}  // namespace

Tensor relu_dropout(const Tensor& x, double p, bool training, Generator& g) {
  ATTN_CHECK(p >= 0.0 && p <= 1.0, "relu_dropout: p must be in [0, 1], got ", p);
  if (!training || p == 0.0) return relu(x);
  uint64_t seed = 0, offset = 0;
  Tensor out = draw_masked("relu_dropout", x, p, g, true, seed, offset);
  if (autograd::needs_grad({x})) {
    auto n = std::make_shared<ReluDropoutNode>();
    n->y = out.detach();
    n->p = p;
    autograd::attach(out, n, {x});
  }
  return out;
}

Tensor dropout(const Tensor& x, double p, bool training, Generator& g) {
  ATTN_CHECK(p >= 0.0 && p <= 1.0, "dropout: p must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  uint64_t seed = 0, offset = 0;
  Tensor out = draw_masked("dropout", x, p, g, false, seed, offset);
  if (autograd::needs_grad({x})) {
    auto n = std::make_shared<DropoutNode>();
    n->seed = seed; n->offset = offset; n->p = p;
    autograd::attach(out, n, {x});
  }
  return out;
}

Tensor dropout(const Tensor& x, double p, bool training) { return dropout(x, p, training, default_generator()); }

}  // namespace attn

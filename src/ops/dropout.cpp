// Dropout on the counter-based Philox stream: element i is kept iff
// philox_uniform(seed, offset, i) >= p. One philox4x32 call yields the draws of 4 consecutive
// elements (philox_uniform's layout: counter offset + i / 4, lane i % 4), so the kernel calls it
// once per group of 4 (AVX2: 8 counters at once, dropout_avx2.cpp); the backward regenerates
// the same mask from (seed, offset).
#include "attn/ops/dropout.h"

#include <algorithm>
#include <cmath>

#include "attn/autograd/grad_mode.h"
#include "attn/autograd/node.h"
#include "attn/core/isa.h"
#include "attn/core/parallel.h"
#include "dropout_kernels.h"

namespace attn {

namespace kernels {

template <class T>
static void dropout_scalar_impl(const T* x, T* y, int64_t i0, int64_t i1, const DropoutStream& s, T scale) {
  for (int64_t g = i0 / 4; g * 4 < i1; ++g) {
    uint32_t r[4];
    philox4x32(s.seed, s.offset + uint64_t(g), r);
    for (int64_t l = 0; l < 4; ++l) {
      const int64_t i = g * 4 + l;
      if (i < i0) continue;
      if (i >= i1) break;
      y[i] = x[i] * ((r[l] >> 8) >= s.threshold ? scale : T(0));
    }
  }
}

void dropout_scalar(const float* x, float* y, int64_t i0, int64_t i1, const DropoutStream& s, float scale) {
  dropout_scalar_impl(x, y, i0, i1, s, scale);
}
void dropout_scalar(const double* x, double* y, int64_t i0, int64_t i1, const DropoutStream& s, double scale) {
  dropout_scalar_impl(x, y, i0, i1, s, scale);
}

}  // namespace kernels

namespace {

// out = x * (keep ? 1/(1-p) : 0), in blocks of 32 elements (8 Philox counters) across threads.
Tensor masked_scale(const Tensor& x, uint64_t seed, uint64_t offset, double p) {
  Tensor xc = x.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  kernels::DropoutStream s;
  s.seed = seed;
  s.offset = offset;
  // philox_uniform(.) = (word >> 8) / 2^24 >= p  <=>  (word >> 8) >= ceil(p * 2^24) (exact in double)
  s.threshold = uint32_t(std::ceil(p * 16777216.0));
  const bool avx2 = active_isa() >= Isa::avx2;
  const int64_t n = x.numel();
  const int64_t blocks = (n + 31) / 32;
  ATTN_DISPATCH_FLOAT(x.dtype(), "dropout", [&] {
    const T scale = p >= 1 ? T(0) : T(1) / T(1 - p);
    const T* px = xc.data<T>();
    T* py = out.data<T>();
    parallel_for(0, blocks, 512, [&](int64_t b0, int64_t b1) {
      const int64_t i0 = b0 * 32, i1 = std::min(n, b1 * 32);
      if (avx2) kernels::dropout_avx2(px, py, i0, i1, s, scale);
      else kernels::dropout_scalar(px, py, i0, i1, s, scale);
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

}  // namespace

Tensor dropout(const Tensor& x, double p, bool training, Generator& g) {
  ATTN_CHECK(p >= 0.0 && p <= 1.0, "dropout: p must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  ATTN_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, "dropout: expected a f32 or f64 tensor, got ",
             dtype_name(x.dtype()));
  const uint64_t seed = g.seed();
  const uint64_t offset = g.reserve(uint64_t(x.numel()));
  Tensor out = masked_scale(x.detach(), seed, offset, p);
  if (autograd::needs_grad({x})) {
    auto n = std::make_shared<DropoutNode>();
    n->seed = seed; n->offset = offset; n->p = p;
    autograd::attach(out, n, {x});
  }
  return out;
}

Tensor dropout(const Tensor& x, double p, bool training) { return dropout(x, p, training, default_generator()); }

}  // namespace attn

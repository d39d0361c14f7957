// clip_grad_norm_: global gradient norm in double with a fixed chunking (thread-count independent),
// then one in-place scale per gradient.
#include "attn/optim/clip.h"

#include <algorithm>
#include <cmath>

#include "attn/autograd/grad_mode.h"
#include "attn/core/dtype.h"
#include "attn/core/parallel.h"
#include "attn/ops/elementwise.h"

namespace attn::optim {

namespace {
constexpr int64_t kChunk = 1 << 15;

// Sum of squares (norm_type 2) or max |x| (inf) of one contiguous float tensor.
double grad_stat(const Tensor& g0, bool inf_norm) {
  Tensor g = g0.contiguous();
  const int64_t n = g.numel();
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> part(size_t(std::max<int64_t>(chunks, 1)), 0.0);
  ATTN_DISPATCH_FLOAT(g.dtype(), "clip_grad_norm_", [&] {
    const T* p = g.data<T>();
    parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t b = c * kChunk, e = std::min(n, b + kChunk);
        double acc = 0.0;
        if (inf_norm) {
          for (int64_t i = b; i < e; ++i) {
            const double a = std::fabs(double(p[i]));
            if (!(a <= acc)) acc = a;   // NaN propagates
          }
        } else {
          for (int64_t i = b; i < e; ++i) acc += double(p[i]) * double(p[i]);
        }
        part[size_t(c)] = acc;
      }
    });
  });
  double r = 0.0;
  for (double v : part) {
    if (inf_norm) { if (!(v <= r)) r = v; }
    else r += v;
  }
  return r;
}
}  // namespace

double grad_norm(const std::vector<Tensor>& params, double norm_type) {
  const bool inf_norm = std::isinf(norm_type) && norm_type > 0;
  ATTN_CHECK(inf_norm || norm_type == 2.0, "clip_grad_norm_: expected norm_type 2 or inf, got ", norm_type);
  double acc = 0.0;
  for (const Tensor& p : params) {
    if (!p.defined()) continue;
    Tensor g = p.grad();
    if (!g.defined()) continue;
    const double s = grad_stat(g, inf_norm);
    if (inf_norm) { if (!(s <= acc)) acc = s; }
    else acc += s;
  }
  return inf_norm ? acc : std::sqrt(acc);
}

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
  const double total = grad_norm(params, norm_type);
  ATTN_CHECK(!error_if_nonfinite || std::isfinite(total), "clip_grad_norm_: the total norm of order ", norm_type,
             " of the gradients is non-finite (", total, "), so it cannot be clipped");
  NoGradGuard ng;
  for (const Tensor& p : params) {
    if (!p.defined()) continue;
    Tensor g = p.grad();
    if (!g.defined()) continue;
    double coef;
    if (g.dtype() == DType::f32) {   // as torch: the coefficient is computed in the gradient's dtype
      const float c = float(max_norm) / (float(total) + 1e-6f);
      coef = (c != c) ? c : std::min(c, 1.0f);
    } else {
      const double c = max_norm / (total + 1e-6);
      coef = (c != c) ? c : std::min(c, 1.0);
    }
    mul_(g, coef);
  }
  return total;
}

}  // namespace attn::optim

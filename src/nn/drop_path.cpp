// Stochastic depth: a per-sample Bernoulli keep mask, broadcast over the other dims.
#include "attn/nn/drop_path.h"

#include "attn/ops/elementwise.h"

namespace attn::nn {

Tensor drop_path(const Tensor& x, double p, bool training, Generator& g) {
  ATTN_CHECK(p >= 0.0 && p <= 1.0, "drop_path: expected p in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  ATTN_CHECK(x.dim() >= 1, "drop_path: expected a tensor with a batch dim, got shape ", x.shape());
  ATTN_CHECK(is_floating(x.dtype()), "drop_path: expected a f32 or f64 tensor, got ", dtype_name(x.dtype()));
  const double keep = 1.0 - p;
  Shape ms(size_t(x.dim()), 1);
  ms[0] = x.size(0);
  Tensor mask = bernoulli_batch(ms, keep, g, x.dtype());
  if (keep > 0.0) mask = div(mask, Tensor::scalar(keep, x.dtype()));   // as timm: mask.div_(keep_prob)
  return mul(x, mask);
}

DropPath::DropPath(const DropPathOptions& o, Generator* g) : opt_(o), gen_(g) {
  ATTN_CHECK(o.p >= 0.0 && o.p <= 1.0, "DropPath: expected p in [0, 1], got ", o.p);
}

Tensor DropPath::forward(const Tensor& x) const {
  return drop_path(x, opt_.p, is_training(), gen_ ? *gen_ : default_generator());
}

}  // namespace attn::nn

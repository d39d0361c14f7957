// nn::Dropout over attn::dropout.
#include "attn/nn/dropout.h"

#include "attn/ops/dropout.h"

namespace attn::nn {

Dropout::Dropout(const DropoutOptions& o, Generator* g) : opt_(o), gen_(g) {
  ATTN_CHECK(o.p >= 0.0 && o.p <= 1.0, "Dropout: expected p in [0, 1], got ", o.p);
}

Tensor Dropout::forward(const Tensor& x) const {
  if (!is_training() || opt_.p == 0.0) return x;
  return dropout(x, opt_.p, true, gen_ ? *gen_ : default_generator());
}

Tensor Dropout::forward_relu(const Tensor& x) const {
  return relu_dropout(x, opt_.p, is_training(), gen_ ? *gen_ : default_generator());
}

}  // namespace attn::nn

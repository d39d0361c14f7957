// DeiT's two heads (see include/attn/models/distilled.h).
#include "attn/models/distilled.h"

#include "attn/core/error.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/softmax.h"

namespace attn::models {

Tensor combine_distilled_heads(const Tensor& cls, const Tensor& dist, DistilledOutput how) {
  ATTN_CHECK(cls.defined() && dist.defined() && cls.shape() == dist.shape() && cls.dim() == 2,
             "combine_distilled_heads: expected two (B, classes) logits of the same shape, got ",
             cls.defined() ? cls.shape() : Shape{}, " and ", dist.defined() ? dist.shape() : Shape{});
  if (how == DistilledOutput::softmax_sum) return softmax(cls, -1) + softmax(dist, -1);
  return (cls + dist) * 0.5;   // DeiT / timm at inference: the mean of the two heads' logits
}

DistilledHeads* as_distilled(ImageClassifier& m) {
  auto* d = dynamic_cast<DistilledHeads*>(&m);
  return d && d->has_distillation_head() ? d : nullptr;
}

}  // namespace attn::models

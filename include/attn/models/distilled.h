// DeiT's second head (Touvron et al. 2021), shared by the models that have one: ViT / DeiT (a
// distillation token and head_dist on it) and Swin (head_dist on the pooled features, as DeiT's
// head-only variant: Swin's windows have no place for an extra token). The trainer's
// image-classification task trains any of them with train::DistillationLoss through this interface.
//
//   if (models::DistilledHeads* d = models::as_distilled(*model)) {
//     auto [cls, dist] = d->forward_heads(images);              // the two heads apart (training)
//     Tensor joint = models::combine_distilled_heads(cls, dist, d->distilled_output());
//   }
#pragma once
#include <utility>

#include "attn/models/registry.h"

namespace attn::models {

// DeiT's two ways to combine the class and distillation heads at inference:
//   mean_logits  (cls + dist) / 2 (timm's VisionTransformerDistilled, the default)
//   softmax_sum  softmax(cls) + softmax(dist) (the paper's "joint" classifier; argmax-equivalent
//                to their mean, a score in [0, 2] per class)
enum class DistilledOutput { mean_logits, softmax_sum };
// cls, dist: (B, classes) -> (B, classes).
Tensor combine_distilled_heads(const Tensor& cls, const Tensor& dist, DistilledOutput how);

class DistilledHeads {
 public:
  virtual ~DistilledHeads() = default;
  // Whether this model has the distillation head (its config's "distilled").
  virtual bool has_distillation_head() const = 0;
  // The class head's and the distillation head's logits, (B, classes) each (dist undefined without
  // the head).
  virtual std::pair<Tensor, Tensor> forward_heads(const Tensor& images) const = 0;
  virtual DistilledOutput distilled_output() const = 0;
};

// The model's DistilledHeads when it has a distillation head, else null.
DistilledHeads* as_distilled(ImageClassifier& m);

}  // namespace attn::models

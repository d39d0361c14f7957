// DeiT distillation (Touvron et al. 2021) as a loss wrapper, computed exactly as the DeiT repo's
// DistillationLoss:
//   total = (1 - alpha) * CE(cls, y) + alpha * distill
//   soft:  distill = KL(log_softmax(dist / tau) || log_softmax(teacher / tau)), summed, * tau^2 / dist.numel()
//          (F.kl_div(..., reduction='sum', log_target=True))
//   hard:  distill = CE(dist, argmax(teacher))           (alpha = 1/2 by default)
//   none:  total = CE(cls, y)                             (the distillation head is not trained)
// CE(cls, y) is the recipe's base criterion: label smoothing for class indices y (i64 (B)), or
// soft-target cross-entropy when y holds probabilities (f32 (B, classes), e.g. after Mixup).
//
//   train::DistillationLoss crit({.type = train::DistillType::soft, .alpha = 0.5, .tau = 3.0,
//                                 .label_smoothing = 0.1});
//   auto [cls, dist] = student.forward_heads(images);
//   Tensor t; { NoGradGuard ng; t = teacher.forward(images); }
//   train::DistillLossParts l = crit(cls, dist, labels, t);     // l.total.backward()
//
// The paper's inference options are models::combine_distilled_heads (models/vit.h).
#pragma once
#include <string>

#include "attn/core/tensor.h"

namespace attn::train {

enum class DistillType { none, soft, hard };

// "none" | "soft" | "hard"; anything else throws attn::Error naming the three.
DistillType parse_distill_type(const std::string& s);
const char* distill_type_name(DistillType t);

struct DistillConfig {
  DistillType type = DistillType::none;
  double alpha = 0.5;            // weight of the distillation term
  double tau = 1.0;              // soft distillation temperature
  double label_smoothing = 0.0;  // of the base criterion (class-index targets only)
};

struct DistillLossParts {
  Tensor total;     // 0-d, differentiable w.r.t. both heads' logits
  Tensor base;      // CE(cls, y)
  Tensor distill;   // the distillation term (undefined for none)
};

// The soft term alone: sum(KL) * tau^2 / student.numel(). student, teacher: (B, classes).
Tensor soft_distillation(const Tensor& student, const Tensor& teacher, double tau);
// The hard term alone: CE(student, argmax(teacher, -1)).
Tensor hard_distillation(const Tensor& student, const Tensor& teacher);

class DistillationLoss {
 public:
  explicit DistillationLoss(DistillConfig c);
  // cls, dist: (B, classes); target: i64 (B) or f32 (B, classes); teacher: (B, classes), no grad
  // needed (it is detached). dist and teacher may be undefined for none.
  DistillLossParts operator()(const Tensor& cls, const Tensor& dist, const Tensor& target,
                              const Tensor& teacher) const;
  const DistillConfig& config() const { return cfg_; }

 private:
  DistillConfig cfg_;
};

}  // namespace attn::train

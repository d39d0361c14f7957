// DeiT's DistillationLoss (see include/attn/train/distill.h).
#include "attn/train/distill.h"

#include "attn/core/error.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/loss.h"
#include "attn/ops/reduce.h"
#include "attn/ops/softmax.h"

namespace attn::train {

DistillType parse_distill_type(const std::string& s) {
  if (s == "none") return DistillType::none;
  if (s == "soft") return DistillType::soft;
  if (s == "hard") return DistillType::hard;
  fail("distill: expected none, soft or hard, got '", s, "'");
}

const char* distill_type_name(DistillType t) {
  switch (t) {
    case DistillType::soft: return "soft";
    case DistillType::hard: return "hard";
    default: return "none";
  }
}

namespace {
void check_pair(const char* op, const Tensor& student, const Tensor& teacher) {
  ATTN_CHECK(student.defined() && student.dim() == 2, op, ": expected student logits of shape (B, classes), got ",
             student.defined() ? student.shape() : Shape{});
  ATTN_CHECK(teacher.defined() && teacher.shape() == student.shape(), op, ": expected teacher logits of shape ",
             student.shape(), ", got ", teacher.defined() ? teacher.shape() : Shape{});
}
}  // namespace

Tensor soft_distillation(const Tensor& student, const Tensor& teacher, double tau) {
  check_pair("soft_distillation", student, teacher);
  ATTN_CHECK(tau > 0, "soft_distillation: expected tau > 0, got ", tau);
  const Tensor t = teacher.detach().to(student.dtype());
  Tensor kl = kl_div(log_softmax(student * (1.0 / tau), 1), log_softmax(t * (1.0 / tau), 1), Reduction::sum,
                     /*log_target=*/true);
  return kl * (tau * tau / double(student.numel()));
}

Tensor hard_distillation(const Tensor& student, const Tensor& teacher) {
  check_pair("hard_distillation", student, teacher);
  return cross_entropy(student, argmax(teacher.detach(), 1));
}

DistillationLoss::DistillationLoss(DistillConfig c) : cfg_(c) {
  ATTN_CHECK(cfg_.alpha >= 0 && cfg_.alpha <= 1, "distill: expected alpha in [0, 1], got ", cfg_.alpha);
  ATTN_CHECK(cfg_.tau > 0, "distill: expected tau > 0, got ", cfg_.tau);
}

DistillLossParts DistillationLoss::operator()(const Tensor& cls, const Tensor& dist, const Tensor& target,
                                              const Tensor& teacher) const {
  DistillLossParts r;
  CrossEntropyOptions ce;
  // timm's LabelSmoothingCrossEntropy equals F.cross_entropy(label_smoothing); SoftTargetCrossEntropy
  // (Mixup's) is the soft-target cross-entropy, without smoothing (Mixup smooths the targets itself).
  if (target.defined() && target.dtype() != DType::i64) ce.label_smoothing = 0.0;
  else ce.label_smoothing = cfg_.label_smoothing;
  r.base = cross_entropy(cls, target, ce);
  if (cfg_.type == DistillType::none) {
    r.total = r.base;
    return r;
  }
  ATTN_CHECK(dist.defined(), "distill: ", distill_type_name(cfg_.type),
             " distillation needs the distillation head's logits (a model with a distillation token)");
  r.distill = cfg_.type == DistillType::soft ? soft_distillation(dist, teacher, cfg_.tau)
                                             : hard_distillation(dist, teacher);
  r.total = r.base * (1.0 - cfg_.alpha) + r.distill * cfg_.alpha;
  return r;
}

}  // namespace attn::train

// Learning-rate schedules.
#include "attn/optim/schedule.h"

#include <cmath>

namespace attn::optim {

void Schedule::apply(Optimizer& opt, int64_t step) const {
  const double v = lr(step);
  for (auto& g : opt.param_groups()) g.lr = v * g.lr_scale;
}

WarmupCosine::WarmupCosine(const WarmupCosineOptions& o) : opt_(o) {
  ATTN_CHECK(o.total_steps > 0, "WarmupCosine: expected total_steps > 0, got ", o.total_steps);
  ATTN_CHECK(o.warmup_steps >= 0, "WarmupCosine: expected warmup_steps >= 0, got ", o.warmup_steps);
  ATTN_CHECK(!o.warmup_prefix || o.warmup_steps < o.total_steps,
             "WarmupCosine: with warmup_prefix, expected warmup_steps < total_steps, got ", o.warmup_steps, " and ",
             o.total_steps);
}

double WarmupCosine::lr(int64_t step) const {
  ATTN_CHECK(step >= 0, "WarmupCosine: expected step >= 0, got ", step);
  const auto& o = opt_;
  if (step < o.warmup_steps)
    return o.warmup_lr_init + double(step) * ((o.base_lr - o.warmup_lr_init) / double(o.warmup_steps));
  int64_t t = step, T = o.total_steps;
  if (o.warmup_prefix) t -= o.warmup_steps, T -= o.warmup_steps;
  if (t >= T) return o.min_lr;
  return o.min_lr + 0.5 * (o.base_lr - o.min_lr) * (1.0 + std::cos(M_PI * double(t) / double(T)));
}

StepDecay::StepDecay(const StepDecayOptions& o) : opt_(o) {
  ATTN_CHECK(o.step_size > 0, "StepDecay: expected step_size > 0, got ", o.step_size);
}

double StepDecay::lr(int64_t step) const {
  ATTN_CHECK(step >= 0, "StepDecay: expected step >= 0, got ", step);
  return opt_.base_lr * std::pow(opt_.gamma, double(step / opt_.step_size));
}

InverseSqrt::InverseSqrt(const InverseSqrtOptions& o) : opt_(o) {
  ATTN_CHECK(o.d_model > 0 && o.warmup_steps > 0, "InverseSqrt: expected d_model > 0 and warmup_steps > 0, got ",
             o.d_model, " and ", o.warmup_steps);
}

double InverseSqrt::lr(int64_t step) const {
  ATTN_CHECK(step >= 0, "InverseSqrt: expected step >= 0, got ", step);
  if (step == 0) return 0.0;
  const double s = double(step);
  return opt_.scale * std::pow(double(opt_.d_model), -0.5) *
         std::min(std::pow(s, -0.5), s * std::pow(double(opt_.warmup_steps), -1.5));
}

}  // namespace attn::optim

// Learning-rate schedules: objects giving lr(step), applied to an optimizer's groups by
// apply(optimizer, step), which sets each group's lr = lr(step) * group.lr_scale (timm's rule).
//
//   optim::WarmupCosine sched({.base_lr = 5e-4, .total_steps = 10000, .warmup_steps = 500});
//   for (int64_t step = 0; step < 10000; ++step) { sched.apply(opt, step); ...; opt.step(); }
//
// Steps count from 0 (the first optimizer step uses lr(0)). Schedules are stateless: resuming
// from a checkpoint only needs the step.
#pragma once
#include <cstdint>
#include <functional>

#include "attn/optim/optimizer.h"

namespace attn::optim {

class Schedule {
 public:
  virtual ~Schedule() = default;
  virtual double lr(int64_t step) const = 0;
  void apply(Optimizer& opt, int64_t step) const;
};

// timm's CosineLRScheduler (one cycle, t_in_epochs = False): linear warm-up from warmup_lr_init to
// base_lr over warmup_steps, then
//   lr = min_lr + (base_lr - min_lr) * (1 + cos(pi * t / T)) / 2,
// t = step (or step - warmup_steps with warmup_prefix), T = total_steps (minus warmup_steps with
// warmup_prefix); min_lr once t >= T.
struct WarmupCosineOptions {
  double base_lr = 1e-3;
  int64_t total_steps = 1;
  int64_t warmup_steps = 0;
  double warmup_lr_init = 0.0;
  double min_lr = 0.0;
  bool warmup_prefix = false;
};

class WarmupCosine : public Schedule {
 public:
  explicit WarmupCosine(const WarmupCosineOptions& o);
  double lr(int64_t step) const override;
  const WarmupCosineOptions& options() const { return opt_; }

 private:
  WarmupCosineOptions opt_;
};

// torch's StepLR: base_lr * gamma^(step / step_size) (integer division).
struct StepDecayOptions {
  double base_lr = 1e-3;
  int64_t step_size = 1;
  double gamma = 0.1;
};

class StepDecay : public Schedule {
 public:
  explicit StepDecay(const StepDecayOptions& o);
  double lr(int64_t step) const override;

 private:
  StepDecayOptions opt_;
};

// "Attention is all you need": scale * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5).
// Step 0 gives 0 (the min's second term); the peak, at step = warmup_steps, is
// scale * (d_model * warmup_steps)^-0.5.
struct InverseSqrtOptions {
  int64_t d_model = 512;
  int64_t warmup_steps = 4000;
  double scale = 1.0;
};

class InverseSqrt : public Schedule {
 public:
  explicit InverseSqrt(const InverseSqrtOptions& o);
  double lr(int64_t step) const override;

 private:
  InverseSqrtOptions opt_;
};

// Any function of the step (torch's LambdaLR with base lr folded in).
class LambdaSchedule : public Schedule {
 public:
  explicit LambdaSchedule(std::function<double(int64_t)> f) : f_(std::move(f)) {}
  double lr(int64_t step) const override { return f_(step); }

 private:
  std::function<double(int64_t)> f_;
};

}  // namespace attn::optim

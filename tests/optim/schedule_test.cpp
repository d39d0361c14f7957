// LR schedules against torch's schedulers (LambdaLR over the reference formula, StepLR), and
// apply() with per-group lr_scale.
#include <gtest/gtest.h>

#include "attn/attn.h"
#include "attn/optim/schedule.h"
#include "attn/optim/sgd.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::torch_ref;

namespace {
void expect_schedule(const optim::Schedule& s, const Tensor& ref, const std::string& what) {
  std::vector<double> mine;
  for (int64_t t = 0; t < ref.numel(); ++t) mine.push_back(s.lr(t));
  EXPECT_TENSOR_NEAR(Tensor::from_vector(mine, {int64_t(mine.size())}), ref, 1e-15, 1e-12) << what;
}
}  // namespace

TEST(Schedule, WarmupCosineAsTimm) {
  for (bool prefix : {false, true}) {
    optim::WarmupCosineOptions o{.base_lr = 5e-4, .total_steps = 50, .warmup_steps = 7, .warmup_lr_init = 1e-6,
                                 .min_lr = 1e-5, .warmup_prefix = prefix};
    auto ref = torch_ref("optim.schedule", {},
                         {{"kind", "cosine"}, {"n", 60}, {"base_lr", o.base_lr}, {"total_steps", o.total_steps},
                          {"warmup_steps", o.warmup_steps}, {"warmup_lr_init", o.warmup_lr_init},
                          {"min_lr", o.min_lr}, {"warmup_prefix", prefix}});
    optim::WarmupCosine s(o);
    expect_schedule(s, ref.at("lr"), prefix ? "prefix" : "no prefix");
    EXPECT_EQ(s.lr(0), o.warmup_lr_init);
    EXPECT_EQ(s.lr(59), o.min_lr);
  }
  // No warm-up: starts at base_lr.
  optim::WarmupCosine s({.base_lr = 0.1, .total_steps = 10});
  EXPECT_EQ(s.lr(0), 0.1);
}

TEST(Schedule, StepDecayAsTorchStepLR) {
  auto ref = torch_ref("optim.schedule", {}, {{"kind", "step"}, {"n", 40}, {"base_lr", 0.3}, {"step_size", 7}, {"gamma", 0.5}});
  expect_schedule(optim::StepDecay({.base_lr = 0.3, .step_size = 7, .gamma = 0.5}), ref.at("lr"), "step");
}

TEST(Schedule, InverseSqrtAsVaswani) {
  auto ref = torch_ref("optim.schedule", {},
                       {{"kind", "inv_sqrt"}, {"n", 300}, {"d_model", 64}, {"warmup_steps", 100}, {"scale", 2.0}});
  optim::InverseSqrt s({.d_model = 64, .warmup_steps = 100, .scale = 2.0});
  expect_schedule(s, ref.at("lr"), "inv_sqrt");
  EXPECT_EQ(s.lr(0), 0.0);
  // The peak is at the end of warm-up.
  EXPECT_GT(s.lr(100), s.lr(99));
  EXPECT_GT(s.lr(100), s.lr(101));
}

TEST(Schedule, ApplySetsEveryGroupWithLrScale) {
  Tensor a = Tensor::zeros({2}).requires_grad_(), b = Tensor::zeros({3}).requires_grad_();
  optim::ParamGroup ga, gb;
  ga.params = {a};
  gb.params = {b};
  gb.lr_scale = 0.25;
  optim::SGD opt({ga, gb}, {.lr = 1.0});
  optim::LambdaSchedule s([](int64_t t) { return 0.1 * double(t + 1); });
  s.apply(opt, 3);
  EXPECT_EQ(opt.param_groups()[0].lr, s.lr(3));
  EXPECT_EQ(opt.param_groups()[1].lr, s.lr(3) * 0.25);
}

TEST(Schedule, BadOptionsMessages) {
  EXPECT_EQ(error_of([&] { optim::WarmupCosine s({.total_steps = 0}); }),
            "WarmupCosine: expected total_steps > 0, got 0");
  EXPECT_EQ(error_of([&] { optim::StepDecay s({.step_size = 0}); }), "StepDecay: expected step_size > 0, got 0");
}

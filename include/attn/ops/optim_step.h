// Optimizer updates as fused element-wise ops: one pass over a parameter and its state, in place and
// outside autograd, vectorised per ISA (attn/core/isa.h). optim::Adam / AdamW run adam_step_ on every
// parameter; the optimizer classes own the state and the hyper-parameters.
//
//   attn::AdamStep s{.lr = 1e-3, .weight_decay = 0.05, .step = 1, .decoupled = true};   // AdamW
//   attn::adam_step_(param, grad, exp_avg, exp_avg_sq, nullptr, s);
#pragma once
#include "attn/core/tensor.h"

namespace attn {

struct AdamStep {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  double step = 1;          // this update's number t (1 for the first): the bias corrections' power
  bool decoupled = false;   // AdamW: p *= 1 - lr * weight_decay; else L2: grad += weight_decay * p
};

// One Adam update of param from grad in torch.optim's (1.13) operation order; exp_avg, exp_avg_sq
// and, with AMSGrad, *max_exp_avg_sq (else null) are updated in place. Bias corrections in double,
// per-element arithmetic in the dtype (f32 or f64; AVX2 fuses the f32 multiply-adds, as torch does).
// Every tensor of param's shape and dtype; param and the state contiguous.
void adam_step_(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, Tensor* max_exp_avg_sq,
                const AdamStep& s);

}  // namespace attn

// optim::Adam and optim::AdamW: exactly torch.optim's update (torch 1.13, single-tensor path).
//
//   optim::AdamW opt(optim::param_groups_weight_decay(model, 0.05), {.lr = 5e-4, .weight_decay = 0.05});
//
//   t += 1
//   Adam:  g = grad + weight_decay * p            AdamW: p *= 1 - lr * weight_decay
//   m = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g²
//   vmax = max(vmax, v) (amsgrad)
//   p -= lr / (1 - beta1^t) * m / (sqrt(v or vmax) / sqrt(1 - beta2^t) + eps)
//
// State per parameter: "step" (0-d f64), "exp_avg", "exp_avg_sq", "max_exp_avg_sq" (amsgrad).
#pragma once
#include "attn/optim/optimizer.h"

namespace attn::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<ParamGroup> groups, const AdamOptions& o = {});
  Adam(const std::vector<Tensor>& params, const AdamOptions& o = {});
  const char* name() const override { return decoupled_ ? "AdamW" : "Adam"; }

 protected:
  Adam(std::vector<ParamGroup> groups, const AdamOptions& o, bool decoupled);
  void update(const ParamGroup& group, Tensor& param, const Tensor& grad,
              std::map<std::string, Tensor>& state) override;

 private:
  bool decoupled_ = false;
};

// AdamW's defaults as torch: weight_decay 1e-2.
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<ParamGroup> groups, const AdamWOptions& o = {});
  AdamW(const std::vector<Tensor>& params, const AdamWOptions& o = {});
};

}  // namespace attn::optim

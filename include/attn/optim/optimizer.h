// optim::Optimizer: the base of SGD / Adam / AdamW. Holds parameter groups (each with its lr,
// weight decay, lr_scale and per-optimizer hyper-parameters) and per-parameter state.
//
//   auto groups = optim::param_groups_weight_decay(model, 0.05);      // decay / no-decay groups
//   optim::AdamW opt(groups, {.lr = 1e-3, .weight_decay = 0.05});
//   loss.backward();  opt.step();  opt.zero_grad();
//   io::TensorList s = opt.state_dict();                               // into a checkpoint
//
// Updates run in place under NoGradGuard, one fused loop per parameter (f32 or f64, contiguous),
// parallel over elements; parameters whose grad is undefined are skipped (their state too).
//
// state_dict() keys: "param_groups.<g>.<hyper>" (0-d f64: lr, weight_decay, lr_scale, momentum,
// ...), "param_groups.<g>.num_params" (0-d i64) and "state.<i>.<name>" for parameter i, counted
// over the groups in order as torch.optim ("state.3.exp_avg", "state.3.step").
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "attn/core/tensor.h"
#include "attn/io/safetensors.h"

namespace attn::nn { class Module; }

namespace attn::optim {

struct ParamGroup {
  std::vector<Tensor> params;
  double lr = NAN;              // NaN: the optimizer's default
  double weight_decay = NAN;    // NaN: the optimizer's default
  double lr_scale = 1.0;        // a schedule sets lr = schedule(step) * lr_scale (layer-wise decay)
  // Per-optimizer hyper-parameters by name (SGD: momentum, dampening, nesterov; Adam: beta1, beta2,
  // eps, amsgrad); missing ones are filled from the optimizer's defaults.
  std::map<std::string, double> options;
};

// One group holding `params`, every setting from the optimizer's defaults.
inline std::vector<ParamGroup> single_group(const std::vector<Tensor>& params) {
  ParamGroup g;
  g.params = params;
  return {g};
}

// timm's rule, in one place: no weight decay for 1-d parameters (norm weights, biases) and for
// names containing any of no_weight_decay_names().
const std::vector<std::string>& no_weight_decay_names();
bool skip_weight_decay(const std::string& name, const Tensor& param);
// Two groups as timm's param_groups_weight_decay: {no-decay params, weight_decay 0} then
// {the rest, weight_decay}. Parameters not requiring grad are left out.
std::vector<ParamGroup> param_groups_weight_decay(const nn::Module& module, double weight_decay);

class Optimizer {
 public:
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual const char* name() const = 0;
  // One update of every parameter that has a gradient.
  void step();
  // Drops every parameter's gradient (set_to_none).
  void zero_grad();

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  void set_lr(double lr);   // every group

  io::TensorList state_dict() const;
  // Restores hyper-parameters and state (values copied; the optimizer must have the same groups and
  // parameter shapes). Everything is checked before anything changes; mismatches throw attn::Error.
  void load_state_dict(const io::TensorList& sd);

 protected:
  // groups: their unset lr / weight_decay / options are taken from the defaults.
  Optimizer(std::vector<ParamGroup> groups, double lr, double weight_decay,
            const std::map<std::string, double>& defaults);
  // Updates one parameter. `state` is its state (empty before its first update).
  virtual void update(const ParamGroup& group, Tensor& param, const Tensor& grad,
                      std::map<std::string, Tensor>& state) = 0;

 private:
  std::vector<ParamGroup> groups_;
  std::vector<std::map<std::string, Tensor>> state_;   // per parameter, in group order
};

}  // namespace attn::optim

// optim::Adam / AdamW: the state and hyper-parameters of each parameter; the update itself is the
// fused op attn::adam_step_ (attn/ops/optim_step.h), in torch.optim's (1.13) operation order.
#include "attn/optim/adam.h"

#include "attn/ops/optim_step.h"

namespace attn::optim {

namespace {
std::map<std::string, double> adam_defaults(const AdamOptions& o, const char* op) {
  ATTN_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, op,
             ": expected betas in [0, 1), got (", o.beta1, ", ", o.beta2, ")");
  ATTN_CHECK(o.eps >= 0, op, ": expected eps >= 0, got ", o.eps);
  return {{"beta1", o.beta1}, {"beta2", o.beta2}, {"eps", o.eps}, {"amsgrad", o.amsgrad ? 1.0 : 0.0}};
}
AdamOptions from_w(const AdamWOptions& o) { return {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.amsgrad}; }
}  // namespace

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& o, bool decoupled)
    : Optimizer(std::move(groups), o.lr, o.weight_decay, adam_defaults(o, decoupled ? "AdamW" : "Adam")),
      decoupled_(decoupled) {}

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& o) : Adam(std::move(groups), o, false) {}

Adam::Adam(const std::vector<Tensor>& params, const AdamOptions& o)
    : Adam(single_group(params), o, false) {}

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWOptions& o) : Adam(std::move(groups), from_w(o), true) {}

AdamW::AdamW(const std::vector<Tensor>& params, const AdamWOptions& o)
    : Adam(single_group(params), from_w(o), true) {}

void Adam::update(const ParamGroup& group, Tensor& param, const Tensor& grad, std::map<std::string, Tensor>& state) {
  const double lr = group.lr, wd = group.weight_decay;
  const double beta1 = group.options.at("beta1"), beta2 = group.options.at("beta2"), eps = group.options.at("eps");
  const bool amsgrad = group.options.at("amsgrad") != 0.0;
  if (!state.count("step")) {
    state["step"] = Tensor::scalar(0.0, DType::f64);
    state["exp_avg"] = Tensor::zeros(param.shape(), param.dtype());
    state["exp_avg_sq"] = Tensor::zeros(param.shape(), param.dtype());
  }
  if (amsgrad && !state.count("max_exp_avg_sq")) state["max_exp_avg_sq"] = Tensor::zeros(param.shape(), param.dtype());
  double& step = state.at("step").data<double>()[0];
  step += 1.0;
  Tensor& exp_avg = state.at("exp_avg");
  Tensor& exp_avg_sq = state.at("exp_avg_sq");
  Tensor* max_sq = amsgrad ? &state.at("max_exp_avg_sq") : nullptr;
  adam_step_(param, grad, exp_avg, exp_avg_sq, max_sq,
             AdamStep{.lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = eps, .weight_decay = wd, .step = step,
                      .decoupled = decoupled_});
}

}  // namespace attn::optim

// optim::Adam / AdamW: one fused loop per parameter, in torch.optim's (1.13) operation order;
// bias corrections computed in double, per-element arithmetic in the parameter's dtype.
#include "attn/optim/adam.h"

#include <algorithm>
#include <cmath>

#include "attn/core/dtype.h"
#include "attn/core/isa.h"
#include "attn/core/parallel.h"
#include "adam_kernels.h"

namespace attn::optim {

namespace {
std::map<std::string, double> adam_defaults(const AdamOptions& o, const char* op) {
  ATTN_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, op,
             ": expected betas in [0, 1), got (", o.beta1, ", ", o.beta2, ")");
  ATTN_CHECK(o.eps >= 0, op, ": expected eps >= 0, got ", o.eps);
  return {{"beta1", o.beta1}, {"beta2", o.beta2}, {"eps", o.eps}, {"amsgrad", o.amsgrad ? 1.0 : 0.0}};
}
void run_chunk(float* p, const float* g, float* m, float* v, float* vmax, int64_t n, const kernels::AdamScalars& s,
               bool avx2) {
  if (avx2) kernels::adam_f32_avx2(p, g, m, v, vmax, n, s);
  else kernels::adam_reference<float>(p, g, m, v, vmax, n, s);
}
void run_chunk(double* p, const double* g, double* m, double* v, double* vmax, int64_t n,
               const kernels::AdamScalars& s, bool) {
  kernels::adam_reference<double>(p, g, m, v, vmax, n, s);
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
  const double bias_correction1 = 1.0 - std::pow(beta1, step);
  const double bias_correction2 = 1.0 - std::pow(beta2, step);
  const double step_size = lr / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);
  Tensor exp_avg = state.at("exp_avg"), exp_avg_sq = state.at("exp_avg_sq");
  Tensor max_sq = amsgrad ? state.at("max_exp_avg_sq") : Tensor();
  const kernels::AdamScalars sc{beta1, beta2, eps, wd, 1.0 - lr * wd, bias_correction2_sqrt, -step_size, decoupled_};
  const int64_t n = param.numel();
  const bool avx2 = param.dtype() == DType::f32 && active_isa() >= Isa::avx2;
  ATTN_DISPATCH_FLOAT(param.dtype(), name(), [&] {
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    T* m = exp_avg.data<T>();
    T* v = exp_avg_sq.data<T>();
    T* vmax = amsgrad ? max_sq.data<T>() : nullptr;
    // Chunks in whole blocks of 8, so the vector/tail split (and the result) does not depend on
    // the thread count.
    parallel_for(0, (n + 7) / 8, 2048, [&](int64_t b0, int64_t b1) {
      const int64_t i0 = b0 * 8, i1 = std::min(n, b1 * 8);
      run_chunk(p + i0, g + i0, m + i0, v + i0, vmax ? vmax + i0 : nullptr, i1 - i0, sc, avx2);
    });
  });
}

}  // namespace attn::optim

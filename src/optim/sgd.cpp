// optim::SGD: one fused loop per parameter, in torch.optim.SGD's operation order.
#include "attn/optim/sgd.h"

#include "attn/core/dtype.h"
#include "attn/core/parallel.h"

namespace attn::optim {

namespace {
std::map<std::string, double> sgd_defaults(const SGDOptions& o) {
  ATTN_CHECK(o.momentum >= 0, "SGD: expected momentum >= 0, got ", o.momentum);
  ATTN_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
             "SGD: nesterov needs momentum > 0 and dampening 0, got momentum ", o.momentum, " and dampening ",
             o.dampening);
  return {{"momentum", o.momentum}, {"dampening", o.dampening}, {"nesterov", o.nesterov ? 1.0 : 0.0}};
}
}  // namespace

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& o)
    : Optimizer(std::move(groups), o.lr, o.weight_decay, sgd_defaults(o)) {}

SGD::SGD(const std::vector<Tensor>& params, const SGDOptions& o)
    : SGD(single_group(params), o) {}

void SGD::update(const ParamGroup& group, Tensor& param, const Tensor& grad, std::map<std::string, Tensor>& state) {
  const double lr = group.lr, wd = group.weight_decay;
  const double momentum = group.options.at("momentum"), dampening = group.options.at("dampening");
  const bool nesterov = group.options.at("nesterov") != 0.0;
  bool first = false;
  Tensor buf;
  if (momentum != 0.0) {
    auto it = state.find("momentum_buffer");
    if (it == state.end()) {
      buf = Tensor::empty(param.shape(), param.dtype());
      state["momentum_buffer"] = buf;
      first = true;
    } else {
      buf = it->second;
    }
  }
  const int64_t n = param.numel();
  ATTN_DISPATCH_FLOAT(param.dtype(), "SGD", [&] {
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    T* b = buf.defined() ? buf.data<T>() : nullptr;
    const T twd = T(wd), tmom = T(momentum), tdamp = T(1.0 - dampening), tlr = T(-lr);
    parallel_for(0, n, 16384, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        T d = g[i];
        if (wd != 0.0) d = d + twd * p[i];
        if (b) {
          b[i] = first ? d : b[i] * tmom + tdamp * d;
          d = nesterov ? d + tmom * b[i] : b[i];
        }
        p[i] = p[i] + tlr * d;
      }
    });
  });
}

}  // namespace attn::optim

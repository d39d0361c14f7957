// optim::SGD: torch.optim.SGD (momentum, dampening, nesterov, L2 weight decay added to the grad).
//
//   optim::SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9, .nesterov = true, .weight_decay = 1e-4});
//
//   d = grad + weight_decay * p
//   buf = d (first step), else momentum * buf + (1 - dampening) * d      (when momentum != 0)
//   d = nesterov ? d + momentum * buf : buf
//   p -= lr * d
#pragma once
#include "attn/optim/optimizer.h"

namespace attn::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> groups, const SGDOptions& o = {});
  SGD(const std::vector<Tensor>& params, const SGDOptions& o = {});
  const char* name() const override { return "SGD"; }

 protected:
  void update(const ParamGroup& group, Tensor& param, const Tensor& grad,
              std::map<std::string, Tensor>& state) override;
};

}  // namespace attn::optim

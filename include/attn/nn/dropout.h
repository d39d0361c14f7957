// nn::Dropout: attn::dropout in training mode, identity in eval mode (torch.nn.Dropout).
//
//   nn::Dropout drop(0.1);              // draws from default_generator()
//   nn::Dropout drop2(0.1, &my_gen);    // or from a given generator (must outlive the module)
//   Tensor y = drop.forward(x);         // x: any shape
#pragma once
#include "attn/core/rng.h"
#include "attn/nn/module.h"

namespace attn::nn {

struct DropoutOptions {
  double p = 0.5;
};

class Dropout : public Module {
 public:
  explicit Dropout(const DropoutOptions& o = {}, Generator* g = nullptr);
  explicit Dropout(double p, Generator* g = nullptr) : Dropout(DropoutOptions{p}, g) {}
  Tensor forward(const Tensor& x) const;
  Tensor forward_relu(const Tensor& x) const;   // forward(relu(x)) in one pass (attn::relu_dropout)
  double p() const { return opt_.p; }

 private:
  DropoutOptions opt_;
  Generator* gen_;   // null: default_generator()
};

}  // namespace attn::nn

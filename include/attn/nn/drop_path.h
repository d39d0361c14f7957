// nn::DropPath: stochastic depth per sample, as timm's DropPath / drop_path. In training, each
// sample (index along dim 0) keeps the whole branch with probability 1-p, scaled by 1/(1-p), or
// zeroes it; identity in eval mode or when p == 0.
//
//   nn::DropPath dp(0.1);
//   x = x + dp.forward(attn_branch);    // (B, T, C): one keep/drop draw per b
#pragma once
#include "attn/core/rng.h"
#include "attn/nn/module.h"

namespace attn::nn {

// The functional form: mask (B, 1, ..., 1) ~ Bernoulli(1-p) from g, out = x * mask / (1-p)
// (scale_by_keep; p == 1 gives x * 0).
Tensor drop_path(const Tensor& x, double p, bool training, Generator& g);

struct DropPathOptions {
  double p = 0.0;
};

class DropPath : public Module {
 public:
  explicit DropPath(const DropPathOptions& o = {}, Generator* g = nullptr);
  explicit DropPath(double p, Generator* g = nullptr) : DropPath(DropPathOptions{p}, g) {}
  Tensor forward(const Tensor& x) const;
  double p() const { return opt_.p; }

 private:
  DropPathOptions opt_;
  Generator* gen_;   // null: default_generator()
};

}  // namespace attn::nn

// nn::MLP: timm's Mlp — fc1 -> act -> drop -> fc2 -> drop, parameters "fc1.*" and "fc2.*".
//
//   nn::MLP mlp({.in_features = 768, .hidden_features = 3072});     // out = in, GELU, no dropout
//   Tensor y = mlp.forward(x);                                       // (..., 768) -> (..., 768)
#pragma once
#include <memory>

#include "attn/core/rng.h"
#include "attn/nn/dropout.h"
#include "attn/nn/linear.h"
#include "attn/nn/module.h"

namespace attn::nn {

enum class Activation { gelu, gelu_tanh, relu };

// Applies the activation (GELU exact erf form, its tanh approximation, or ReLU).
Tensor activation(const Tensor& x, Activation act);

struct MLPOptions {
  int64_t in_features = 0;
  int64_t hidden_features = 0;     // 0: in_features
  int64_t out_features = 0;        // 0: in_features
  Activation act = Activation::gelu;
  double drop = 0.0;               // after the activation and after fc2
  bool bias = true;
};

class MLP : public Module {
 public:
  explicit MLP(const MLPOptions& o, Generator& g = default_generator(), Generator* dropout_gen = nullptr);
  MLP(int64_t in_features, int64_t hidden_features, int64_t out_features = 0, Activation act = Activation::gelu,
      double drop = 0.0, Generator& g = default_generator());
  // x: (..., in) -> (..., out)
  Tensor forward(const Tensor& x) const;
  const MLPOptions& options() const { return opt_; }

 private:
  MLPOptions opt_;

 public:
  std::shared_ptr<Linear> fc1;
  std::shared_ptr<Dropout> drop1;
  std::shared_ptr<Linear> fc2;
  std::shared_ptr<Dropout> drop2;
};

}  // namespace attn::nn

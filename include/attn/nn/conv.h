// nn::Conv2d and nn::BatchNorm2d: torch.nn's layers of the same names (parameters "weight",
// "bias"; buffers "running_mean", "running_var", "num_batches_tracked"), default init as torch.
//
//   nn::Conv2d conv({.in_channels = 1, .out_channels = 32, .kernel = 3, .padding = 1});
//   nn::BatchNorm2d bn(32);
//   Tensor y = relu(bn.forward(conv.forward(x)));          // x: (B, 1, 28, 28) -> (B, 32, 28, 28)
#pragma once
#include "attn/core/rng.h"
#include "attn/nn/module.h"

namespace attn::nn {

struct Conv2dOptions {
  int64_t in_channels = 0, out_channels = 0;
  int64_t kernel = 3, stride = 1, padding = 0, dilation = 1, groups = 1;
  bool bias = true;
};

class Conv2d : public Module {
 public:
  explicit Conv2d(const Conv2dOptions& o, Generator& g = default_generator());
  Tensor forward(const Tensor& x) const;   // (B, C, H, W) -> (B, O, Ho, Wo)
  const Conv2dOptions& options() const { return opt_; }
  Tensor& weight;
  Tensor& bias;

 private:
  Conv2dOptions opt_;
};

class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t channels, double eps = 1e-5, double momentum = 0.1);
  Tensor forward(const Tensor& x) const;   // batch statistics in training (updating the running ones)
  // Tokens (..., C): every token one example of the batch (torch's BatchNorm1d on the tokens flattened to (N, C)).
  Tensor forward_tokens(const Tensor& x) const;
  Tensor& weight;
  Tensor& bias;
  Tensor& running_mean;
  Tensor& running_var;
  Tensor& num_batches_tracked;

 private:
  double eps_, momentum_;
};

}  // namespace attn::nn

// nn::LayerNorm over the last dim, as torch.nn.LayerNorm (parameters "weight" = 1, "bias" = 0).
//
//   nn::LayerNorm norm(768);                                    // eps 1e-5, affine
//   nn::LayerNorm vit_norm({.normalized_shape = 768, .eps = 1e-6});
//   Tensor y = norm.forward(x);                                 // x: (..., 768)
#pragma once
#include "attn/nn/module.h"

namespace attn::nn {

struct LayerNormOptions {
  int64_t normalized_shape = 0;    // C, the size of the last dim
  double eps = 1e-5;
  bool elementwise_affine = true;
  DType dtype = DType::f32;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(const LayerNormOptions& o);
  explicit LayerNorm(int64_t normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  // x: (..., C) -> (..., C)
  Tensor forward(const Tensor& x) const;
  void reset_parameters();
  const LayerNormOptions& options() const { return opt_; }

 private:
  LayerNormOptions opt_;

 public:
  Tensor& weight;   // (C), undefined without affine
  Tensor& bias;     // (C), undefined without affine
};

}  // namespace attn::nn

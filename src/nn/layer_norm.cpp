// nn::LayerNorm over attn::layer_norm.
#include "attn/nn/layer_norm.h"

#include "attn/nn/init.h"
#include "attn/ops/norm.h"

namespace attn::nn {

namespace {
const LayerNormOptions& checked(const LayerNormOptions& o) {
  ATTN_CHECK(o.normalized_shape > 0, "LayerNorm: expected a positive normalized_shape, got ", o.normalized_shape);
  ATTN_CHECK(o.eps >= 0, "LayerNorm: expected eps >= 0, got ", o.eps);
  ATTN_CHECK(is_floating(o.dtype), "LayerNorm: expected a f32 or f64 dtype, got ", dtype_name(o.dtype));
  return o;
}
Tensor affine_param(const LayerNormOptions& o) {
  return o.elementwise_affine ? Tensor::empty({o.normalized_shape}, o.dtype) : Tensor();
}
}  // namespace

LayerNorm::LayerNorm(const LayerNormOptions& o)
    : opt_(checked(o)), weight(register_parameter("weight", affine_param(o))), bias(register_parameter("bias", affine_param(o))) {
  reset_parameters();
}

LayerNorm::LayerNorm(int64_t normalized_shape, double eps, bool elementwise_affine)
    : LayerNorm(LayerNormOptions{normalized_shape, eps, elementwise_affine, DType::f32}) {}

void LayerNorm::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor LayerNorm::forward(const Tensor& x) const {
  ATTN_CHECK(x.dim() >= 1 && x.size(-1) == opt_.normalized_shape, "LayerNorm: expected input with last dim ",
             opt_.normalized_shape, ", got shape ", x.shape());
  return layer_norm(x, weight, bias, opt_.eps);
}

}  // namespace attn::nn

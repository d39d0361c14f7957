// nn::MLP: two Linear layers around an activation, with dropout as timm's Mlp.
#include "attn/nn/mlp.h"

#include "attn/ops/elementwise.h"
#include "attn/ops/fused.h"
#include "attn/ops/matmul.h"

namespace attn::nn {

Tensor activation(const Tensor& x, Activation act) {
  switch (act) {
    case Activation::gelu: return gelu(x);
    case Activation::gelu_tanh: return gelu(x, GeluApprox::tanh);
    case Activation::relu: return relu(x);
  }
  fail("activation: unknown activation");
}

namespace {
MLPOptions resolved(MLPOptions o) {
  ATTN_CHECK(o.in_features > 0, "MLP: expected positive in_features, got ", o.in_features);
  if (o.hidden_features == 0) o.hidden_features = o.in_features;
  if (o.out_features == 0) o.out_features = o.in_features;
  ATTN_CHECK(o.hidden_features > 0 && o.out_features > 0, "MLP: expected positive hidden and out features, got ",
             o.hidden_features, " and ", o.out_features);
  return o;
}
}  // namespace

MLP::MLP(const MLPOptions& o, Generator& g, Generator* dropout_gen) : opt_(resolved(o)) {
  fc1 = register_module("fc1", std::make_shared<Linear>(
                                   LinearOptions{opt_.in_features, opt_.hidden_features, opt_.bias}, g));
  drop1 = register_module("drop1", std::make_shared<Dropout>(opt_.drop, dropout_gen));
  fc2 = register_module("fc2", std::make_shared<Linear>(
                                   LinearOptions{opt_.hidden_features, opt_.out_features, opt_.bias}, g));
  drop2 = register_module("drop2", std::make_shared<Dropout>(opt_.drop, dropout_gen));
}

MLP::MLP(int64_t in_features, int64_t hidden_features, int64_t out_features, Activation act, double drop,
         Generator& g)
    : MLP(MLPOptions{in_features, hidden_features, out_features, act, drop, true}, g) {}

Tensor MLP::forward(const Tensor& x) const {
  // GELU with a bias: the bias goes into the fused bias_gelu instead of the GEMM, so the backward pass
  // computes fc1's bias gradient in the same pass as the GELU gradient (one read of the hidden gradient
  // fewer). Same values: the GEMM's f32 result plus the bias, then GELU, in both forms.
  // (A bf16 x: a bf16 layer norm's result for a packed bf16 fc1, linear_reads_bf16; its bias stays f32.)
  const bool bf16_x = x.dtype() == DType::bf16 && (linear_reads_bf16(fc1->weight) || linear_autocasts(fc1->weight));
  const DType xdt = bf16_x ? DType::f32 : x.dtype();
  const bool fused = opt_.act != Activation::relu && fc1->bias.defined() &&
                     (xdt == DType::f32 || xdt == DType::f64) &&
                     (fc1->weight.dtype() == xdt ||
                      ((fc1->weight.dtype() == DType::bf16 || fc1->weight.dtype() == DType::i8) && xdt == DType::f32)) &&
                     fc1->bias.dtype() == xdt && x.dim() >= 1 && x.size(-1) == fc1->weight.size(1);
  // With a packed weight in inference, the GELU is the GEMM's epilogue (ops/fused.h), and its result
  // bf16 when fc2 is a packed bf16 Linear too (fc2 would round it to bf16 first); so in training under bf16
  // autocast, where fc2 rounds its input too (no dropout between them: dropout keeps f32).
  const bool fc2_bf16 = (fc2->weight.is_gemm_packed() && fc2->weight.dtype() == DType::bf16) ||
                        (linear_autocasts(fc2->weight) && !(drop1->is_training() && drop1->p() > 0));
  const DType hidden = fc2_bf16 ? DType::bf16 : DType::f32;
  Tensor a = fused ? linear_bias_gelu(x, fc1->weight, fc1->bias,
                                      opt_.act == Activation::gelu_tanh ? GeluApprox::tanh : GeluApprox::none, hidden)
                   : activation(fc1->forward(x), opt_.act);
  Tensor h = drop1->forward(a);
  return drop2->forward(fc2->forward(h));
}

}  // namespace attn::nn

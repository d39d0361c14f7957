// nn::MLP: two Linear layers around an activation, with dropout as timm's Mlp.
#include "attn/nn/mlp.h"

#include "attn/ops/elementwise.h"

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
  Tensor h = drop1->forward(activation(fc1->forward(x), opt_.act));
  return drop2->forward(fc2->forward(h));
}

}  // namespace attn::nn

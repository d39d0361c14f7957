#include "attn/nn/conv.h"

#include <cmath>

#include "attn/autograd/grad_mode.h"
#include "attn/nn/init.h"
#include "attn/ops/batch_norm.h"
#include "attn/ops/conv.h"

namespace attn::nn {

Conv2d::Conv2d(const Conv2dOptions& o, Generator& g)
    : weight(register_parameter("weight", Tensor::empty({o.out_channels, o.in_channels / std::max<int64_t>(o.groups, 1),
                                                         o.kernel, o.kernel}))),
      bias(register_parameter("bias", o.bias ? Tensor::empty({o.out_channels}) : Tensor())),
      opt_(o) {
  ATTN_CHECK(o.in_channels > 0 && o.out_channels > 0 && o.kernel > 0 && o.groups > 0 && o.in_channels % o.groups == 0,
             "Conv2d: invalid options (in ", o.in_channels, ", out ", o.out_channels, ", kernel ", o.kernel, ", groups ",
             o.groups, ")");
  NoGradGuard ng;
  // torch.nn.Conv2d.reset_parameters: kaiming_uniform(a = sqrt(5)), bias U(-1/sqrt(fan_in), +).
  init::kaiming_uniform_(weight, g, std::sqrt(5.0));
  if (o.bias) {
    const double fan_in = double(weight.size(1) * o.kernel * o.kernel);
    init::uniform_(bias, g, -1.0 / std::sqrt(fan_in), 1.0 / std::sqrt(fan_in));
  }
}

Tensor Conv2d::forward(const Tensor& x) const {
  return conv2d(x, weight, bias, {opt_.stride, opt_.stride}, {opt_.padding, opt_.padding},
                {opt_.dilation, opt_.dilation}, opt_.groups);
}

BatchNorm2d::BatchNorm2d(int64_t channels, double eps, double momentum)
    : weight(register_parameter("weight", Tensor::ones({channels}))),
      bias(register_parameter("bias", Tensor::zeros({channels}))),
      running_mean(register_buffer("running_mean", Tensor::zeros({channels}))),
      running_var(register_buffer("running_var", Tensor::ones({channels}))),
      num_batches_tracked(register_buffer("num_batches_tracked", Tensor::zeros({}, DType::i64))),
      eps_(eps), momentum_(momentum) {}

Tensor BatchNorm2d::forward(const Tensor& x) const {
  if (is_training()) {
    NoGradGuard ng;
    Tensor n = num_batches_tracked;
    n.fill_(n.item() + 1);
  }
  return batch_norm(x, running_mean, running_var, weight, bias, is_training(), momentum_, eps_);
}

Tensor BatchNorm2d::forward_tokens(const Tensor& x) const {
  ATTN_CHECK(x.dim() >= 2 && x.size(-1) == weight.size(0), "BatchNorm2d::forward_tokens: expected tokens (..., ",
             weight.size(0), "), got ", x.shape());
  return forward(x.reshape({x.numel() / x.size(-1), x.size(-1)})).reshape(x.shape());
}

}  // namespace attn::nn

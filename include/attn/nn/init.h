// Parameter initialisers, in place and without autograd, as torch.nn.init / timm.
//
//   nn::init::trunc_normal_(w, g, 0.0, 0.02);            // timm's ViT init: N(0, .02) in [-2, 2]
//   nn::init::kaiming_uniform_(w, g, std::sqrt(5.0));    // torch.nn.Linear's weight init
//   nn::init::zeros_(b);
//
// Each takes the tensor by handle (writes go to its storage) and returns it. Fans follow
// torch.nn.init._calculate_fan_in_and_fan_out: fan_in = size(1) * receptive field, fan_out =
// size(0) * receptive field, receptive field = product of dims 2.. .
#pragma once
#include <cstdint>
#include <utility>

#include "attn/core/rng.h"
#include "attn/core/tensor.h"

namespace attn::nn::init {

// (fan_in, fan_out) of a tensor with at least 2 dims.
std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t);

Tensor zeros_(Tensor t);
Tensor ones_(Tensor t);
Tensor constant_(Tensor t, double value);
Tensor uniform_(Tensor t, Generator& g, double a = 0.0, double b = 1.0);
Tensor normal_(Tensor t, Generator& g, double mean = 0.0, double std = 1.0);
// N(mean, std) truncated to [a, b] (absolute bounds), as timm's trunc_normal_.
Tensor trunc_normal_(Tensor t, Generator& g, double mean = 0.0, double std = 1.0, double a = -2.0, double b = 2.0);
// U(-bound, bound), bound = gain * sqrt(6 / (fan_in + fan_out)).
Tensor xavier_uniform_(Tensor t, Generator& g, double gain = 1.0);
// U(-bound, bound), bound = sqrt(2 / (1 + a^2)) * sqrt(3 / fan_in) (mode fan_in, leaky_relu).
Tensor kaiming_uniform_(Tensor t, Generator& g, double a = 0.0);

// While a SkipRandomInit lives (on this thread), the random initialisers above (uniform_, normal_,
// trunc_normal_, xavier_uniform_, kaiming_uniform_) fill with zeros instead of drawing, and leave the
// generator where it was. For building a model whose every parameter a strict load then overwrites:
// drawing ViT-B/16's 86M initial weights costs ~9 s on 2 cores, a zero fill ~0.05 s.
//
//   { nn::init::SkipRandomInit skip; model = models::create_model(name, cfg); }
//   train::load_checkpoint(path, *model, nullptr);   // strict: every parameter comes from the file
//
// SkipRandomInit(SkipRandomInit::Fill::none) leaves the tensors as allocated instead (contents
// unspecified, pages never touched): for a strict load only, where it keeps the load's peak memory
// at the model in its final dtype — a zero fill makes every f32 weight resident before the load,
// even those about to be replaced by bf16 ones (ViT-B: 337 MB).
class SkipRandomInit {
 public:
  enum class Fill { zeros, none };
  explicit SkipRandomInit(Fill fill = Fill::zeros);
  ~SkipRandomInit();
  SkipRandomInit(const SkipRandomInit&) = delete;
  SkipRandomInit& operator=(const SkipRandomInit&) = delete;
 private:
  Fill fill_;
};
bool random_init_skipped();
bool random_init_leaves_unfilled();   // inside a SkipRandomInit(Fill::none)

}  // namespace attn::nn::init

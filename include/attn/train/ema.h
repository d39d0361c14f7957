// Exponential moving average of a model's weights, as timm's ModelEmaV2 (DeiT's --model-ema):
// after each optimizer step, for every parameter  ema = decay * ema + (1 - decay) * param  (in the
// parameter's dtype, f32: float(decay) * e + float(1 - decay) * p, as torch computes it); buffers
// (BatchNorm running statistics, ...) are copied.
//
//   auto ema = attn::train::ModelEma::of(*model, 0.9998);     // a copy of the model, in eval mode
//   for (...) { opt.step(); ema.update(*model); }
//   train::evaluate(*ema.classifier(), test, mean, std);       // evaluate the averaged weights
//
// The copy must list the same parameter and buffer names and shapes as the model it follows (it is
// checked on every call; a mismatch throws naming the first differing entry).
#pragma once
#include <memory>

#include "attn/models/registry.h"
#include "attn/nn/module.h"

namespace attn::train {

class ModelEma {
 public:
  // `ema`: a module of the same architecture; its weights are set to `model`'s.
  ModelEma(std::shared_ptr<nn::Module> ema, const nn::Module& model, double decay = 0.9999);
  // A copy of a registry model rebuilt from its config (the global generator is left as it was).
  static ModelEma of(const models::Model& model, double decay = 0.9999);

  void update(const nn::Module& model);   // one EMA step
  void set(const nn::Module& model);      // copy every parameter and buffer
  double decay() const { return decay_; }
  void set_decay(double d);
  nn::Module& module() const { return *ema_; }
  const std::shared_ptr<nn::Module>& module_ptr() const { return ema_; }
  // The copy as the registry model it is.
  std::shared_ptr<models::Model> model() const;
  // The copy as a classifier (for train::evaluate); throws when it is not one.
  std::shared_ptr<models::ImageClassifier> classifier() const;

 private:
  void step(const nn::Module& model, bool copy_all);
  std::shared_ptr<nn::Module> ema_;
  double decay_ = 0.9999;
};

}  // namespace attn::train

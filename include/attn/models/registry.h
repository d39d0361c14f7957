// Named model variants, as timm's registry: a name and a JSON config rebuild any model, so a
// checkpoint (which stores the config) is enough to reload it.
//
//   auto m = models::create_model("mlp", {{"hidden", {256}}});   // overrides on the defaults
//   Tensor logits = m->forward(images);                          // (B, classes)
//   models::model_names();                                       // every registered name
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/nn/module.h"

namespace attn::models {

// An image classifier: images (B, C, H, W) f32 -> logits (B, classes).
class ImageClassifier : public nn::Module {
 public:
  virtual Tensor forward(const Tensor& images) = 0;
  // The full config, including "model" (the registry name): create_model(cfg["model"], cfg) rebuilds it.
  virtual nlohmann::json config() const = 0;
  // Multiply-accumulates per image of the forward pass (counted per layer; FLOPs = 2 x MACs).
  virtual int64_t macs_per_image() const { return 0; }
};

struct ModelEntry {
  std::string name;
  std::string description;
  nlohmann::json defaults;   // the variant's config; overrides are merged over it
  std::function<std::shared_ptr<ImageClassifier>(const nlohmann::json& cfg)> make;
};

void register_model(ModelEntry entry);
// Throws attn::Error naming the known models when `name` is unknown, and the bad key when an
// override names a key the model does not have.
std::shared_ptr<ImageClassifier> create_model(const std::string& name,
                                              const nlohmann::json& overrides = nlohmann::json::object());
std::vector<std::string> model_names();
const ModelEntry& model_entry(const std::string& name);

}  // namespace attn::models

// A multilayer perceptron image classifier: flatten (B, C, H, W) -> Linear -> act -> ... -> head.
// The engine-core issue's first end-to-end model (784-512-512-10 on Fashion-MNIST).
//
//   auto m = std::make_shared<models::MlpClassifier>(models::MlpConfig{});
#pragma once
#include <memory>
#include <vector>

#include "attn/models/registry.h"
#include "attn/nn/linear.h"

namespace attn::models {

struct MlpConfig {
  int64_t in_channels = 1, image_size = 28;
  std::vector<int64_t> hidden = {512, 512};
  int64_t num_classes = 10;
  double dropout = 0.0;
  std::string act = "relu";   // relu | gelu
};

// Every key required, each checked (attn/core/json_config.h); "model" is allowed.
MlpConfig mlp_config_from_json(const nlohmann::json& j);

class MlpClassifier : public ImageClassifier {
 public:
  explicit MlpClassifier(const MlpConfig& cfg);
  Tensor forward(const Tensor& images) override;
  nlohmann::json config() const override;
  int64_t macs_per_image() const override;

 private:
  MlpConfig cfg_;
  std::vector<std::shared_ptr<nn::Linear>> layers_;   // hidden layers "fc1", "fc2", ... then "head"
};

}  // namespace attn::models

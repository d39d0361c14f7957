#include "attn/models/mlp.h"

#include "attn/core/json_config.h"
#include "attn/ops/dropout.h"
#include "attn/ops/elementwise.h"

namespace attn::models {

MlpClassifier::MlpClassifier(const MlpConfig& cfg) : cfg_(cfg) {
  ATTN_CHECK(cfg.act == "relu" || cfg.act == "gelu", "mlp: act must be relu or gelu, got '", cfg.act, "'");
  int64_t in = cfg.in_channels * cfg.image_size * cfg.image_size;
  for (size_t i = 0; i < cfg.hidden.size(); ++i) {
    layers_.push_back(register_module("fc" + std::to_string(i + 1), std::make_shared<nn::Linear>(in, cfg.hidden[i])));
    in = cfg.hidden[i];
  }
  layers_.push_back(register_module("head", std::make_shared<nn::Linear>(in, cfg.num_classes)));
}

Tensor MlpClassifier::forward(const Tensor& images) {
  const int64_t want = cfg_.in_channels * cfg_.image_size * cfg_.image_size;
  ATTN_CHECK(images.dim() == 4 && images.size(1) * images.size(2) * images.size(3) == want,
             "mlp: expected images (B, ", cfg_.in_channels, ", ", cfg_.image_size, ", ", cfg_.image_size,
             "), got shape ", images.shape());
  Tensor x = images.reshape({images.size(0), want});
  for (size_t i = 0; i + 1 < layers_.size(); ++i) {
    x = layers_[i]->forward(x);
    x = cfg_.act == "relu" ? relu(x) : gelu(x);
    if (cfg_.dropout > 0) x = dropout(x, cfg_.dropout, is_training());
  }
  return layers_.back()->forward(x);
}

nlohmann::json MlpClassifier::config() const {
  return {{"model", "mlp"}, {"in_channels", cfg_.in_channels}, {"image_size", cfg_.image_size},
          {"hidden", cfg_.hidden}, {"num_classes", cfg_.num_classes}, {"dropout", cfg_.dropout}, {"act", cfg_.act}};
}

int64_t MlpClassifier::macs_per_image() const {
  int64_t macs = 0, in = cfg_.in_channels * cfg_.image_size * cfg_.image_size;
  for (int64_t h : cfg_.hidden) { macs += in * h; in = h; }
  return macs + in * cfg_.num_classes;
}

MlpConfig mlp_config_from_json(const nlohmann::json& j) {
  ConfigReader r(j, "mlp config");
  MlpConfig c;
  c.in_channels = r.get<int64_t>("in_channels", Range::positive);
  c.image_size = r.get<int64_t>("image_size", Range::positive);
  c.hidden = r.get<std::vector<int64_t>>("hidden", Range::positive);
  c.num_classes = r.get<int64_t>("num_classes", Range::positive);
  c.dropout = r.get<double>("dropout", Range::probability);
  c.act = r.one_of("act", {"relu", "gelu"});
  r.ignore("model");
  r.finish();
  return c;
}

void register_mlp_models() {
  MlpConfig d;
  nlohmann::json defaults = {{"in_channels", d.in_channels}, {"image_size", d.image_size}, {"hidden", d.hidden},
                             {"num_classes", d.num_classes}, {"dropout", d.dropout}, {"act", d.act}};
  register_model({"mlp", "multilayer perceptron on flattened pixels (784-512-512-10)", defaults,
                  [](const nlohmann::json& c) {
                    return std::make_shared<MlpClassifier>(mlp_config_from_json(c));
                  }});
}

}  // namespace attn::models

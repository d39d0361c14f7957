// Every model by name, as timm's registry: a name and a JSON config rebuild any model, so a
// checkpoint (which stores the config) is enough to reload it. Each entry names the task it is
// trained on ("image-classification", "translation"), which picks the trainer's task.
//
//   auto m = models::create_model("mlp", {{"hidden", {256}}});   // an image classifier, overrides on the defaults
//   Tensor logits = m->forward(images);                          // (B, classes)
//   auto t = models::create("transformer", {{"vocab_size", 8000}});   // any model, as models::Model
//   models::model_names();                                       // every registered name
//   models::model_names("translation");                          // those of one task
//   models::model_entry("vit_base_patch16_224").task;            // "image-classification"
//   models::parameter_count("vit_huge_patch14_224");             // 632,045,800, nothing allocated
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/nn/module.h"

namespace attn::models {

inline constexpr const char* kImageClassification = "image-classification";
inline constexpr const char* kTranslation = "translation";
// BERT's entries: pretrained by masked-language modelling (and next-sentence prediction); fine-tuned by the
// trainer's tasks "classify" and "tag" (TrainConfig::task).
inline constexpr const char* kMaskedLM = "masked-lm";

// What every registered model offers: its full config, including "model" (the registry name), so
// that create(cfg["model"], cfg) rebuilds it.
class Model : public nn::Module {
 public:
  virtual nlohmann::json config() const = 0;
};

// An image classifier: images (B, C, H, W) f32 -> logits (B, classes).
class ImageClassifier : public Model {
 public:
  virtual Tensor forward(const Tensor& images) = 0;
  // Multiply-accumulates per image of the forward pass (counted per layer; FLOPs = 2 x MACs).
  virtual int64_t macs_per_image() const { return 0; }
};

struct ModelEntry {
  std::string name;
  std::string description;
  nlohmann::json defaults;   // the variant's config; overrides are merged over it
  std::function<std::shared_ptr<Model>(const nlohmann::json& cfg)> make;
  std::string task = kImageClassification;
  // false: `make` receives the overrides as given (with "model") and merges and checks them against
  // its defaults itself (configs with aliases, e.g. the Transformer's "layers").
  bool merge_defaults = true;
};

void register_model(ModelEntry entry);
// Throws attn::Error naming the known models when `name` is unknown, and the bad key when an
// override names a key the model does not have.
std::shared_ptr<Model> create(const std::string& name, const nlohmann::json& overrides = nlohmann::json::object());
// The same, for a model that must be an image classifier (an error names the model's task otherwise).
std::shared_ptr<ImageClassifier> create_model(const std::string& name,
                                              const nlohmann::json& overrides = nlohmann::json::object());
// Every registered name, or those whose task is `task`.
std::vector<std::string> model_names(const std::string& task = "");
// The model built under a ShapesOnlyGuard (attn/core/tensor.h): every parameter and buffer has its
// shape and dtype but no storage, and no initialiser runs, so any model is built in milliseconds
// without memory. For describing a model (parameter_table(), config(), macs_per_image()); running it is
// an attn::Error. The same errors as create() for an unknown name or a bad config.
std::shared_ptr<Model> create_shapes_only(const std::string& name,
                                          const nlohmann::json& overrides = nlohmann::json::object());
// Parameters of the model `name` with `overrides` (create_shapes_only(...)->num_parameters()).
int64_t parameter_count(const std::string& name, const nlohmann::json& overrides = nlohmann::json::object());
const ModelEntry& model_entry(const std::string& name);
bool has_model(const std::string& name);

// Each model family registers its entries from its own file (register_<family>_models); the
// registry calls them on first use.
void register_mlp_models();
void register_vit_models();
void register_resnet_models();
void register_transformer_models();
void register_rnn_seq2seq_models();
void register_bert_models();
void register_swin_models();

}  // namespace attn::models

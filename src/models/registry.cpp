#include "attn/models/registry.h"

#include <map>

#include "attn/core/error.h"
#include "attn/core/json_config.h"

namespace attn::models {

namespace {

std::map<std::string, ModelEntry>& table() {
  static std::map<std::string, ModelEntry> t;
  return t;
}

void ensure_builtin() {
  static bool registered = false;
  if (registered) return;
  registered = true;
  register_mlp_models();
  register_vit_models();
  register_resnet_models();
  register_transformer_models();
  register_rnn_seq2seq_models();
  register_bert_models();
  register_swin_models();
}

std::string known_names(const std::string& task) {
  std::string known;
  for (const auto& n : model_names(task)) known += (known.empty() ? "" : ", ") + n;
  return known;
}

}  // namespace

void register_model(ModelEntry entry) {
  std::string name = entry.name;
  table()[name] = std::move(entry);
}

std::vector<std::string> model_names(const std::string& task) {
  ensure_builtin();
  std::vector<std::string> out;
  for (const auto& [k, v] : table())
    if (task.empty() || v.task == task) out.push_back(k);
  return out;
}

bool has_model(const std::string& name) {
  ensure_builtin();
  return table().count(name) > 0;
}

const ModelEntry& model_entry(const std::string& name) {
  ensure_builtin();
  auto it = table().find(name);
  if (it == table().end()) fail("unknown model '", name, "' (known: ", known_names(""), ")");
  return it->second;
}

std::shared_ptr<Model> create(const std::string& name, const nlohmann::json& overrides) {
  const ModelEntry& e = model_entry(name);
  // ConfigError: a caller that read the config from a file names the file (attn/core/json_config.h).
  if (!overrides.is_object() && !overrides.is_null())
    throw ConfigError(detail::cat("create_model(", name, "): config overrides must be a JSON object, got ",
                                  describe_json(overrides)));
  if (overrides.is_object() && overrides.contains("model") && overrides["model"] != name)
    throw ConfigError(detail::cat("create_model(", name, "): the config names model ", overrides["model"].dump(),
                                  " but '", name, "' was asked for"));
  nlohmann::json cfg = e.merge_defaults ? e.defaults : nlohmann::json::object();
  if (overrides.is_object())
    for (auto it = overrides.begin(); it != overrides.end(); ++it) {
      if (it.key() == "model") continue;
      if (e.merge_defaults && !cfg.contains(it.key()))
        throw ConfigError(detail::cat("create_model(", name, "): unknown config key '", it.key(), "'"));
      cfg[it.key()] = it.value();
    }
  cfg["model"] = name;
  return e.make(cfg);
}

std::shared_ptr<ImageClassifier> create_model(const std::string& name, const nlohmann::json& overrides) {
  const ModelEntry& e = model_entry(name);
  ATTN_CHECK(e.task == kImageClassification, "create_model: '", name, "' is a ", e.task,
             " model, not an image classifier (image classifiers: ", known_names(kImageClassification), ")");
  auto m = std::dynamic_pointer_cast<ImageClassifier>(create(name, overrides));
  ATTN_CHECK(m != nullptr, "create_model: the registry entry '", name, "' did not make an image classifier");
  return m;
}

std::shared_ptr<Model> create_shapes_only(const std::string& name, const nlohmann::json& overrides) {
  ShapesOnlyGuard shapes;
  return create(name, overrides);
}

int64_t parameter_count(const std::string& name, const nlohmann::json& overrides) {
  return create_shapes_only(name, overrides)->num_parameters();
}

}  // namespace attn::models

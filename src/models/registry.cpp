#include "attn/models/registry.h"

#include <map>

#include "attn/core/error.h"

namespace attn::models {

namespace {
std::map<std::string, ModelEntry>& table() {
  static std::map<std::string, ModelEntry> t;
  return t;
}
void register_builtin();   // defined at the bottom: one call per model family
bool& registered() {
  static bool r = false;
  return r;
}
void ensure_builtin() {
  if (!registered()) {
    registered() = true;
    register_builtin();
  }
}
}  // namespace

void register_model(ModelEntry entry) {
  std::string name = entry.name;
  table()[name] = std::move(entry);
}

std::vector<std::string> model_names() {
  ensure_builtin();
  std::vector<std::string> out;
  for (const auto& [k, v] : table()) out.push_back(k);
  return out;
}

const ModelEntry& model_entry(const std::string& name) {
  ensure_builtin();
  auto it = table().find(name);
  if (it == table().end()) {
    std::string known;
    for (const auto& [k, v] : table()) known += (known.empty() ? "" : ", ") + k;
    fail("unknown model '", name, "' (known: ", known, ")");
  }
  return it->second;
}

std::shared_ptr<ImageClassifier> create_model(const std::string& name, const nlohmann::json& overrides) {
  const ModelEntry& e = model_entry(name);
  nlohmann::json cfg = e.defaults;
  ATTN_CHECK(overrides.is_object() || overrides.is_null(), "create_model(", name, "): config overrides must be a JSON object");
  if (overrides.is_object())
    for (auto it = overrides.begin(); it != overrides.end(); ++it) {
      if (it.key() == "model") continue;
      ATTN_CHECK(cfg.contains(it.key()), "create_model(", name, "): unknown config key '", it.key(), "'");
      cfg[it.key()] = it.value();
    }
  cfg["model"] = name;
  return e.make(cfg);
}

void register_mlp_models();   // models/mlp.cpp
void register_vit_models();   // models/vit_variants.cpp
void register_resnet_models();   // models/resnet.cpp

namespace {
void register_builtin() {
  register_mlp_models();
  register_vit_models();
  register_resnet_models();
}
}  // namespace

}  // namespace attn::models

// Hugging Face transformers' ViT / DeiT layout -> attn's (timm) names, and config.json -> VitConfig.
// Separate query/key/value Linears are concatenated row-wise into attn.qkv (q rows, then k, then v).
#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "attn/core/error.h"
#include "attn/models/name_maps.h"
#include "attn/ops/combine.h"

namespace attn::models {

namespace {


// A non-layer key without the model prefix -> attn's name ("" when unknown).
std::string map_top(const std::string& k) {
  static const std::vector<std::pair<std::string, std::string>> m = {
      {"embeddings.patch_embeddings.projection.", "patch_embed.proj."}, {"layernorm.", "norm."},
      {"pooler.dense.", "pre_logits.fc."}, {"classifier.", "head."}, {"cls_classifier.", "head."},
      {"distillation_classifier.", "head_dist."}};
  if (k == "embeddings.cls_token") return "cls_token";
  if (k == "embeddings.distillation_token") return "dist_token";
  if (k == "embeddings.position_embeddings") return "pos_embed";
  for (const auto& [a, b] : m)
    if (k.starts_with(a)) return b + k.substr(a.size());
  return "";
}

std::string map_layer_rest(const std::string& rest) {
  static const std::vector<std::pair<std::string, std::string>> m = {
      {"attention.output.dense.", "attn.proj."}, {"layernorm_before.", "norm1."}, {"layernorm_after.", "norm2."},
      {"intermediate.dense.", "mlp.fc1."}, {"output.dense.", "mlp.fc2."}};
  for (const auto& [a, b] : m)
    if (rest.starts_with(a)) return b + rest.substr(a.size());
  return "";
}

}  // namespace

io::TensorList map_hf(const io::TensorList& sd) {
  // q/k/v pieces per (layer, weight|bias), and where in the output their packed tensor goes.
  struct Qkv {
    std::map<std::string, std::pair<std::string, Tensor>> parts;   // "query" -> (original key, tensor)
    size_t slot = 0;
  };
  std::map<std::string, Qkv> qkv;   // key: "blocks.N.attn.qkv.weight"
  io::TensorList out;
  out.reserve(sd.size());
  for (const auto& [key, v] : sd) {
    std::string k = key;
    for (const char* p : {"vit.", "deit."})
      if (k.starts_with(p)) { k = k.substr(std::string(p).size()); break; }
    if (std::string t = map_top(k); !t.empty()) { out.emplace_back(t, v); continue; }
    const std::string layer = "encoder.layer.";
    const size_t dot = k.starts_with(layer) ? k.find('.', layer.size()) : std::string::npos;
    if (dot == std::string::npos) { out.emplace_back(key, v); continue; }
    const std::string n = k.substr(layer.size(), dot - layer.size()), rest = k.substr(dot + 1);
    const std::string blk = "blocks." + n + ".";
    if (std::string t = map_layer_rest(rest); !t.empty()) { out.emplace_back(blk + t, v); continue; }
    bool done = false;
    for (const char* part : {"query", "key", "value"}) {
      const std::string pre = std::string("attention.attention.") + part + ".";
      if (!rest.starts_with(pre)) continue;
      const std::string target = blk + "attn.qkv." + rest.substr(pre.size());
      auto [it, fresh] = qkv.try_emplace(target);
      if (fresh) { it->second.slot = out.size(); out.emplace_back(target, Tensor()); }
      it->second.parts[part] = {key, v};
      done = true;
      break;
    }
    if (!done) out.emplace_back(key, v);
  }
  // Pack complete triples; an incomplete one goes back under its original names (a strict load
  // then reports them as unexpected and the qkv as missing).
  io::TensorList extra;
  std::vector<size_t> drop;
  for (auto& [target, q] : qkv) {
    if (q.parts.size() == 3 && q.parts["query"].second.shape() == q.parts["key"].second.shape() &&
        q.parts["key"].second.shape() == q.parts["value"].second.shape()) {
      out[q.slot].second = concat({q.parts["query"].second.contiguous(), q.parts["key"].second.contiguous(),
                                   q.parts["value"].second.contiguous()}, 0);
    } else {
      drop.push_back(q.slot);
      for (auto& [part, kv] : q.parts) extra.push_back(kv);
    }
  }
  if (!drop.empty()) {
    io::TensorList kept;
    for (size_t i = 0; i < out.size(); ++i)
      if (std::find(drop.begin(), drop.end(), i) == drop.end()) kept.push_back(out[i]);
    out = std::move(kept);
  }
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

VitConfig vit_config_from_hf(const nlohmann::json& j, bool distilled) {
  ATTN_CHECK(j.is_object(), "foreign weights: expected a Hugging Face config.json object, got ", j.type_name());
  auto get = [&](const char* key, auto fallback) {
    using T = decltype(fallback);
    if (!j.contains(key) || j.at(key).is_null()) return fallback;
    try {
      return j.at(key).get<T>();
    } catch (const std::exception&) {
      fail("foreign weights: config.json key '", key, "' has an unexpected value ", j.at(key).dump());
    }
  };
  if (j.contains("model_type")) {
    const std::string mt = j.at("model_type").is_string() ? j.at("model_type").get<std::string>() : "";
    ATTN_CHECK(mt == "vit" || mt == "deit", "foreign weights: config.json model_type must be 'vit' or 'deit', got ",
               j.at("model_type").dump());
  }
  const std::string act = get("hidden_act", std::string("gelu"));
  ATTN_CHECK(act == "gelu", "foreign weights: config.json hidden_act '", act,
             "' is not supported (attn's ViT MLP uses the exact GELU, 'gelu')");
  VitConfig c;
  c.dim = get("hidden_size", int64_t(768));
  c.depth = get("num_hidden_layers", int64_t(12));
  c.heads = get("num_attention_heads", int64_t(12));
  const int64_t inter = get("intermediate_size", int64_t(3072));
  ATTN_CHECK(c.dim > 0 && inter > 0, "foreign weights: config.json hidden_size ", c.dim, " / intermediate_size ", inter,
             " must be positive");
  c.mlp_ratio = double(inter) / double(c.dim);
  ATTN_CHECK(int64_t(double(c.dim) * c.mlp_ratio) == inter, "foreign weights: config.json intermediate_size ", inter,
             " is not representable as hidden_size ", c.dim, " x a ratio");
  c.image_size = get("image_size", int64_t(224));
  c.patch_size = get("patch_size", int64_t(16));
  c.in_channels = get("num_channels", int64_t(3));
  c.eps = get("layer_norm_eps", 1e-12);
  c.qkv_bias = get("qkv_bias", true);
  if (j.contains("num_labels")) c.num_classes = get("num_labels", int64_t(2));
  else if (j.contains("id2label") && j.at("id2label").is_object()) c.num_classes = int64_t(j.at("id2label").size());
  else c.num_classes = 2;   // transformers' PretrainedConfig default
  c.drop = 0.0; c.attn_drop = 0.0; c.drop_path = 0.0;
  c.pos_embed = "learned"; c.global_pool = "token"; c.representation_size = 0;
  c.distilled = distilled;
  return c;
}

}  // namespace attn::models

// Hugging Face transformers' ViT / DeiT layout -> attn's (timm) names, and config.json -> VitConfig.
// Separate query/key/value Linears are concatenated row-wise into attn.qkv (q rows, then k, then v).
#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "attn/core/error.h"
#include "attn/core/json_config.h"
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
  if (!j.is_object())
    throw ConfigError("foreign weights: expected a Hugging Face config.json object, got " + describe_json(j));
  // transformers writes null for a setting left unset: its default. Keys attn does not use are allowed.
  ConfigReader r(j, "foreign weights: config.json");
  r.null_is_absent();
  if (r.has("model_type")) {
    const nlohmann::json& mt = j.at("model_type");
    ATTN_CHECK(mt == "vit" || mt == "deit", "foreign weights: config.json model_type must be 'vit' or 'deit', got ",
               mt.dump());
  }
  const std::string act = r.get_or("hidden_act", "gelu");
  ATTN_CHECK(act == "gelu", "foreign weights: config.json hidden_act '", act,
             "' is not supported (attn's ViT MLP uses the exact GELU, 'gelu')");
  VitConfig c;
  c.dim = r.get_or("hidden_size", int64_t(768), Range::positive);
  c.depth = r.get_or("num_hidden_layers", int64_t(12), Range::positive);
  c.heads = r.get_or("num_attention_heads", int64_t(12), Range::positive);
  const int64_t inter = r.get_or("intermediate_size", int64_t(3072), Range::positive);
  c.mlp_ratio = double(inter) / double(c.dim);
  ATTN_CHECK(int64_t(double(c.dim) * c.mlp_ratio) == inter, "foreign weights: config.json intermediate_size ", inter,
             " is not representable as hidden_size ", c.dim, " x a ratio");
  c.image_size = r.get_or("image_size", int64_t(224), Range::positive);
  c.patch_size = r.get_or("patch_size", int64_t(16), Range::positive);
  c.in_channels = r.get_or("num_channels", int64_t(3), Range::positive);
  c.eps = r.get_or("layer_norm_eps", 1e-12, Range::positive);
  c.qkv_bias = r.get_or("qkv_bias", true);
  if (r.has("num_labels")) c.num_classes = r.get<int64_t>("num_labels", Range::positive);
  else if (r.has("id2label")) c.num_classes = int64_t(r.object("id2label").json().size());
  else c.num_classes = 2;   // transformers' PretrainedConfig default
  c.drop = 0.0; c.attn_drop = 0.0; c.drop_path = 0.0;
  c.pos_embed = "learned"; c.global_pool = "token"; c.representation_size = 0;
  c.distilled = distilled;
  return c;
}

}  // namespace attn::models

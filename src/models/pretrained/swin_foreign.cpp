// timm (>= 0.9) and Hugging Face Swin V1 / V2 weights -> attn's (torchvision's) names; see name_maps.h.
#include <cmath>
#include <map>
#include <set>

#include "attn/core/error.h"
#include "attn/core/json_config.h"
#include "attn/models/name_maps.h"
#include "attn/nn/pos_embed.h"
#include "attn/ops/combine.h"

namespace attn::models {

namespace {

bool ends_with_any(const std::string& k, std::initializer_list<const char*> tails) {
  for (const char* t : tails)
    if (k.ends_with(t)) return true;
  return false;
}

// "features.3.1.attn.qkv.weight" -> {3, "1", "attn.qkv.weight"}.
struct TvKey {
  int64_t feature = -1;
  std::string block, rest;
};

TvKey split_tv(const std::string& k) {
  TvKey t;
  if (!k.starts_with("features.")) return t;
  const size_t a = k.find('.', 9), b = a == std::string::npos ? a : k.find('.', a + 1);
  if (a == std::string::npos) return t;
  t.feature = std::stoll(k.substr(9, a - 9));
  t.block = b == std::string::npos ? "" : k.substr(a + 1, b - a - 1);
  t.rest = b == std::string::npos ? k.substr(a + 1) : k.substr(b + 1);
  return t;
}

bool same_values(const Tensor& a, const Tensor& b) {
  const auto x = a.to(DType::f64).to_vector<double>(), y = b.to(DType::f64).to_vector<double>();
  for (size_t i = 0; i < x.size() && i < y.size(); ++i)
    if (!(std::abs(x[i] - y[i]) <= 1e-6)) return false;
  return x.size() == y.size();
}

std::string replace_prefix(const std::string& s, const std::vector<std::pair<std::string, std::string>>& table) {
  for (const auto& [from, to] : table)
    if (s.starts_with(from)) return to + s.substr(from.size());
  return s;
}

}  // namespace

std::vector<std::string> swin_source_keys(const std::string& ours, WeightFormat f, int64_t version) {
  if (f == WeightFormat::torchvision) return {ours};
  const bool timm = f == WeightFormat::timm, v2 = version == 2;
  const std::string hf_root = v2 ? "swinv2." : "swin.";
  if (ours.starts_with("norm.")) return {(timm ? "norm." : hf_root + "layernorm.") + ours.substr(5)};
  if (ours.starts_with("head.")) return {(timm ? "head.fc." : "classifier.") + ours.substr(5)};
  const TvKey t = split_tv(ours);
  if (t.feature < 0) return {ours};
  const std::string leaf = ours.substr(ours.find_last_of('.') + 1);
  if (t.feature == 0) {   // patch embedding: 0 = conv, 2 = LayerNorm
    if (t.block == "0") return {(timm ? "patch_embed.proj." : hf_root + "embeddings.patch_embeddings.projection.") + leaf};
    return {(timm ? "patch_embed.norm." : hf_root + "embeddings.norm.") + leaf};
  }
  if (t.feature % 2 == 0) {   // merging after stage feature / 2 - 1: timm's next stage starts with it
    const int64_t stage = timm ? t.feature / 2 : t.feature / 2 - 1;
    return {(timm ? "layers." : hf_root + "encoder.layers.") + std::to_string(stage) + ".downsample." + t.block +
            (t.rest.empty() ? "" : "." + t.rest)};
  }
  const std::string prefix = (timm ? std::string("layers.") : hf_root + "encoder.layers.") +
                             std::to_string((t.feature - 1) / 2) + ".blocks." + t.block + ".";
  // V2's q and v biases (the key's is held at zero): two tensors, the zeros put between them on load.
  if (v2 && t.rest == "attn.qkv.bias")
    return timm ? std::vector<std::string>{prefix + "attn.q_bias", prefix + "attn.v_bias"}
                : std::vector<std::string>{prefix + "attention.self.query.bias", prefix + "attention.self.value.bias"};
  if (timm) return {prefix + replace_prefix(t.rest, {{"mlp.0.", "mlp.fc1."}, {"mlp.3.", "mlp.fc2."}})};
  if (t.rest.starts_with("attn.qkv."))
    return {prefix + "attention.self.query." + leaf, prefix + "attention.self.key." + leaf,
            prefix + "attention.self.value." + leaf};
  return {prefix + replace_prefix(t.rest, {{"norm1.", "layernorm_before."},
                                           {"norm2.", "layernorm_after."},
                                           {"attn.proj.", "attention.output.dense."},
                                           {"attn.relative_position", "attention.self.relative_position"},
                                           {"attn.relative_coords_table", "attention.self.relative_coords_table"},
                                           {"attn.logit_scale", "attention.self.logit_scale"},
                                           {"attn.cpb_mlp.", "attention.self.continuous_position_bias_mlp."},
                                           {"mlp.0.", "intermediate.dense."},
                                           {"mlp.3.", "output.dense."}})};
}

SwinSourceTensors swin_tensors_from(const io::SafetensorsReader& file, const SwinTransformer& m, WeightFormat f) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < file.entries().size(); ++i) index.emplace(file.entries()[i].name, i);
  std::set<std::string> used;
  SwinSourceTensors out;
  // timm < 0.9 and the original Microsoft checkpoints merge at the END of stage i (layers.0.downsample
  // exists): renumbered as timm's checkpoint_filter_fn does.
  // Their classifier is "head" (timm's checkpoint_filter_fn renames it "head.fc").
  bool merge_at_end = false, plain_head = false;
  if (f == WeightFormat::timm)
    for (const auto& [k, i] : index) {
      merge_at_end = merge_at_end || k.starts_with("layers.0.downsample.");
      plain_head = plain_head || k == "head.weight";
    }
  const int64_t version = m.cfg().version;
  auto source_keys = [&](const std::string& ours) {
    std::vector<std::string> keys = swin_source_keys(ours, f, version);
    const TvKey t = split_tv(ours);
    if (merge_at_end && t.feature > 0 && t.feature % 2 == 0)
      keys = {"layers." + std::to_string(t.feature / 2 - 1) + ".downsample." + t.block + "." + t.rest};
    if (plain_head && ours.starts_with("head.")) keys = {ours};
    return keys;
  };
  const io::TensorList mine = m.state_dict();
  for (const auto& [ours, own] : mine) {
    // Buffers attn computes (relative_position_index; V2's relative_coords_table): its own. timm >= 0.9
    // does not store them; Hugging Face's (N, N) index is the same table.
    // A stored relative_coords_table of the model's shape must hold the model's values: others mean
    // another pretrained window (pretrained_window_sizes).
    if (ends_with_any(ours, {"relative_position_index", "relative_coords_table"})) {
      for (const std::string& k : source_keys(ours)) {
        used.insert(k);
        auto it = index.find(k);
        if (it == index.end() || !ours.ends_with("relative_coords_table")) continue;
        const Tensor stored = file.read(it->second);
        if (stored.shape() == own.shape() && !same_values(stored, own))
          out.misshaped.push_back(k + ": the file's coordinates are not the model's (set pretrained_window_sizes "
                                  "as the weights were trained)");
      }
      out.tensors.emplace_back(ours, own);
      continue;
    }
    std::vector<Tensor> parts;
    std::vector<std::string> missing;
    for (const std::string& k : source_keys(ours)) {
      auto it = index.find(k);
      if (it == index.end()) missing.push_back(k);
      else parts.push_back(file.read(it->second)), used.insert(k);
    }
    if (!missing.empty()) {
      for (const std::string& k : missing) out.missing.push_back(k + " " + shape_str(own.shape()));
      continue;
    }
    // V2's q / v biases: the key's zeros between them.
    if (parts.size() == 2) parts.insert(parts.begin() + 1, Tensor::zeros(parts[0].shape(), parts[0].dtype()));
    Tensor t = parts.size() == 1 ? parts[0] : concat(parts, 0);
    // A position-bias table of another window ((2w'-1)^2, NH): resized bicubic, as timm's
    // resize_rel_pos_bias_table does.
    if (ours.ends_with("relative_position_bias_table") && t.dim() == 2 && own.dim() == 2 &&
        t.size(1) == own.size(1) && t.shape() != own.shape()) {
      auto side = [](int64_t n) { int64_t s = 1; while (s * s < n) ++s; return s * s == n ? s : -1; };
      const int64_t from = side(t.size(0)), to = side(own.size(0));
      if (from > 0 && to > 0) {
        t = nn::resample_pos_embed(t.unsqueeze(0), {from, from}, {to, to}, 0).squeeze(0);
        ++out.tables_resized;
      }
    }
    if (t.shape() != own.shape()) {
      const std::vector<std::string> src = source_keys(ours);
      out.misshaped.push_back((src.size() == 1 ? src[0] : ours) + ": file " + shape_str(t.shape()) + ", model " +
                              shape_str(own.shape()));
      continue;
    }
    out.tensors.emplace_back(ours, t);
  }
  for (const io::SafetensorsEntry& e : file.entries())
    if (!used.count(e.name) && !ends_with_any(e.name, {"attn_mask"})) out.unexpected.push_back(e.name);
  return out;
}

SwinConfig swin_config_from_hf(const nlohmann::json& j) {
  ATTN_CHECK(j.is_object(), "foreign weights: expected a Hugging Face Swin config.json object, got ", j.dump());
  ConfigReader r(j, "foreign weights: config.json");
  r.null_is_absent();
  const std::string type = r.get_or("model_type", "swin");
  ATTN_CHECK(type == "swin" || type == "swinv2", "foreign weights: config.json model_type must be 'swin' (Swin V1) ",
             "or 'swinv2' (Swin V2), got '", type, "'");
  const std::string act = r.get_or("hidden_act", "gelu");
  ATTN_CHECK(act == "gelu", "foreign weights: config.json hidden_act '", act,
             "' is not supported (attn's Swin MLP uses the exact GELU, 'gelu')");
  ATTN_CHECK(!r.get_or("use_absolute_embeddings", false), "foreign weights: config.json use_absolute_embeddings "
             "true (an absolute position embedding) has no counterpart in attn's Swin");
  ATTN_CHECK(r.get_or("qkv_bias", true), "foreign weights: config.json qkv_bias false is not supported");
  const double eps = r.get_or("layer_norm_eps", 1e-5, Range::positive);
  ATTN_CHECK(eps == 1e-5, "foreign weights: config.json layer_norm_eps ", eps,
             " is not supported (attn's Swin LayerNorms use 1e-5)");
  SwinConfig c;
  c.image_size = r.get_or("image_size", int64_t(224), Range::positive);
  c.patch_size = r.get_or("patch_size", int64_t(4), Range::positive);
  c.in_channels = r.get_or("num_channels", int64_t(3), Range::positive);
  c.embed_dim = r.get_or("embed_dim", int64_t(96), Range::positive);
  c.depths = r.get_or("depths", std::vector<int64_t>{2, 2, 6, 2}, Range::positive);
  c.heads = r.get_or("num_heads", std::vector<int64_t>{3, 6, 12, 24}, Range::positive);
  c.window_size = r.get_or("window_size", int64_t(7), Range::positive);
  c.mlp_ratio = r.get_or("mlp_ratio", 4.0, Range::positive);
  c.drop_path = r.get_or("drop_path_rate", 0.1, Range::probability);
  c.drop = r.get_or("hidden_dropout_prob", 0.0, Range::probability);
  c.attn_drop = r.get_or("attention_probs_dropout_prob", 0.0, Range::probability);
  if (r.has("num_labels")) c.num_classes = r.get<int64_t>("num_labels", Range::positive);
  else if (r.has("id2label")) c.num_classes = int64_t(r.object("id2label").json().size());
  else c.num_classes = 2;   // transformers' PretrainedConfig default
  c.version = type == "swinv2" ? 2 : 1;
  if (c.version == 2) {
    // Swinv2Config's default [0, 0, 0, 0]: none (the stage's own window).
    c.pretrained_window_sizes = r.get_or("pretrained_window_sizes", std::vector<int64_t>{}, Range::non_negative);
    bool none = true;
    for (int64_t p : c.pretrained_window_sizes) none = none && p == 0;
    if (none) c.pretrained_window_sizes.clear();
  }
  return c;
}

}  // namespace attn::models

// Layout detection, dispatch to the per-layout maps, and load_foreign_vit (model construction,
// position-embedding resampling, strict load with one error naming the layout).
#include <cmath>
#include <optional>
#include <sstream>

#include "attn/autograd/grad_mode.h"
#include "attn/core/error.h"
#include "attn/io/name_maps.h"
#include "attn/io/pos_resample.h"
#include "attn/nn/init.h"

namespace attn::io {

namespace {

bool contains(const std::string& s, const std::string& p) { return s.find(p) != std::string::npos; }

std::string first_keys(const TensorList& sd, size_t n) {
  std::string s;
  for (size_t i = 0; i < sd.size() && i < n; ++i) s += (i ? ", " : "") + sd[i].first;
  if (sd.size() > n) s += ", ... (" + std::to_string(sd.size() - n) + " more)";
  return s.empty() ? "(none)" : s;
}

const Tensor* find(const TensorList& sd, const std::string& k) {
  for (const auto& [name, t] : sd)
    if (name == k) return &t;
  return nullptr;
}

}  // namespace

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::timm: return "timm";
    case WeightFormat::hf: return "hf";
    case WeightFormat::torchvision: return "torchvision";
  }
  return "?";
}

WeightFormat parse_weight_format(const std::string& s) {
  if (s == "timm") return WeightFormat::timm;
  if (s == "hf") return WeightFormat::hf;
  if (s == "torchvision") return WeightFormat::torchvision;
  fail("convert: unknown weight format '", s, "' (known: timm, hf, torchvision)");
}

TensorList strip_module_prefix(const TensorList& sd) {
  TensorList out;
  out.reserve(sd.size());
  for (const auto& [k, v] : sd) out.emplace_back(k.starts_with("module.") ? k.substr(7) : k, v);
  return out;
}

TensorList with_aliases(const SafetensorsFile& f) {
  TensorList out = f.tensors;
  auto it = f.metadata.find("aliases");
  if (it == f.metadata.end()) return out;
  nlohmann::json a;
  try {
    a = nlohmann::json::parse(it->second);
  } catch (const std::exception&) {
    fail("convert: __metadata__ 'aliases' is not JSON: ", it->second);
  }
  ATTN_CHECK(a.is_object(), "convert: __metadata__ 'aliases' must map dropped keys to kept keys, got ", a.dump());
  for (const auto& [dup, kept] : a.items()) {
    ATTN_CHECK(kept.is_string(), "convert: alias '", dup, "' must name a kept key, got ", kept.dump());
    const Tensor* t = f.find(kept.get<std::string>());
    ATTN_CHECK(t, "convert: alias '", dup, "' names '", kept.get<std::string>(), "', which is not in the file");
    out.emplace_back(dup, *t);
  }
  return out;
}

WeightFormat detect_weight_format(const TensorList& sd_in) {
  const TensorList sd = strip_module_prefix(sd_in);
  bool tv = false, hf = false, timm = false;
  for (const auto& [k, v] : sd) {
    tv |= k.starts_with("encoder.layers.encoder_layer_") || k.starts_with("conv_proj.") || k == "class_token" ||
          k == "encoder.pos_embedding";
    hf |= contains(k, "embeddings.patch_embeddings.") || k.starts_with("vit.encoder.layer.") ||
          k.starts_with("deit.encoder.layer.") || k.starts_with("encoder.layer.") ||
          contains(k, "embeddings.position_embeddings");
    timm |= k.starts_with("blocks.") || k.starts_with("patch_embed.") || k == "cls_token" || k == "pos_embed";
  }
  if (tv + hf + timm == 1) return tv ? WeightFormat::torchvision : hf ? WeightFormat::hf : WeightFormat::timm;
  if (tv + hf + timm > 1)
    fail("convert: the weights mix layouts (", tv ? "torchvision " : "", hf ? "hf " : "", timm ? "timm " : "",
         "keys); force one with --format; first keys: ", first_keys(sd, 6));
  fail("convert: cannot tell the layout of the weights (timm, hf or torchvision) from their keys; first keys: ",
       first_keys(sd, 6));
}

TensorList to_attn_names(const TensorList& sd, WeightFormat f) {
  const TensorList s = strip_module_prefix(sd);
  switch (f) {
    case WeightFormat::timm: return map_timm(s);
    case WeightFormat::hf: return map_hf(s);
    case WeightFormat::torchvision: return map_torchvision(s);
  }
  return s;
}

ForeignVit load_foreign_vit(const TensorList& sd, const ForeignVitOptions& o) {
  ForeignVit r;
  r.format = o.format ? *o.format : detect_weight_format(sd);
  const char* layout = weight_format_name(r.format);
  TensorList w = to_attn_names(sd, r.format);

  // The model: registry defaults, the HF config, the overrides, the image size.
  const models::ModelEntry& entry = models::model_entry(o.model);
  nlohmann::json cfg = entry.defaults;
  if (!o.hf_config.is_null()) {
    const bool distilled = find(w, "dist_token") != nullptr;
    const nlohmann::json hf = models::vit_config_to_json(vit_config_from_hf(o.hf_config, distilled));
    for (const auto& [k, v] : hf.items())
      if (cfg.contains(k)) cfg[k] = v;
  }
  ATTN_CHECK(o.overrides.is_object(), "convert: expected the model overrides as a JSON object, got ",
             o.overrides.dump());
  for (const auto& [k, v] : o.overrides.items()) cfg[k] = v;
  if (o.image_size > 0) cfg["image_size"] = o.image_size;
  std::shared_ptr<models::ImageClassifier> base;
  {
    // A strict load overwrites every parameter: skip drawing the initial weights (seconds for ViT-B).
    std::optional<nn::init::SkipRandomInit> skip;
    if (o.strict) skip.emplace();
    base = models::create_model(o.model, cfg);
  }
  r.model = std::dynamic_pointer_cast<models::VisionTransformer>(base);
  ATTN_CHECK(r.model, "convert: model '", o.model, "' is not a ViT / DeiT (VisionTransformer)");
  models::VisionTransformer& m = *r.model;
  const io::TensorList mine = m.state_dict();

  // Fix-ups that need the model.
  TensorList fixed;
  for (auto& [k, v] : w) {
    const Tensor* target = find(mine, k);
    if (k == "patch_embed.proj.weight" && target && v.defined() && v.dim() == 2 && target->dim() == 4 &&
        v.numel() == target->numel()) {
      fixed.emplace_back(k, v.reshape(target->shape()));   // timm's old linear patch embedding
      continue;
    }
    if (r.format == WeightFormat::timm && k.starts_with("pre_logits.") && m.cfg().representation_size == 0)
      continue;   // timm drops the representation layer the model does not have
    if (k == "pos_embed" && target && v.defined() && v.dim() == 3 && target->dim() == 3 && v.shape() != target->shape() &&
        v.size(0) == 1 && v.size(2) == target->size(2)) {
      const int64_t prefix = m.num_prefix_tokens(), n_old = v.size(1) - prefix;
      const auto g_old = int64_t(std::llround(std::sqrt(double(std::max<int64_t>(n_old, 0)))));
      if (n_old > 0 && g_old * g_old == n_old) {
        NoGradGuard ng;
        fixed.emplace_back(k, resample_pos_embed(v.to(DType::f32), {g_old, g_old}, {m.grid(), m.grid()}, prefix));
        r.pos_embed_resampled = true;
        continue;
      }
    }
    fixed.emplace_back(k, v);
  }

  std::string why = m.state_dict_mismatch(fixed, o.strict, 0);
  if (!why.empty()) {
    // Another architecture altogether (most keys off): name the first mismatches only.
    size_t off = 0;
    for (const auto& [k, t] : mine) {
      const Tensor* g = find(fixed, k);
      off += (!g || !g->defined() || g->shape() != t.shape());
    }
    const bool other = 2 * off > mine.size();
    if (other) why = m.state_dict_mismatch(fixed, o.strict, 4);
    const models::VitConfig& c = m.cfg();
    fail("convert: the weights (layout: ", layout, ") do not match model '", o.model, "' (dim ", c.dim, ", depth ",
         c.depth, ", heads ", c.heads, ", image ", c.image_size, ", patch ", c.patch_size, ", ", c.num_classes,
         " classes", c.distilled ? ", distilled" : "", ")", other ? ", which looks like another architecture" : "",
         ": ", why);
  }
  m.load_state_dict(fixed, o.strict);
  return r;
}

}  // namespace attn::io

// Layout detection, dispatch to the per-layout maps, and load_foreign_vit (model construction,
// position-embedding resampling, strict load with one error naming the layout).
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "attn/autograd/grad_mode.h"
#include "attn/core/error.h"
#include "attn/core/memory.h"
#include "attn/models/name_maps.h"
#include "attn/nn/pos_embed.h"
#include "attn/nn/init.h"
#include "attn/nn/linear.h"

namespace attn::models {

namespace {

bool contains(const std::string& s, const std::string& p) { return s.find(p) != std::string::npos; }

std::string first_keys(const io::TensorList& sd, size_t n) {
  std::string s;
  for (size_t i = 0; i < sd.size() && i < n; ++i) s += (i ? ", " : "") + sd[i].first;
  if (sd.size() > n) s += ", ... (" + std::to_string(sd.size() - n) + " more)";
  return s.empty() ? "(none)" : s;
}

const Tensor* find(const io::TensorList& sd, const std::string& k) {
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
  fail("foreign weights: unknown weight format '", s, "' (known: timm, hf, torchvision)");
}

io::TensorList strip_module_prefix(const io::TensorList& sd) {
  io::TensorList out;
  out.reserve(sd.size());
  for (const auto& [k, v] : sd) out.emplace_back(k.starts_with("module.") ? k.substr(7) : k, v);
  return out;
}

std::vector<std::pair<std::string, std::string>> alias_pairs(const io::Metadata& metadata,
                                                             const std::function<bool(const std::string&)>& has) {
  std::vector<std::pair<std::string, std::string>> out;
  auto it = metadata.find("aliases");
  if (it == metadata.end()) return out;
  nlohmann::json a;
  try {
    a = nlohmann::json::parse(it->second);
  } catch (const std::exception&) {
    fail("foreign weights: __metadata__ 'aliases' is not JSON: ", it->second);
  }
  ATTN_CHECK(a.is_object(), "foreign weights: __metadata__ 'aliases' must map dropped keys to kept keys, got ",
             a.dump());
  for (const auto& [dup, kept] : a.items()) {
    ATTN_CHECK(kept.is_string(), "foreign weights: alias '", dup, "' must name a kept key, got ", kept.dump());
    ATTN_CHECK(has(kept.get<std::string>()), "foreign weights: alias '", dup, "' names '", kept.get<std::string>(),
               "', which is not in the file");
    out.emplace_back(dup, kept.get<std::string>());
  }
  return out;
}

io::TensorList with_aliases(const io::SafetensorsFile& f) {
  io::TensorList out = f.tensors;
  for (const auto& [dup, kept] : alias_pairs(f.metadata, [&](const std::string& k) { return f.find(k) != nullptr; }))
    out.emplace_back(dup, *f.find(kept));
  return out;
}

WeightFormat detect_weight_format(const io::SafetensorsReader& file) {
  io::TensorList keys;   // names only: detection never looks at the values
  for (const io::SafetensorsEntry& e : file.entries()) keys.emplace_back(e.name, Tensor());
  for (const auto& [dup, kept] : alias_pairs(file.metadata(), [&](const std::string& k) { return file.find(k) != nullptr; }))
    keys.emplace_back(dup, Tensor());
  return detect_weight_format(keys);
}

WeightFormat detect_weight_format(const io::TensorList& sd_in) {
  const io::TensorList sd = strip_module_prefix(sd_in);
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
    fail("foreign weights: the weights mix layouts (", tv ? "torchvision " : "", hf ? "hf " : "", timm ? "timm " : "",
         "keys); force one with --format; first keys: ", first_keys(sd, 6));
  fail("foreign weights: cannot tell the layout of the weights (timm, hf or torchvision) from their keys; first keys: ",
       first_keys(sd, 6));
}

io::TensorList to_attn_names(const io::TensorList& sd, WeightFormat f) {
  const io::TensorList s = strip_module_prefix(sd);
  switch (f) {
    case WeightFormat::timm: return map_timm(s);
    case WeightFormat::hf: return map_hf(s);
    case WeightFormat::torchvision: return map_torchvision(s);
  }
  return s;
}

namespace {

// The model load_foreign_vit builds: registry defaults, the HF config, the overrides, the image size;
// its Linear weights in o.linear_dtype. `w`: the weights under attn's names (their keys only).
std::shared_ptr<VisionTransformer> build_model(const io::TensorList& w, const ForeignVitOptions& o) {
  const ModelEntry& entry = model_entry(o.model);
  nlohmann::json cfg = entry.defaults;
  if (!o.hf_config.is_null()) {
    const bool distilled = find(w, "dist_token") != nullptr;
    const nlohmann::json hf = vit_config_to_json(vit_config_from_hf(o.hf_config, distilled));
    for (const auto& [k, v] : hf.items())
      if (cfg.contains(k)) cfg[k] = v;
  }
  ATTN_CHECK(o.overrides.is_object(), "foreign weights: expected the model overrides as a JSON object, got ",
             o.overrides.dump());
  for (const auto& [k, v] : o.overrides.items()) cfg[k] = v;
  if (o.image_size > 0) cfg["image_size"] = o.image_size;
  ATTN_CHECK(o.linear_dtype == DType::f32 || o.linear_dtype == DType::bf16,
             "foreign weights: expected the Linear weights' dtype f32 or bf16, got ", dtype_name(o.linear_dtype));
  std::shared_ptr<ImageClassifier> base;
  {
    // A strict load overwrites every parameter: skip drawing the initial weights (seconds for ViT-B).
    std::optional<nn::init::SkipRandomInit> skip;
    if (o.strict) skip.emplace(nn::init::SkipRandomInit::Fill::none);
    base = create_model(o.model, cfg);
  }
  auto m = std::dynamic_pointer_cast<VisionTransformer>(base);
  ATTN_CHECK(m, "foreign weights: model '", o.model, "' is not a ViT / DeiT (VisionTransformer)");
  // Before anything is copied: the copies then convert f32 -> bf16 one tensor at a time.
  if (o.linear_dtype == DType::bf16) nn::make_linear_weights_bf16(*m);
  return m;
}

// The fix-ups that need the model: timm's old linear patch embedding reshaped to the conv, timm's
// representation layer dropped when the model has none, pos_embed resampled to the model's grid.
// Appends (k, v) as loaded to `fixed` (or nothing, for a dropped key).
void fix_up(const std::string& k, const Tensor& v, const io::TensorList& mine, const VisionTransformer& m,
            const ForeignVitOptions& o, ForeignVit& r, io::TensorList& fixed) {
  const Tensor* target = find(mine, k);
  if (k == "patch_embed.proj.weight" && target && v.defined() && v.dim() == 2 && target->dim() == 4 &&
      v.numel() == target->numel()) {
    fixed.emplace_back(k, v.reshape(target->shape()));   // timm's old linear patch embedding
    return;
  }
  if (r.format == WeightFormat::timm && k.starts_with("pre_logits.") && m.cfg().representation_size == 0)
    return;   // timm drops the representation layer the model does not have
  if (k == "pos_embed" && target && v.defined() && v.dim() == 3 && target->dim() == 3 && v.shape() != target->shape() &&
      v.size(0) == 1 && v.size(2) == target->size(2)) {
    const int64_t prefix = m.num_prefix_tokens(), n_old = v.size(1) - prefix;
    const auto g_old = int64_t(std::llround(std::sqrt(double(std::max<int64_t>(n_old, 0)))));
    if (n_old > 0 && g_old * g_old == n_old) {
      NoGradGuard ng;
      fixed.emplace_back(k, nn::resample_pos_embed(v.to(DType::f32), {g_old, g_old}, {m.grid(), m.grid()}, prefix,
                                                      o.pos_embed_antialias));
      r.pos_embed_resampled = true;
      return;
    }
  }
  fixed.emplace_back(k, v);
}

// The strict report as one error naming the layout and the model ("" from shape_mismatch: nothing).
void check_match(const VisionTransformer& m, const nn::Module::ShapeList& given, const io::TensorList& mine,
                 const ForeignVit& r, const ForeignVitOptions& o) {
  std::string why = m.shape_mismatch(given, o.strict, 0);
  if (why.empty()) return;
  // Another architecture altogether (most keys off): name the first mismatches only.
  std::map<std::string, const std::optional<Shape>*> g;
  for (const auto& [k, s] : given) g.emplace(k, &s);
  size_t off = 0;
  for (const auto& [k, t] : mine) {
    auto it = g.find(k);
    off += (it == g.end() || !it->second->has_value() || **it->second != t.shape());
  }
  const bool other = 2 * off > mine.size();
  if (other) why = m.shape_mismatch(given, o.strict, 4);
  const VitConfig& c = m.cfg();
  fail("foreign weights: the weights (layout: ", weight_format_name(r.format), ") do not match model '", o.model,
       "' (dim ", c.dim, ", depth ", c.depth, ", heads ", c.heads, ", image ", c.image_size, ", patch ", c.patch_size,
       ", ", c.num_classes, " classes", c.distilled ? ", distilled" : "", ")",
       other ? ", which looks like another architecture" : "", ": ", why);
}

nn::Module::ShapeList shapes_of(const io::TensorList& sd) {
  nn::Module::ShapeList out;
  out.reserve(sd.size());
  for (const auto& [k, v] : sd) out.emplace_back(k, v.defined() ? std::optional<Shape>(v.shape()) : std::nullopt);
  return out;
}

// The group of a file key in the streamed load: up to its first component that ends in digits
// ("blocks.3", "vit.encoder.layer.3", "encoder.layers.encoder_layer_3"); "" outside any layer.
std::string layer_group(const std::string& key) {
  size_t start = 0;
  while (start <= key.size()) {
    size_t dot = key.find('.', start);
    if (dot == std::string::npos) return "";   // the last component is the tensor's own name
    if (dot > start && std::isdigit(static_cast<unsigned char>(key[dot - 1]))) return key.substr(0, dot);
    start = dot + 1;
  }
  return "";
}

}  // namespace

ForeignVit load_foreign_vit(const io::TensorList& sd, const ForeignVitOptions& o) {
  ForeignVit r;
  r.format = o.format ? *o.format : detect_weight_format(sd);
  io::TensorList w = to_attn_names(sd, r.format);
  r.model = build_model(w, o);
  VisionTransformer& m = *r.model;
  const io::TensorList mine = m.state_dict();
  io::TensorList fixed;
  for (auto& [k, v] : w) fix_up(k, v, mine, m, o, r, fixed);
  check_match(m, shapes_of(fixed), mine, r, o);
  m.load_state_dict(fixed, {.strict = o.strict});
  return r;
}

ForeignVit load_foreign_vit(const io::SafetensorsReader& file, const ForeignVitOptions& o) {
  // Every source key (aliases too) with its file entry.
  std::vector<std::pair<std::string, size_t>> src;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < file.entries().size(); ++i) {
    src.emplace_back(file.entries()[i].name, i);
    index.emplace(file.entries()[i].name, i);
  }
  for (const auto& [dup, kept] :
       alias_pairs(file.metadata(), [&](const std::string& k) { return index.count(k) > 0; }))
    src.emplace_back(dup, index.at(kept));

  // The keys alone (empty tensors) decide the layout and the model.
  ForeignVit r;
  {
    io::TensorList keys;
    for (const auto& [k, i] : src) keys.emplace_back(k, Tensor::empty({0}));
    r.format = o.format ? *o.format : detect_weight_format(keys);
    r.model = build_model(to_attn_names(keys, r.format), o);
  }
  VisionTransformer& m = *r.model;
  const io::TensorList mine = m.state_dict();
  std::map<std::string, Tensor> targets;
  for (const auto& [k, t] : mine) targets.emplace(k, t);

  // The groups, in file order.
  std::vector<std::string> order;
  std::map<std::string, std::vector<size_t>> groups;   // group -> positions in src
  for (size_t j = 0; j < src.size(); ++j) {
    const std::string g = layer_group(src[j].first);
    auto [it, fresh] = groups.try_emplace(g);
    if (fresh) order.push_back(g);
    it->second.push_back(j);
  }
  nn::Module::ShapeList given;
  std::set<std::string> copied;
  for (const std::string& g : order) {
    io::TensorList fixed;
    {
      io::TensorList part;
      std::map<size_t, Tensor> read;   // an alias shares its kept key's tensor, as with_aliases
      for (size_t j : groups[g]) {
        auto it = read.find(src[j].second);
        if (it == read.end()) it = read.emplace(src[j].second, file.read(src[j].second)).first;
        part.emplace_back(src[j].first, it->second);
      }
      read.clear();
      io::TensorList w = to_attn_names(part, r.format);
      part.clear();
      for (auto& [k, v] : w) fix_up(k, v, mine, m, o, r, fixed);
    }
    NoGradGuard ng;
    for (auto& [k, v] : fixed) {
      given.emplace_back(k, v.defined() ? std::optional<Shape>(v.shape()) : std::nullopt);
      auto t = targets.find(k);
      // The first of a repeated key is the one loaded (as load_state_dict); a mismatch is reported below.
      if (t != targets.end() && v.defined() && v.shape() == t->second.shape() && copied.insert(k).second)
        t->second.copy_(v);
      v = Tensor();
    }
    fixed.clear();
    // Hand the group's freed source tensors back now: freed blocks stay cached for reuse and the
    // heap keeps freed memory resident (src/core/memory.cpp, src/core/tensor.cpp) until released.
    release_cached_memory();
  }
  check_match(m, given, mine, r, o);
  return r;
}

}  // namespace attn::models

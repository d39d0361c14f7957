// Swin weights: torchvision's keys are attn's (include/attn/models/swin.h), so that load is the model's
// own strict, streamed load_state_dict with a message naming the model; timm's and Hugging Face's are
// renamed first (swin_foreign.cpp).
#include "attn/core/error.h"
#include "attn/models/name_maps.h"
#include "attn/nn/init.h"
#include "attn/nn/linear.h"

namespace attn::models {

namespace {

[[noreturn]] void fail_mismatch(const std::string& path, const ForeignSwinOptions& o, const SwinTransformer& m,
                                const std::string& why) {
  const SwinConfig& c = m.cfg();
  fail("foreign weights: the weights '", path, "' (layout: ", weight_format_name(o.format), ") do not match model '",
       o.model, "' (Swin V", c.version, ", embed_dim ", c.embed_dim, ", depths ", nlohmann::json(c.depths).dump(),
       ", window ", c.window_size, ", ", c.num_classes, " classes): ", why);
}

}  // namespace

std::shared_ptr<SwinTransformer> load_foreign_swin(const io::SafetensorsReader& file, const ForeignSwinOptions& o) {
  ATTN_CHECK(o.overrides.is_object(), "foreign weights: expected the model overrides as a JSON object, got ",
             o.overrides.dump());
  ATTN_CHECK(o.linear_dtype == DType::f32 || o.linear_dtype == DType::bf16,
             "foreign weights: expected the Linear weights' dtype f32 or bf16, got ", dtype_name(o.linear_dtype));
  nlohmann::json cfg = nlohmann::json::object();
  if (o.hf_config.is_object()) cfg = swin_config_to_json(swin_config_from_hf(o.hf_config));
  cfg["convention"] = weight_format_name(o.format);   // the source's input-size rules, unless overridden
  for (const auto& [k, v] : o.overrides.items()) cfg[k] = v;
  if (o.image_size > 0) cfg["image_size"] = o.image_size;
  std::shared_ptr<ImageClassifier> base;
  {
    nn::init::SkipRandomInit skip(nn::init::SkipRandomInit::Fill::none);   // the strict load overwrites all
    base = create_model(o.model, cfg);
  }
  auto m = std::dynamic_pointer_cast<SwinTransformer>(base);
  ATTN_CHECK(m, "foreign weights: model '", o.model, "' is not a Swin Transformer");
  if (o.linear_dtype == DType::bf16) nn::make_linear_weights_bf16(*m);
  if (o.format != WeightFormat::torchvision) {
    SwinSourceTensors src = swin_tensors_from(file, *m, o.format);
    std::string why;
    auto list = [&why](const char* what, const std::vector<std::string>& keys) {
      if (keys.empty()) return;
      why += std::string(why.empty() ? "" : "; ") + what + ": ";
      for (size_t i = 0; i < keys.size(); ++i) why += (i ? ", " : "") + keys[i];
    };
    list("missing", src.missing);
    list("unexpected", src.unexpected);
    list("mis-shaped", src.misshaped);
    if (!why.empty()) fail_mismatch(file.path(), o, *m, why);
    m->load_state_dict(std::move(src.tensors), {.strict = true});
    return m;
  }
  nn::Module::ShapeList shapes;
  for (const io::SafetensorsEntry& e : file.entries()) shapes.emplace_back(e.name, e.shape);
  std::string why = m->shape_mismatch(shapes, /*strict=*/true, 0);
  if (!why.empty()) {
    size_t matched = 0;
    const io::TensorList mine = m->state_dict();
    for (const auto& [k, t] : mine)
      for (const auto& [name, shape] : shapes)
        if (name == k && shape && *shape == t.shape()) ++matched;
    const bool other = 2 * matched < mine.size();
    if (other) why = m->shape_mismatch(shapes, true, 4);
    fail_mismatch(file.path(), o, *m, (other ? "which looks like another architecture: " : "") + why);
  }
  m->load_state_dict(file, {.strict = true});
  return m;
}

}  // namespace attn::models

// torchvision's SwinTransformer weights: its keys are attn's (include/attn/models/swin.h), so the load
// is the model's own strict, streamed load_state_dict with a message naming the model.
#include "attn/core/error.h"
#include "attn/models/name_maps.h"
#include "attn/nn/init.h"
#include "attn/nn/linear.h"

namespace attn::models {

std::shared_ptr<SwinTransformer> load_foreign_swin(const io::SafetensorsReader& file, const ForeignSwinOptions& o) {
  ATTN_CHECK(o.format == WeightFormat::torchvision, "foreign weights: Swin weights are read in torchvision's layout "
             "only, got layout ", weight_format_name(o.format));
  ATTN_CHECK(o.overrides.is_object(), "foreign weights: expected the model overrides as a JSON object, got ",
             o.overrides.dump());
  ATTN_CHECK(o.linear_dtype == DType::f32 || o.linear_dtype == DType::bf16,
             "foreign weights: expected the Linear weights' dtype f32 or bf16, got ", dtype_name(o.linear_dtype));
  nlohmann::json cfg = o.overrides;
  if (o.image_size > 0) cfg["image_size"] = o.image_size;
  std::shared_ptr<ImageClassifier> base;
  {
    nn::init::SkipRandomInit skip(nn::init::SkipRandomInit::Fill::none);   // the strict load overwrites all
    base = create_model(o.model, cfg);
  }
  auto m = std::dynamic_pointer_cast<SwinTransformer>(base);
  ATTN_CHECK(m, "foreign weights: model '", o.model, "' is not a Swin Transformer");
  if (o.linear_dtype == DType::bf16) nn::make_linear_weights_bf16(*m);
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
    const SwinConfig& c = m->cfg();
    fail("foreign weights: the weights '", file.path(), "' (layout: torchvision) do not match model '", o.model,
         "' (Swin V", c.version, ", embed_dim ", c.embed_dim, ", depths ", nlohmann::json(c.depths).dump(), ", window ",
         c.window_size, ", ", c.num_classes,
         " classes)", other ? ", which looks like another architecture" : "", ": ", why);
  }
  m->load_state_dict(file, {.strict = true});
  return m;
}

}  // namespace attn::models

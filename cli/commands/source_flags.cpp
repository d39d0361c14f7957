// The source flags of the inference commands -> models::PretrainedSource; see source_flags.h.
#include "source_flags.h"

#include <sstream>

#include "attn/core/error.h"

namespace attn::cli {

namespace {

std::vector<float> parse_floats(const std::string& s, const char* flag, const char* cmd) {
  std::vector<float> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const float x = std::strtof(item.c_str(), &end);
    ATTN_CHECK(!item.empty() && end && *end == '\0', cmd, ": expected ", flag,
               " as comma-separated numbers (e.g. 0.5,0.5,0.5), got '", s, "'");
    v.push_back(x);
  }
  ATTN_CHECK(!v.empty(), cmd, ": expected ", flag, " values, got '", s, "'");
  return v;
}

std::string arguments(size_t n) { return std::to_string(n) + (n == 1 ? " argument" : " arguments"); }

}  // namespace

bool SourceFlags::preprocess_given() const {
  return resize != 0 || crop != 0 || crop_pct != 0 || !interpolation.empty() || !mean.empty() || !std.empty();
}

void add_source_flags(CLI::App* c, SourceFlags& f, const char* dtype_help) {
  c->add_option("--weights", f.weights, "foreign ViT/DeiT weights (.safetensors: timm, hf or torchvision layout)");
  c->add_option("--model", f.model, "registry name of the foreign weights' model (e.g. vit_base_patch16_224)");
  c->add_option("--format", f.format, "auto | timm | hf | torchvision (layout of --weights)")->capture_default_str();
  c->add_option("--config", f.config, "Hugging Face config.json (default: config.json beside hf weights)");
  c->add_option("--model-config", f.model_config, "JSON object of config overrides for --model, as attn convert");
  c->add_option("--image-size", f.image_size, "model image size for --weights (the position embedding is resampled)");
  c->add_flag("--pos-embed-antialias", f.pos_embed_antialias,
              "with --image-size: resample the position embedding as timm does (antialiased bicubic), not as DeiT");
  if (dtype_help) c->add_option("--dtype", f.dtype, dtype_help)->capture_default_str();
  c->add_flag("--ema", f.ema, "an attn checkpoint's EMA weights (kept by a run trained with --ema-decay), not its "
              "weights");
  c->add_option("--resize", f.resize, "resize the shorter side to N (default: the weights' preset)");
  c->add_option("--crop", f.crop, "center crop size (must equal the model's image size)");
  c->add_option("--crop-pct", f.crop_pct, "crop fraction: resize = floor(crop / crop_pct)");
  c->add_option("--interpolation", f.interpolation, "bilinear | bicubic (PIL's antialiased filters)");
  c->add_option("--mean", f.mean, "normalisation mean, comma-separated (e.g. 0.485,0.456,0.406)");
  c->add_option("--std", f.std, "normalisation std, comma-separated");
}

models::PretrainedSource SourceFlags::take_source(std::vector<std::string>& args, const Positionals& p,
                                                  const char* cmd) const {
  models::PretrainedSource s;
  if (foreign()) {
    ATTN_CHECK(!model.empty(), cmd, ": --weights needs --model NAME (e.g. vit_base_patch16_224)");
    if (p.max_inputs == 0 && !args.empty())
      fail(cmd, ": give either an attn checkpoint or --weights, not both (got '", args.front(), "' and --weights '",
           weights, "')");
    ATTN_CHECK(args.size() >= p.min_inputs && args.size() <= p.max_inputs, cmd, ": expected ", p.weights_usage,
               " with --weights, got ", arguments(args.size()));
    ATTN_CHECK(!ema, cmd, ": --ema is for attn checkpoints (their EMA weights), not foreign --weights");
    s = models::PretrainedSource::foreign(weights, model);
    s.format = format;
    s.hf_config = config;
    if (!model_config.empty()) {
      try {
        s.model_config = nlohmann::json::parse(model_config);
      } catch (const std::exception& e) {
        fail(cmd, ": --model-config is not valid JSON: ", e.what());
      }
    }
    s.image_size = image_size;
    s.pos_embed_antialias = pos_embed_antialias;
  } else {
    ATTN_CHECK(model.empty() && format == "auto" && config.empty() && model_config.empty() && image_size == 0 &&
                   !pos_embed_antialias,
               cmd, ": --model, --format, --config, --model-config, --image-size and --pos-embed-antialias go with "
               "--weights; an attn checkpoint describes its own model");
    ATTN_CHECK(!args.empty() && args.size() - 1 >= p.min_inputs && args.size() - 1 <= p.max_inputs, cmd,
               ": expected ", p.usage, ", got ", arguments(args.size()));
    s = models::PretrainedSource::checkpoint(args.front());
    if (ema) s.weights = io::CheckpointWeights::ema;
    args.erase(args.begin());
  }
  ATTN_CHECK(dtype == "f32" || dtype == "bf16" || dtype == "int8", cmd, ": expected --dtype f32, bf16 or int8, got '",
             dtype, "'");
  s.linear_dtype = dtype == "bf16" ? DType::bf16 : dtype == "int8" ? DType::i8 : DType::f32;
  if (resize) s.preprocess.resize_size = resize;
  if (crop) s.preprocess.crop_size = crop;
  if (crop_pct) s.preprocess.crop_pct = crop_pct;
  if (!interpolation.empty()) s.preprocess.interpolation = interpolation;
  if (!mean.empty()) s.preprocess.mean = parse_floats(mean, "--mean", cmd);
  if (!std.empty()) s.preprocess.std = parse_floats(std, "--std", cmd);
  return s;
}

}  // namespace attn::cli

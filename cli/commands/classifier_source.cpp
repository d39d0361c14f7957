#include "classifier_source.h"

#include "attn/nn/linear.h"

#include <fstream>
#include <sstream>

#include "attn/attn.h"
#include "attn/io/checkpoint.h"
#include "attn/io/name_maps.h"
#include "attn/io/safetensors.h"
#include "attn/train/tasks/image_classification.h"

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

nlohmann::json read_json_file(const std::string& path, const char* cmd) {
  std::ifstream in(path);
  ATTN_CHECK(in.good(), cmd, ": cannot open config '", path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const std::exception& e) {
    fail(cmd, ": config '", path, "' is not valid JSON: ", e.what());
  }
}

// id2label ({"0": "tench, Tinca tinca", ...}) as a list of num_classes names, or empty when it does not
// name every class or only has transformers' placeholders (LABEL_0, ...).
std::vector<std::string> names_from_id2label(const nlohmann::json& j, int64_t num_classes) {
  if (!j.is_object() || int64_t(j.size()) != num_classes) return {};
  std::vector<std::string> names(static_cast<size_t>(num_classes));
  bool placeholder = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    char* end = nullptr;
    const long k = std::strtol(it.key().c_str(), &end, 10);
    if (!end || *end != '\0' || k < 0 || k >= num_classes || !it.value().is_string()) return {};
    names[size_t(k)] = it.value().get<std::string>();
    if (names[size_t(k)] != "LABEL_" + std::to_string(k)) placeholder = false;
  }
  return placeholder ? std::vector<std::string>{} : names;
}

}  // namespace

void ForeignFlags::check_unused(const char* cmd) const {
  ATTN_CHECK(model.empty() && format == "auto" && config.empty() && model_config.empty() && image_size == 0 &&
                 !pos_embed_antialias,
             cmd, ": --model, --format, --config, --model-config, --image-size and --pos-embed-antialias go with "
             "--weights; an attn checkpoint describes its own model");
}

void add_foreign_flags(CLI::App* c, ForeignFlags& f) {
  c->add_option("--weights", f.weights, "foreign ViT/DeiT weights (.safetensors: timm, hf or torchvision layout)");
  c->add_option("--model", f.model, "registry name of the foreign weights' model (e.g. vit_base_patch16_224)");
  c->add_option("--format", f.format, "auto | timm | hf | torchvision (layout of --weights)")->capture_default_str();
  c->add_option("--config", f.config, "Hugging Face config.json (default: config.json beside hf weights)");
  c->add_option("--model-config", f.model_config, "JSON object of config overrides for --model, as attn convert");
  c->add_option("--image-size", f.image_size, "model image size for --weights (the position embedding is resampled)");
  c->add_flag("--pos-embed-antialias", f.pos_embed_antialias,
              "with --image-size: resample the position embedding as timm does (antialiased bicubic), not as DeiT");
}

void add_preprocess_flags(CLI::App* c, PreprocessFlags& f) {
  c->add_option("--resize", f.resize, "resize the shorter side to N (default: the weights' preset)");
  c->add_option("--crop", f.crop, "center crop size (must equal the model's image size)");
  c->add_option("--crop-pct", f.crop_pct, "crop fraction: resize = floor(crop / crop_pct)");
  c->add_option("--interpolation", f.interpolation, "bilinear | bicubic (PIL's antialiased filters)");
  c->add_option("--mean", f.mean, "normalisation mean, comma-separated (e.g. 0.485,0.456,0.406)");
  c->add_option("--std", f.std, "normalisation std, comma-separated");
}

DType parse_linear_dtype(const std::string& s, const char* cmd) {
  ATTN_CHECK(s == "f32" || s == "bf16", cmd, ": expected --dtype f32 or bf16, got '", s, "'");
  return s == "bf16" ? DType::bf16 : DType::f32;
}

Classifier classifier_from_checkpoint(const std::string& ckpt, DType linear_dtype) {
  Classifier p;
  const train::CheckpointInputs in = train::checkpoint_inputs(ckpt);
  const nlohmann::json meta = io::read_checkpoint_metadata(ckpt);
  p.model = train::load_classifier(ckpt, linear_dtype);
  p.model_name = meta["config"].value("model", std::string("?"));
  std::vector<std::string> names;
  if (meta.contains("id2label")) names = names_from_id2label(meta["id2label"], in.num_classes);
  if (meta.contains("source_format") && meta["source_format"].is_string()) {
    // Converted foreign weights: their source's eval transform.
    p.source = meta["source_format"].get<std::string>();
    p.pre = data::preset_for(p.model_name, data::parse_weight_source(p.source), in.image_size);
    p.pre.channels = in.channels;
  } else {
    p.source = "attn";
    p.pre.resize_size = p.pre.crop_size = in.image_size;
    p.pre.squash = true;
    p.pre.interpolation = data::Resample::bilinear;
    p.pre.mean = in.mean;
    p.pre.std = in.std;
    p.pre.channels = in.channels;
    bool default_names = true;
    for (size_t k = 0; k < in.class_names.size(); ++k)
      if (in.class_names[k] != "class " + std::to_string(k)) default_names = false;
    if (!default_names) names = in.class_names;
  }
  if (names.empty() && in.num_classes == 1000) names = data::imagenet_class_names();
  p.class_names = names;
  nn::pack_linear_weights(*p.model);   // inference only from here on: no forward pass re-packs a weight
  return p;
}

Classifier classifier_from_foreign(const ForeignFlags& flags, DType linear_dtype, const char* cmd) {
  ATTN_CHECK(!flags.model.empty(), cmd, ": --weights needs --model NAME (e.g. vit_base_patch16_224)");
  Classifier p;
  // The header only: the tensors are streamed into the model one layer at a time (load_foreign_vit).
  const io::SafetensorsReader f(flags.weights);
  io::ForeignVitOptions opt;
  opt.linear_dtype = linear_dtype;
  opt.model = flags.model;
  if (!flags.model_config.empty()) {
    try {
      opt.overrides = nlohmann::json::parse(flags.model_config);
    } catch (const std::exception& e) {
      fail(cmd, ": --model-config is not valid JSON: ", e.what());
    }
  }
  opt.image_size = flags.image_size;
  opt.pos_embed_antialias = flags.pos_embed_antialias;
  const io::WeightFormat fmt =
      flags.format == "auto" ? io::detect_weight_format(f) : io::parse_weight_format(flags.format);
  opt.format = fmt;
  std::string cfg_path = flags.config;
  if (cfg_path.empty() && fmt == io::WeightFormat::hf) {   // as `attn convert`: config.json beside the weights
    const size_t slash = flags.weights.find_last_of('/');
    const std::string beside =
        (slash == std::string::npos ? std::string() : flags.weights.substr(0, slash + 1)) + "config.json";
    if (std::ifstream(beside).good()) cfg_path = beside;
  }
  if (!cfg_path.empty()) opt.hf_config = read_json_file(cfg_path, cmd);
  io::ForeignVit r = io::load_foreign_vit(f, opt);
  p.model = r.model;
  p.model_name = flags.model;
  p.source = io::weight_format_name(fmt);
  const models::VitConfig& c = r.model->cfg();
  p.pre = data::preset_for(flags.model, data::parse_weight_source(p.source), c.image_size);
  p.pre.channels = c.in_channels;
  if (opt.hf_config.is_object() && opt.hf_config.contains("id2label"))
    p.class_names = names_from_id2label(opt.hf_config["id2label"], c.num_classes);
  if (p.class_names.empty() && c.num_classes == 1000) p.class_names = data::imagenet_class_names();
  nn::pack_linear_weights(*p.model);   // inference only from here on: no forward pass re-packs a weight
  return p;
}

void apply_preprocess_flags(Classifier& c, const PreprocessFlags& f, const char* cmd) {
  data::PreprocessOverrides ov;
  if (f.resize) ov.resize_size = f.resize;
  if (f.crop) ov.crop_size = f.crop;
  if (f.crop_pct) ov.crop_pct = f.crop_pct;
  if (!f.interpolation.empty()) ov.interpolation = f.interpolation;
  if (!f.mean.empty()) ov.mean = parse_floats(f.mean, "--mean", cmd);
  if (!f.std.empty()) ov.std = parse_floats(f.std, "--std", cmd);
  const int64_t model_size = c.pre.crop_size;
  c.pre = data::apply_overrides(c.pre, ov);
  ATTN_CHECK(c.pre.crop_size == model_size, cmd, ": the crop (", c.pre.crop_size,
             ") must equal the model's image size (", model_size, ")");
}

}  // namespace attn::cli

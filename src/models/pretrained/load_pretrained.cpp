// load_pretrained: an attn checkpoint or foreign ViT / DeiT / Swin weights -> model, preprocessing, class
// names; see attn/models/pretrained.h.
#include "attn/models/pretrained.h"

#include <fstream>
#include <set>
#include <string_view>
#include <sstream>

#include "attn/core/error.h"
#include "attn/core/json_config.h"
#include "attn/data/dataset.h"
#include "attn/data/fashion_mnist.h"
#include "attn/io/checkpoint.h"
#include "attn/models/bert.h"
#include "attn/models/bert_foreign.h"
#include "attn/models/name_maps.h"
#include "attn/nn/init.h"
#include "attn/nn/linear.h"

namespace attn::models {

namespace {

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  ATTN_CHECK(in.good(), "foreign weights: cannot open config '", path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const std::exception& e) {
    fail("foreign weights: config '", path, "' is not valid JSON: ", e.what());
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

// A checkpoint written by `attn quantize` holds some Linears in int8: "<name>.weight" I8 beside
// "<name>.weight_scale". Those Linears of `m` are made int8 before the load (which then fills them);
// every other dtype asked for is an error, as int8 weights have no f32 or bf16 values to give.
template <class Key>
void prepare_int8_linears(nn::Module& m, const io::SafetensorsReader& file, const Key& key, DType linear_dtype) {
  std::set<std::string> int8;
  for (const io::SafetensorsEntry& e : file.entries()) {
    const std::optional<std::string> k = key(e.name);
    constexpr std::string_view kScale = ".weight_scale";
    if (k && k->ends_with(kScale)) int8.insert(k->substr(0, k->size() - kScale.size()));
  }
  if (int8.empty()) return;
  ATTN_CHECK(linear_dtype == DType::f32 || linear_dtype == DType::i8, "load: checkpoint '", file.path(), "' holds "
             "int8 Linear weights (written by attn quantize): load it as int8, not ", dtype_name(linear_dtype));
  nn::make_linear_weights_int8(m, [&](const std::string& name) { return int8.count(name) > 0; });
}

// After the load: int8 asked for (and not in the file already) quantizes the f32 weights now.
void quantize_if_asked(nn::Module& m, DType linear_dtype) {
  if (linear_dtype == DType::i8) quantize_model_int8(m);
}

// The model of an open checkpoint, with the weights asked for (see load_classifier_checkpoint).
std::shared_ptr<ImageClassifier> load_model(const io::SafetensorsReader& file, const nlohmann::json& meta,
                                            DType linear_dtype, io::CheckpointWeights which) {
  ATTN_CHECK(linear_dtype == DType::f32 || linear_dtype == DType::bf16 || linear_dtype == DType::i8, "load: expected "
             "the Linear weights' dtype f32, bf16 or i8, got ", dtype_name(linear_dtype));
  ConfigReader r(meta, "checkpoint '" + file.path() + "'");
  ConfigReader cfg = r.object("config");
  const std::string name = cfg.get<std::string>("model");
  std::shared_ptr<ImageClassifier> model;
  try {
    // The strict load below overwrites every parameter.
    nn::init::SkipRandomInit skip(nn::init::SkipRandomInit::Fill::none);
    model = create_model(name, cfg.json());
  } catch (const Error& e) {
    fail("checkpoint '", file.path(), "': ", e.what());
  }
  // Before the copy, so that it converts f32 -> bf16 one tensor at a time.
  if (linear_dtype == DType::bf16) nn::make_linear_weights_bf16(*model);
  ATTN_CHECK(which == io::CheckpointWeights::model || io::checkpoint_has_ema(file), "load: checkpoint '",
             file.path(), "' has no EMA weights (its run was trained without --ema-decay)");
  const auto key = [which](const std::string& k) { return io::checkpoint_weight_key(k, which); };
  prepare_int8_linears(*model, file, key, linear_dtype);
  nn::Module::ShapeList shapes;
  for (const io::SafetensorsEntry& e : file.entries())
    if (auto k = key(e.name)) shapes.emplace_back(std::move(*k), e.shape);
  const std::string why = model->shape_mismatch(shapes, /*strict=*/true, /*max_listed=*/5);
  if (!why.empty()) fail("load_checkpoint: '", file.path(), "' is for another model: ", why);
  model->load_state_dict(file, {.strict = true, .key = key});   // checked above: cannot fail now
  quantize_if_asked(*model, linear_dtype);
  model->eval();
  return model;
}

// An attn checkpoint of a model that is no image classifier (a converted BERT): the model from its config,
// loaded strictly, its class names from the config's id2label.
Pretrained from_other_checkpoint(const io::SafetensorsReader& file, Pretrained p, const std::string& name,
                                 const PretrainedSource& s) {
  ATTN_CHECK(s.linear_dtype == DType::f32 || s.linear_dtype == DType::bf16 || s.linear_dtype == DType::i8, "load: "
             "expected the Linear weights' dtype f32, bf16 or i8, got ", dtype_name(s.linear_dtype));
  ATTN_CHECK(s.weights == io::CheckpointWeights::model || io::checkpoint_has_ema(file), "load: checkpoint '",
             file.path(), "' has no EMA weights");
  ConfigReader r(p.metadata, "checkpoint '" + file.path() + "'");
  const nlohmann::json cfg = r.object("config").json();
  try {
    nn::init::SkipRandomInit skip(nn::init::SkipRandomInit::Fill::none);
    p.module = create(name, cfg);
  } catch (const Error& e) {
    fail("checkpoint '", file.path(), "': ", e.what());
  }
  const auto key = [w = s.weights](const std::string& k) { return io::checkpoint_weight_key(k, w); };
  prepare_int8_linears(*p.module, file, key, s.linear_dtype);
  nn::Module::ShapeList shapes;
  for (const io::SafetensorsEntry& e : file.entries())
    if (auto k = key(e.name)) shapes.emplace_back(std::move(*k), e.shape);
  const std::string why = p.module->shape_mismatch(shapes, /*strict=*/true, /*max_listed=*/5);
  if (!why.empty()) fail("load_checkpoint: '", file.path(), "' is for another model: ", why);
  p.module->load_state_dict(file, {.strict = true, .key = key});
  // bf16 after the f32 load: tied weights (BERT's MLM decoder) load once, then each Linear gets its own.
  if (s.linear_dtype == DType::bf16) nn::convert_linear_weights_to_bf16(*p.module);
  quantize_if_asked(*p.module, s.linear_dtype);
  p.module->eval();
  p.model_name = name;
  p.source = r.has("source_format") ? r.get<std::string>("source_format") : "attn";
  if (cfg.contains("id2label") && cfg.contains("num_labels") && cfg["num_labels"].is_number_integer())
    p.labels = names_from_id2label(cfg["id2label"], cfg["num_labels"].get<int64_t>());
  return p;
}

Pretrained from_checkpoint(const PretrainedSource& s) {
  Pretrained p;
  const io::SafetensorsReader file = io::open_checkpoint(s.path);
  p.metadata = io::checkpoint_metadata(file);
  {
    ConfigReader r(p.metadata, "checkpoint '" + s.path + "'");
    const std::string name = r.object("config").get<std::string>("model");
    if (has_model(name) && model_entry(name).task != kImageClassification) {
      ATTN_CHECK(!s.image_classifier_only, "load_pretrained: checkpoint '", s.path, "' holds ", name, ", a ",
                 model_entry(name).task, " model, not an image classifier");
      return from_other_checkpoint(file, std::move(p), name, s);
    }
  }
  const CheckpointInputs in = checkpoint_inputs(p.metadata, s.path);
  p.model = load_model(file, p.metadata, s.linear_dtype, s.weights);
  p.module = p.model;
  p.model_name = p.metadata["config"].value("model", std::string("?"));
  if (p.metadata.contains("id2label")) p.labels = names_from_id2label(p.metadata["id2label"], in.num_classes);
  ConfigReader r(p.metadata, "checkpoint '" + s.path + "'");
  if (r.has("source_format")) {
    // Converted foreign weights: their source's eval transform.
    p.source = r.get<std::string>("source_format");
    p.preprocess = data::preset_for(p.model_name, data::parse_weight_source(p.source), in.image_size);
  } else {
    // Trained by attn: resized to the model's size and normalised as in training.
    p.source = "attn";
    p.data = in.data;
    p.preprocess.resize_size = p.preprocess.crop_size = in.image_size;
    p.preprocess.squash = true;
    p.preprocess.interpolation = data::Resample::bilinear;
    p.preprocess.mean = in.mean;
    p.preprocess.std = in.std;
    bool numbered = true;
    for (size_t k = 0; k < in.class_names.size(); ++k)
      if (in.class_names[k] != "class " + std::to_string(k)) numbered = false;
    if (!numbered) p.labels = in.class_names;
  }
  p.preprocess.channels = in.channels;
  if (p.labels.empty() && in.num_classes == 1000) p.labels = data::imagenet_class_names();
  return p;
}

// The layout of Swin weights from their keys: Hugging Face's (swin.* / swinv2.*), timm's
// (patch_embed.*) or torchvision's.
WeightFormat detect_swin_format(const io::SafetensorsReader& f) {
  for (const io::SafetensorsEntry& e : f.entries()) {
    if (e.name.starts_with("swin.") || e.name.starts_with("swinv2.")) return WeightFormat::hf;
    if (e.name.starts_with("patch_embed.")) return WeightFormat::timm;
  }
  return WeightFormat::torchvision;
}

// config.json beside the weights, as transformers keeps it ("" when there is none).
std::string config_beside(const std::string& weights) {
  const size_t slash = weights.find_last_of('/');
  const std::string beside = (slash == std::string::npos ? std::string() : weights.substr(0, slash + 1)) + "config.json";
  return std::ifstream(beside).good() ? beside : std::string();
}

// Foreign BERT weights (transformers' layout) with their config.json.
Pretrained from_foreign_bert(const PretrainedSource& s) {
  ATTN_CHECK(s.format == "auto" || s.format == "hf", "load_pretrained: BERT weights are read in transformers' "
             "layout (format hf or auto), not '", s.format, "'");
  ATTN_CHECK(s.linear_dtype == DType::f32 || s.linear_dtype == DType::bf16 || s.linear_dtype == DType::i8,
             "load_pretrained: expected the Linear weights' dtype f32, bf16 or i8, got ", dtype_name(s.linear_dtype));
  ATTN_CHECK(s.image_size == 0 && !s.pos_embed_antialias, "load_pretrained: image_size and pos_embed_antialias "
             "are for ViT weights, not BERT ('", s.model, "')");
  const io::SafetensorsReader f(s.path);
  ForeignBertOptions opt;
  opt.model = s.model;
  opt.overrides = s.model_config.is_null() ? nlohmann::json::object() : s.model_config;
  const std::string cfg_path = s.hf_config.empty() ? config_beside(s.path) : s.hf_config;
  if (!cfg_path.empty()) opt.hf_config = read_json_file(cfg_path);
  ForeignBert r = load_foreign_bert(f, opt);
  // bf16 after the f32 load (the MLM decoder is the word embeddings while loading; it then gets its own
  // bf16 copy, the embeddings staying f32).
  if (s.linear_dtype == DType::bf16) nn::convert_linear_weights_to_bf16(*r.model);
  quantize_if_asked(*r.model, s.linear_dtype);
  Pretrained p;
  p.module = r.model;
  p.model_name = s.model;
  p.source = "hf";
  p.metadata = {{"source_format", p.source}, {"source", s.path}};
  for (const auto& [k, v] : r.model->cfg().id2label) p.labels.push_back(v);
  return p;
}

// Swin weights (torchvision's, timm's or Hugging Face's layout; see load_foreign_swin).
Pretrained from_foreign_swin(const PretrainedSource& s) {
  ATTN_CHECK(!s.pos_embed_antialias, "load_pretrained: model '", s.model,
             "' is a Swin Transformer: pos_embed_antialias does not apply");
  const io::SafetensorsReader f(s.path);
  ForeignSwinOptions opt;
  opt.model = s.model;
  opt.overrides = s.model_config.is_null() ? nlohmann::json::object() : s.model_config;
  opt.image_size = s.image_size;
  opt.linear_dtype = s.linear_dtype == DType::i8 ? DType::f32 : s.linear_dtype;   // int8: quantized once loaded
  opt.format = s.format == "auto" ? detect_swin_format(f) : parse_weight_format(s.format);
  ATTN_CHECK(s.hf_config.empty() || opt.format == WeightFormat::hf, "load_pretrained: hf_config is for weights in "
             "Hugging Face's layout, got layout ", weight_format_name(opt.format));
  const std::string cfg_path =
      opt.format != WeightFormat::hf ? std::string() : !s.hf_config.empty() ? s.hf_config : config_beside(s.path);
  if (!cfg_path.empty()) opt.hf_config = read_json_file(cfg_path);
  Pretrained p;
  auto m = load_foreign_swin(f, opt);
  quantize_if_asked(*m, s.linear_dtype);
  p.model = m;
  p.module = m;
  p.model->eval();
  p.model_name = s.model;
  p.source = weight_format_name(opt.format);
  p.preprocess = data::preset_for(s.model, data::parse_weight_source(p.source), m->cfg().image_size);
  p.preprocess.channels = m->cfg().in_channels;
  p.metadata = {{"source_format", p.source}, {"source", s.path}};
  if (opt.hf_config.is_object() && opt.hf_config.contains("id2label")) {
    p.metadata["id2label"] = opt.hf_config["id2label"];
    p.labels = names_from_id2label(opt.hf_config["id2label"], m->cfg().num_classes);
  }
  if (p.labels.empty() && m->cfg().num_classes == 1000) p.labels = data::imagenet_class_names();
  return p;
}

Pretrained from_foreign(const PretrainedSource& s) {
  ATTN_CHECK(!s.model.empty(), "load_pretrained: the foreign weights '", s.path,
             "' need the registry name of their model (e.g. vit_base_patch16_224)");
  if (model_entry(s.model).task == kMaskedLM) {
    ATTN_CHECK(!s.image_classifier_only, "load_pretrained: '", s.model, "' is a ", kMaskedLM,
               " model (BERT), not an image classifier");
    return from_foreign_bert(s);
  }
  if (s.model.starts_with("swin")) return from_foreign_swin(s);
  // The header only: the tensors are streamed into the model one layer at a time (load_foreign_vit).
  const io::SafetensorsReader f(s.path);
  ForeignVitOptions opt;
  opt.linear_dtype = s.linear_dtype == DType::i8 ? DType::f32 : s.linear_dtype;   // int8: quantized once loaded
  opt.model = s.model;
  opt.overrides = s.model_config;
  opt.image_size = s.image_size;
  opt.pos_embed_antialias = s.pos_embed_antialias;
  const WeightFormat fmt = s.format == "auto" ? detect_weight_format(f) : parse_weight_format(s.format);
  opt.format = fmt;
  std::string cfg_path = s.hf_config;
  if (cfg_path.empty() && fmt == WeightFormat::hf) cfg_path = config_beside(s.path);
  if (!cfg_path.empty()) opt.hf_config = read_json_file(cfg_path);
  ForeignVit r = load_foreign_vit(f, opt);
  quantize_if_asked(*r.model, s.linear_dtype);
  Pretrained p;
  p.model = r.model;
  p.module = r.model;
  p.model->eval();
  p.model_name = s.model;
  p.source = weight_format_name(fmt);
  p.pos_embed_resampled = r.pos_embed_resampled;
  const VitConfig& c = r.model->cfg();
  p.preprocess = data::preset_for(s.model, data::parse_weight_source(p.source), c.image_size);
  p.preprocess.channels = c.in_channels;
  p.metadata = {{"source_format", p.source}, {"source", s.path}};
  if (opt.hf_config.is_object() && opt.hf_config.contains("id2label")) {
    p.metadata["id2label"] = opt.hf_config["id2label"];
    p.labels = names_from_id2label(opt.hf_config["id2label"], c.num_classes);
  }
  if (p.labels.empty() && c.num_classes == 1000) p.labels = data::imagenet_class_names();
  return p;
}

}  // namespace

int64_t quantize_model_int8(nn::Module& m, const std::vector<std::string>& keep_f32) {
  int64_t saved = nn::quantize_linear_weights_int8(m, keep_f32);
  if (auto* b = dynamic_cast<BertPreTrainedModel*>(&m)) {
    // The word embeddings (a fifth of BERT-base's weights), and with them the MLM decoder tied to them.
    const nn::Module* words = b->bert().embeddings().word_embeddings.get();
    for (const auto& [name, mod] : m.named_modules())
      if (mod.get() == words) saved += nn::quantize_embedding_int8(m, name);
  }
  return saved;
}

PretrainedSource PretrainedSource::checkpoint(const std::string& path) {
  PretrainedSource s;
  s.path = path;
  s.kind = WeightsKind::attn_checkpoint;
  return s;
}

PretrainedSource PretrainedSource::foreign(const std::string& path, const std::string& model) {
  PretrainedSource s;
  s.path = path;
  s.kind = WeightsKind::foreign;
  s.model = model;
  return s;
}

Pretrained load_pretrained(const PretrainedSource& s) {
  const bool checkpoint = s.kind == WeightsKind::attn_checkpoint ||
                          (s.kind == WeightsKind::detect && is_attn_checkpoint(s.path));
  ATTN_CHECK(checkpoint || s.weights == io::CheckpointWeights::model, "load_pretrained: '", s.path,
             "' is not an attn checkpoint: only attn checkpoints hold EMA weights");
  if (s.kind == WeightsKind::attn_checkpoint)
    ATTN_CHECK(s.model.empty() && s.format == "auto" && s.hf_config.empty() &&
                   (s.model_config.is_null() || s.model_config.empty()) && s.image_size == 0 && !s.pos_embed_antialias,
               "load_pretrained: '", s.path, "' is an attn checkpoint, which describes its own model: model, format, "
               "hf_config, model_config, image_size and pos_embed_antialias are for foreign weights");
  Pretrained p = checkpoint ? from_checkpoint(s) : from_foreign(s);
  if (!p.model) {   // text models: no image preprocessing
    const data::PreprocessOverrides& o = s.preprocess;
    ATTN_CHECK(!o.resize_size && !o.crop_size && !o.crop_pct && !o.interpolation && !o.mean && !o.std,
               "load_pretrained: ", p.model_name, " takes no image preprocessing");
    if (s.pack_linear_weights) nn::pack_linear_weights(*p.module);
    return p;
  }
  const int64_t model_size = p.preprocess.crop_size;
  p.preprocess = data::apply_overrides(p.preprocess, s.preprocess);
  ATTN_CHECK(p.preprocess.crop_size == model_size, "load_pretrained: the crop (", p.preprocess.crop_size,
             ") must equal the model's image size (", model_size, ")");
  // Inference only from here on: no forward pass re-packs a weight.
  if (s.pack_linear_weights) nn::pack_linear_weights(*p.model);
  return p;
}

std::shared_ptr<ImageClassifier> load_classifier_checkpoint(const std::string& path, DType linear_dtype,
                                                            io::CheckpointWeights weights) {
  const io::SafetensorsReader file = io::open_checkpoint(path);
  return load_model(file, io::checkpoint_metadata(file), linear_dtype, weights);
}

bool is_attn_checkpoint(const std::string& path) {
  try {
    io::open_checkpoint(path);   // the header only
    return true;
  } catch (const Error&) {
    return false;
  }
}

CheckpointInputs checkpoint_inputs(const std::string& checkpoint) {
  return checkpoint_inputs(io::read_checkpoint_metadata(checkpoint), checkpoint);
}

CheckpointInputs checkpoint_inputs(const nlohmann::json& meta, const std::string& checkpoint) {
  ConfigReader r(meta, "checkpoint '" + checkpoint + "'");
  ConfigReader cfg = r.object("config");
  CheckpointInputs in;
  in.image_size = cfg.get<int64_t>("image_size", Range::positive);
  in.channels = cfg.get<int64_t>("in_channels", Range::positive);
  in.num_classes = cfg.get<int64_t>("num_classes", Range::positive);
  ConfigReader ts = r.object_or_empty("train_state");
  in.data = ts.get_or("data", "");
  if (ts.has("mean") || ts.has("std")) {
    in.mean = ts.get<std::vector<float>>("mean");
    in.std = ts.get<std::vector<float>>("std", Range::positive);
  } else {
    std::tie(in.mean, in.std) = data::dataset_normalization(in.data);
  }
  std::vector<std::string> names;
  if (ts.has("class_names")) names = ts.get<std::vector<std::string>>("class_names");
  const auto& fm = data::FashionMnist::class_names();
  if (!names.empty() && int64_t(names.size()) == in.num_classes) {
    in.class_names = names;   // an image folder's (train --data DIR)
  } else if (in.data == "fashion-mnist" && int64_t(fm.size()) == in.num_classes) {
    in.class_names = fm;
  } else {
    for (int64_t k = 0; k < in.num_classes; ++k) in.class_names.push_back("class " + std::to_string(k));
  }
  return in;
}

}  // namespace attn::models

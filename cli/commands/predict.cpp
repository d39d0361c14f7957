// attn predict: classify PNG/JPEG images with an attn checkpoint or with foreign ViT/DeiT weights.
//
//   attn predict CKPT IMAGE... [--topk K] [--batch B] [--json]
//   attn predict --weights W.safetensors --model vit_base_patch16_224 [--format timm|hf|torchvision]
//                [--config config.json] [--model-config JSON] IMAGE... [--topk K] [--batch B] [--json]
//   preprocessing overrides: --resize N --crop N --crop-pct F --interpolation bilinear|bicubic
//                            --mean a,b,c --std a,b,c
//   --dtype bf16: every Linear weight in bf16 (attn::nn::make_linear_weights_bf16 before the weights are
//                 streamed in, converted tensor by tensor), f32 between the GEMMs
//
// Preprocessing follows the weights' source (data/preprocess.h): foreign weights (and attn checkpoints
// made from them by `attn convert`, which records "source_format") get that source's eval transform
// for the model; attn's own training checkpoints are resized to the model's image size (PIL
// bilinear) and normalised with the checkpoint's mean/std, as in training. 1000-class models print
// the ImageNet class names (a Hugging Face config's id2label wins when given). An image that cannot
// be read gets an error line naming it; the others are still classified; the exit code is then 1.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <optional>
#include <sstream>

#include "attn/attn.h"
#include "attn/data/preprocess.h"
#include "attn/io/checkpoint.h"
#include "attn/io/name_maps.h"
#include "attn/train/classifier.h"
#include "attn/train/explain.h"
#include "../commands.h"

namespace attn::cli {

namespace {

std::vector<float> parse_floats(const std::string& s, const char* flag) {
  std::vector<float> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const float x = std::strtof(item.c_str(), &end);
    ATTN_CHECK(!item.empty() && end && *end == '\0', "predict: expected ", flag,
               " as comma-separated numbers (e.g. 0.5,0.5,0.5), got '", s, "'");
    v.push_back(x);
  }
  ATTN_CHECK(!v.empty(), "predict: expected ", flag, " values, got '", s, "'");
  return v;
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  ATTN_CHECK(in.good(), "predict: cannot open config '", path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const std::exception& e) {
    fail("predict: config '", path, "' is not valid JSON: ", e.what());
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

struct Predictor {
  std::shared_ptr<models::ImageClassifier> model;
  std::string model_name, source;   // source: "attn" | "timm" | "hf" | "torchvision"
  data::Preprocess pre;
  std::vector<std::string> class_names;
};

Predictor from_checkpoint(const std::string& ckpt, DType linear_dtype) {
  Predictor p;
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
  return p;
}

Predictor from_foreign(const std::string& weights, const std::string& model, const std::string& format,
                       const std::string& config, const std::string& model_config, int64_t image_size,
                       bool pos_embed_antialias, DType linear_dtype) {
  Predictor p;
  // The header only: the tensors are streamed into the model one layer at a time (load_foreign_vit).
  const io::SafetensorsReader f(weights);
  io::ForeignVitOptions opt;
  opt.linear_dtype = linear_dtype;
  opt.model = model;
  if (!model_config.empty()) {
    try {
      opt.overrides = nlohmann::json::parse(model_config);
    } catch (const std::exception& e) {
      fail("predict: --model-config is not valid JSON: ", e.what());
    }
  }
  opt.image_size = image_size;
  opt.pos_embed_antialias = pos_embed_antialias;
  const io::WeightFormat fmt = format == "auto" ? io::detect_weight_format(f) : io::parse_weight_format(format);
  opt.format = fmt;
  std::string cfg_path = config;
  if (cfg_path.empty() && fmt == io::WeightFormat::hf) {   // as `attn convert`: config.json beside the weights
    const size_t slash = weights.find_last_of('/');
    const std::string beside =
        (slash == std::string::npos ? std::string() : weights.substr(0, slash + 1)) + "config.json";
    if (std::ifstream(beside).good()) cfg_path = beside;
  }
  if (!cfg_path.empty()) opt.hf_config = read_json_file(cfg_path);
  io::ForeignVit r = io::load_foreign_vit(f, opt);
  p.model = r.model;
  p.model_name = model;
  p.source = io::weight_format_name(fmt);
  const models::VitConfig& c = r.model->cfg();
  p.pre = data::preset_for(model, data::parse_weight_source(p.source), c.image_size);
  p.pre.channels = c.in_channels;
  if (opt.hf_config.is_object() && opt.hf_config.contains("id2label"))
    p.class_names = names_from_id2label(opt.hf_config["id2label"], c.num_classes);
  if (p.class_names.empty() && c.num_classes == 1000) p.class_names = data::imagenet_class_names();
  return p;
}

}  // namespace

void add_predict(CLI::App& app) {
  auto* c = app.add_subcommand("predict", "classify PNG/JPEG images with a checkpoint or foreign ViT/DeiT weights");
  struct Opts {
    std::vector<std::string> inputs;
    std::string weights, model, format = "auto", config, model_config, dtype = "f32";
    std::string interpolation, mean, std;
    int64_t topk = 5, batch = 1, image_size = 0, resize = 0, crop = 0;
    double crop_pct = 0;
    bool json = false, pos_embed_antialias = false;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("inputs", o->inputs, "CKPT IMAGE... (attn checkpoint), or IMAGE... with --weights")->required();
  c->add_option("--weights", o->weights, "foreign ViT/DeiT weights (.safetensors: timm, hf or torchvision layout)");
  c->add_option("--model", o->model, "registry name of the foreign weights' model (e.g. vit_base_patch16_224)");
  c->add_option("--format", o->format, "auto | timm | hf | torchvision (layout of --weights)")->capture_default_str();
  c->add_option("--config", o->config, "Hugging Face config.json (default: config.json beside hf weights)");
  c->add_option("--model-config", o->model_config, "JSON object of config overrides for --model, as attn convert");
  c->add_option("--image-size", o->image_size, "model image size for --weights (the position embedding is resampled)");
  c->add_flag("--pos-embed-antialias", o->pos_embed_antialias,
              "with --image-size: resample the position embedding as timm does (antialiased bicubic), not as DeiT");
  c->add_option("--topk", o->topk, "how many classes to print per image")->capture_default_str();
  c->add_option("--batch", o->batch, "images per forward pass")->capture_default_str();
  c->add_option("--dtype", o->dtype, "f32 | bf16 (Linear weights in bf16, f32 accumulation; see docs/design.md)")->capture_default_str();
  c->add_option("--resize", o->resize, "resize the shorter side to N (default: the weights' preset)");
  c->add_option("--crop", o->crop, "center crop size (must equal the model's image size)");
  c->add_option("--crop-pct", o->crop_pct, "crop fraction: resize = floor(crop / crop_pct)");
  c->add_option("--interpolation", o->interpolation, "bilinear | bicubic (PIL's antialiased filters)");
  c->add_option("--mean", o->mean, "normalisation mean, comma-separated (e.g. 0.485,0.456,0.406)");
  c->add_option("--std", o->std, "normalisation std, comma-separated");
  c->add_flag("--json", o->json, "print one JSON object");
  c->add_option("--threads", o->threads);
  c->callback([o] {
    apply_threads(o->threads);
    ATTN_CHECK(o->topk >= 1, "predict: expected --topk >= 1, got ", o->topk);
    ATTN_CHECK(o->batch >= 1, "predict: expected --batch >= 1, got ", o->batch);
    ATTN_CHECK(o->dtype == "f32" || o->dtype == "bf16", "predict: expected --dtype f32 or bf16, got '", o->dtype, "'");
    const DType linear_dtype = o->dtype == "bf16" ? DType::bf16 : DType::f32;
    Predictor pr;
    std::vector<std::string> images = o->inputs;
    std::string source_path;
    if (!o->weights.empty()) {
      ATTN_CHECK(!o->model.empty(), "predict: --weights needs --model NAME (e.g. vit_base_patch16_224)");
      pr = from_foreign(o->weights, o->model, o->format, o->config, o->model_config, o->image_size,
                        o->pos_embed_antialias, linear_dtype);
      source_path = o->weights;
    } else {
      ATTN_CHECK(o->model.empty() && o->format == "auto" && o->config.empty() && o->model_config.empty() &&
                     o->image_size == 0 && !o->pos_embed_antialias,
                 "predict: --model, --format, --config, --model-config, --image-size and --pos-embed-antialias go with "
                 "--weights; an attn checkpoint "
                 "describes its own model");
      ATTN_CHECK(images.size() >= 2, "predict: expected CKPT IMAGE... (or --weights W --model NAME IMAGE...), got ",
                 images.size(), " argument");
      source_path = images.front();
      images.erase(images.begin());
      pr = from_checkpoint(source_path, linear_dtype);
    }
    data::PreprocessOverrides ov;
    if (o->resize) ov.resize_size = o->resize;
    if (o->crop) ov.crop_size = o->crop;
    if (o->crop_pct) ov.crop_pct = o->crop_pct;
    if (!o->interpolation.empty()) ov.interpolation = o->interpolation;
    if (!o->mean.empty()) ov.mean = parse_floats(o->mean, "--mean");
    if (!o->std.empty()) ov.std = parse_floats(o->std, "--std");
    const int64_t model_size = pr.pre.crop_size;
    pr.pre = data::apply_overrides(pr.pre, ov);
    ATTN_CHECK(pr.pre.crop_size == model_size, "predict: the crop (", pr.pre.crop_size,
               ") must equal the model's image size (", model_size, ")");
    pr.model->eval();
    // --dtype bf16: the Linear weights were made bf16 before loading and converted as they were
    // streamed in, so the f32 source weights were never held whole; hand back what the load freed.
    release_cached_memory();

    nlohmann::json results = nlohmann::json::array();
    int64_t failed = 0;
    auto name = [&](size_t cls) {
      return cls < pr.class_names.size() ? pr.class_names[cls] : "class " + std::to_string(cls);
    };
    for (size_t first = 0; first < images.size(); first += size_t(o->batch)) {
      const size_t last = std::min(images.size(), first + size_t(o->batch));
      std::vector<Tensor> inputs;
      std::vector<std::string> errors(last - first);
      for (size_t i = first; i < last; ++i) {
        try {
          inputs.push_back(data::preprocess_file(images[i], pr.pre));
        } catch (const Error& e) {
          errors[i - first] = e.what();
        }
      }
      std::vector<double> logits;
      int64_t classes = 0;
      if (!inputs.empty()) {
        NoGradGuard ng;
        Tensor out = pr.model->forward(stack(inputs, 0));   // (n, classes)
        classes = out.size(1);
        logits = out.to_vector<double>();
      }
      size_t row = 0;
      for (size_t i = first; i < last; ++i) {
        const std::string& path = images[i];
        if (!errors[i - first].empty()) {
          ++failed;
          if (o->json)
            results.push_back({{"image", path}, {"error", errors[i - first]}});
          else {
            std::fflush(stdout);
            std::fprintf(stderr, "attn: error: %s\n", errors[i - first].c_str());
          }
          continue;
        }
        const double* l = logits.data() + row++ * size_t(classes);
        const double mx = *std::max_element(l, l + classes);
        std::vector<double> prob(static_cast<size_t>(classes));
        double z = 0;
        for (int64_t k = 0; k < classes; ++k) z += prob[size_t(k)] = std::exp(l[k] - mx);
        for (double& v : prob) v /= z;
        std::vector<size_t> order(prob.size());
        std::iota(order.begin(), order.end(), 0);
        const size_t k = std::min<size_t>(size_t(o->topk), order.size());
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return prob[a] > prob[b]; });
        if (o->json) {
          nlohmann::json top = nlohmann::json::array();
          for (size_t j = 0; j < k; ++j)
            top.push_back({{"class", order[j]}, {"name", name(order[j])}, {"probability", prob[order[j]]},
                           {"logit", l[order[j]]}});
          results.push_back({{"image", path}, {"top", top}});
        } else {
          std::printf("%s\n", path.c_str());
          for (size_t j = 0; j < k; ++j)
            std::printf("  %zu. %-24s %7.3f%%  (class %zu)\n", j + 1, name(order[j]).c_str(),
                        100.0 * prob[order[j]], order[j]);
        }
      }
      std::fflush(stdout);
    }
    if (o->json) {
      nlohmann::json j = {{o->weights.empty() ? "checkpoint" : "weights", source_path},
                          {"model", pr.model_name},
                          {"source", pr.source},
                          {"preprocess", pr.pre.describe()},
                          {"results", results}};
      std::printf("%s\n", j.dump().c_str());
    }
    std::fflush(stdout);
    ATTN_CHECK(failed == 0, "predict: ", failed, " of ", images.size(), " images could not be read");
  });
}

}  // namespace attn::cli

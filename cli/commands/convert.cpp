// attn convert IN.safetensors --model NAME [--format timm|hf|torchvision] [--config config.json]
//     [--image-size N] [--model-config JSON] --out OUT.safetensors
// Foreign ViT / DeiT weights (timm, Hugging Face or torchvision layout, e.g. written by
// tools/pth_to_safetensors.py) -> an attn checkpoint (weights + config) that `attn eval` and
// train::load_classifier open. The position embedding is resampled when the image size differs.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "attn/attn.h"
#include "attn/io/checkpoint.h"
#include "attn/io/name_maps.h"
#include "../commands.h"

namespace attn::cli {

void add_convert(CLI::App& app) {
  auto* c = app.add_subcommand("convert", "convert timm / Hugging Face / torchvision ViT weights to an attn checkpoint");
  struct Opts {
    std::string in, model, format = "auto", config, model_config, out;
    int64_t image_size = 0;
    bool pos_embed_antialias = false;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("input", o->in, "foreign weights (.safetensors)")->required();
  c->add_option("--model", o->model, "attn model name whose config is the base (e.g. deit_tiny_distilled_patch16_224)")
      ->required();
  c->add_option("--format", o->format, "auto | timm | hf | torchvision")->capture_default_str();
  c->add_option("--config", o->config, "Hugging Face config.json (default: config.json beside the input for hf)");
  c->add_option("--image-size", o->image_size, "target image size (the position embedding is resampled)");
  c->add_flag("--pos-embed-antialias", o->pos_embed_antialias,
              "resample the position embedding as timm does (antialiased bicubic) instead of DeiT's plain bicubic");
  c->add_option("--model-config", o->model_config, "JSON object of config overrides, e.g. {\"num_classes\": 10}");
  c->add_option("--out", o->out, "output attn checkpoint (.safetensors)")->required();
  c->callback([o] {
    // The header only: the tensors are streamed into the model one layer at a time, and the checkpoint
    // is written tensor by tensor (the peak is the model, not the model plus the file).
    const io::SafetensorsReader f(o->in);
    io::ForeignVitOptions opt;
    opt.model = o->model;
    if (o->format != "auto") opt.format = io::parse_weight_format(o->format);
    if (!o->model_config.empty()) {
      try {
        opt.overrides = nlohmann::json::parse(o->model_config);
      } catch (const std::exception& e) {
        fail("convert: --model-config is not valid JSON: ", e.what());
      }
    }
    opt.image_size = o->image_size;
    opt.pos_embed_antialias = o->pos_embed_antialias;
    const io::WeightFormat fmt = opt.format ? *opt.format : io::detect_weight_format(f);
    opt.format = fmt;
    std::string cfg_path = o->config;
    if (cfg_path.empty() && fmt == io::WeightFormat::hf) {
      const size_t slash = o->in.find_last_of('/');
      const std::string beside = (slash == std::string::npos ? std::string() : o->in.substr(0, slash + 1)) + "config.json";
      if (std::ifstream(beside).good()) cfg_path = beside;
    }
    nlohmann::json labels;
    if (!cfg_path.empty()) {
      std::ifstream in(cfg_path);
      ATTN_CHECK(in.good(), "convert: cannot open config '", cfg_path, "'");
      std::stringstream ss;
      ss << in.rdbuf();
      try {
        opt.hf_config = nlohmann::json::parse(ss.str());
      } catch (const std::exception& e) {
        fail("convert: config '", cfg_path, "' is not valid JSON: ", e.what());
      }
      if (opt.hf_config.contains("id2label")) labels = opt.hf_config["id2label"];
    }
    io::ForeignVit r = io::load_foreign_vit(f, opt);
    nlohmann::json extra = {{"config", r.model->config()}, {"source_format", io::weight_format_name(fmt)},
                            {"source", o->in}};
    if (!labels.is_null()) extra["id2label"] = labels;
    io::save_checkpoint(o->out, *r.model, nullptr, extra);
    std::printf("%s (%s layout, %zu tensors) -> %s: model %s, %lld parameters%s\n", o->in.c_str(),
                io::weight_format_name(fmt), f.entries().size(), o->out.c_str(), o->model.c_str(),
                (long long)r.model->num_parameters(), r.pos_embed_resampled ? ", position embedding resampled" : "");
  });
}

}  // namespace attn::cli

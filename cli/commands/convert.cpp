// attn convert IN.safetensors --model NAME [--format timm|hf|torchvision] [--config config.json]
//     [--image-size N] [--model-config JSON] --out OUT.safetensors
// Foreign ViT / DeiT / Swin (V1, V2) weights (timm, Hugging Face or torchvision layout, e.g. written by
// tools/pth_to_safetensors.py) or BERT weights (transformers' layout, with their config.json) -> an attn
// checkpoint (weights + config) that `attn eval` and models::load_pretrained open. The position
// embedding is resampled when the image size differs. BERT: the vocab.txt and tokenizer_config.json
// beside the input (a Hugging Face model directory's) are copied beside the output, where the text
// commands (fill-mask, embed, explain --text) look for them; files already there are kept.
#include <cstdio>

#include "attn/attn.h"
#include "attn/io/safetensors.h"
#include "attn/models/bert.h"
#include "attn/models/pretrained.h"
#include "attn/train/checkpoint.h"
#include "../commands.h"
#include "bert_flags.h"

namespace attn::cli {

void add_convert(CLI::App& app) {
  auto* c = app.add_subcommand("convert", "convert timm / Hugging Face / torchvision ViT, DeiT or Swin weights or Hugging Face BERT weights to an attn checkpoint");
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
    // Streamed: the tensors go into the model one layer at a time, and the checkpoint is written tensor
    // by tensor (the peak is the model, not the model plus the file).
    models::PretrainedSource src = models::PretrainedSource::foreign(o->in, o->model);
    src.format = o->format;
    src.hf_config = o->config;
    if (!o->model_config.empty()) {
      try {
        src.model_config = nlohmann::json::parse(o->model_config);
      } catch (const std::exception& e) {
        fail("convert: --model-config is not valid JSON: ", e.what());
      }
    }
    src.image_size = o->image_size;
    src.pos_embed_antialias = o->pos_embed_antialias;
    src.pack_linear_weights = false;   // saved next: the plain layout
    src.image_classifier_only = false;
    const models::Pretrained p = models::load_pretrained(src);
    // What the checkpoint records besides the weights: the model's config and the source (format, path,
    // id2label), from which load_pretrained gives the same preprocessing and class names back.
    nlohmann::json extra = p.metadata;
    extra["config"] = p.module->config();
    train::save_checkpoint(o->out, *p.module, nullptr, extra);
    std::printf("%s (%s layout, %zu tensors) -> %s: model %s, %lld parameters%s\n", o->in.c_str(), p.source.c_str(),
                io::SafetensorsReader(o->in).entries().size(), o->out.c_str(), o->model.c_str(),
                (long long)p.module->num_parameters(), p.pos_embed_resampled ? ", position embedding resampled" : "");
    if (std::dynamic_pointer_cast<models::BertPreTrainedModel>(p.module)) copy_bert_tokenizer_files(o->in, o->out, "convert");
  });
}

}  // namespace attn::cli

// attn quantize CKPT --out Q.safetensors [--ema] [--keep-f32 NAME,...]
// attn quantize --weights W --model NAME [--format F] [--config C] --out Q.safetensors
// An attn checkpoint (trained, or converted) or foreign weights -> an attn checkpoint whose Linear weights
// are int8, per output channel (attn/ops/quantize.h): "<name>.weight" I8 and "<name>.weight_scale" F32, and
// so are a BERT's word embeddings (per token row; an MLM decoder tied to them reads the same codes);
// everything else as it was. The commands that take --dtype int8 load it as int8 without quantizing again
// (predict, eval, bench --weights, fill-mask, classify-text, tag), at a quarter of the Linear weights'
// bytes on disk and in memory. The metadata of the source (model config, data, labels, text task) is kept,
// with "quantization" added; the optimizer state is not. vocab.txt and tokenizer_config.json beside the
// source are copied beside the output.
#include <cstdio>
#include <sstream>

#include "attn/attn.h"
#include "attn/io/safetensors.h"
#include "attn/models/pretrained.h"
#include "attn/nn/linear.h"
#include "attn/train/checkpoint.h"
#include "../commands.h"
#include "bert_flags.h"
#include "source_flags.h"

namespace attn::cli {

namespace {

std::vector<std::string> split_names(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

int64_t weight_bytes(const nn::Module& m) {
  int64_t n = 0;
  for (const auto& [name, t] : m.state_dict()) n += t.numel() * int64_t(t.element_size());
  return n;
}

}  // namespace

void add_quantize(CLI::App& app) {
  auto* c = app.add_subcommand("quantize", "an attn checkpoint or foreign weights -> an attn checkpoint with int8 "
                               "Linear weights (per output channel; activations are quantized per token at run time)");
  struct Opts {
    std::string ckpt, out, keep;
    SourceFlags source;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("checkpoint", o->ckpt, "an attn checkpoint (.safetensors); or --weights W --model NAME instead");
  add_source_flags(c, o->source);
  c->add_option("--keep-f32", o->keep, "Linear layers to leave f32, by name, separated by commas (e.g. head)");
  c->add_option("--out", o->out, "the int8 attn checkpoint to write (.safetensors)")->required();
  c->callback([o] {
    std::vector<std::string> args;
    if (!o->ckpt.empty()) args.push_back(o->ckpt);
    ATTN_CHECK(!o->source.preprocess_given(), "quantize: the preprocessing flags are for inference commands");
    models::PretrainedSource src = o->source.take_source(
        args, {0, 0, "a checkpoint (attn quantize CKPT --out Q) or foreign weights (attn quantize --weights W "
               "--model NAME --out Q)", ""}, "quantize");
    src.pack_linear_weights = false;   // saved next: the plain layout
    src.image_classifier_only = false;
    const models::Pretrained p = models::load_pretrained(src);   // f32 (or int8 already)
    const int64_t before = weight_bytes(*p.module);
    const std::vector<std::string> keep = split_names(o->keep);
    for (const std::string& k : keep) {
      bool found = false;
      for (const auto& [name, m] : p.module->named_modules()) found = found || (name == k && dynamic_cast<nn::Linear*>(m.get()));
      ATTN_CHECK(found, "quantize: --keep-f32 names '", k, "', which is no Linear layer of ", p.model_name);
    }
    models::quantize_model_int8(*p.module, keep);
    int64_t quantized = 0, linears = 0, tables = 0;
    for (const auto& [name, m] : p.module->named_modules()) {
      if (auto* l = dynamic_cast<nn::Linear*>(m.get())) ++linears, quantized += l->weight.dtype() == DType::i8;
      if (auto* e = dynamic_cast<nn::Embedding*>(m.get())) tables += e->weight.dtype() == DType::i8;
    }
    nlohmann::json extra = p.metadata;
    for (const char* k : {"format", "optimizer"}) extra.erase(k);   // the writer's own (no optimizer state is kept)
    extra["config"] = p.module->config();
    extra["quantization"] = {{"dtype", "int8"},
                             {"weights", "symmetric per output channel"},
                             {"activations", "symmetric per token, at run time"},
                             {"linear_layers", linears},
                             {"quantized", quantized},
                             {"embedding_tables", tables}};
    train::save_checkpoint(o->out, *p.module, nullptr, extra);
    const int64_t after = weight_bytes(*p.module);
    std::printf("%s -> %s: %s, %lld of %lld Linear layers int8%s; weights %.1f MB -> %.1f MB (%.2fx)\n",
                src.path.c_str(), o->out.c_str(), p.model_name.c_str(), (long long)quantized, (long long)linears,
                tables ? " and the word embeddings" : "", double(before) / 1e6, double(after) / 1e6,
                double(after) / double(before));
    if (std::dynamic_pointer_cast<models::BertPreTrainedModel>(p.module)) copy_bert_tokenizer_files(src.path, o->out, "quantize");
  });
}

}  // namespace attn::cli

// attn explain CKPT IMAGE --out map.png: where a Vision Transformer looks. Writes a side-by-side
// PNG: the image | attention rollout over it | the last layer's class-token attention over it,
// and prints the predicted class. attn explain --weights W --model NAME IMAGE does the same for
// foreign ViT / DeiT weights, on the center crop their eval preprocessing feeds the model.
// attn explain CKPT --text "..." [--layer L] [--head H] --out map.png: a BERT's attention over the
// tokens of a text (explain_text.h); --weights W reads transformers' BERT weights.
#include <cstdio>

#include "attn/attn.h"
#include "attn/data/image.h"
#include "attn/infer/classify.h"
#include "attn/models/pretrained.h"
#include "attn/viz/explain.h"
#include "../commands.h"
#include "bert_flags.h"
#include "explain_text.h"
#include "source_flags.h"

namespace attn::cli {

void add_explain(CLI::App& app) {
  auto* c = app.add_subcommand("explain", "attention rollout of a ViT/DeiT checkpoint drawn over an image, or (--text) "
                               "a BERT's attention over a text's tokens");
  struct Opts {
    std::vector<std::string> inputs;
    SourceFlags source;
    std::string out = "attention.png", fusion = "mean";
    int64_t size = 224;
    double alpha = 0.5;
    bool json = false;
    int threads = 0;
    BertFlags bert;   // --vocab (the other source flags are shared)
    TextExplainOptions text;
    std::optional<int64_t> head;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("inputs", o->inputs, "CKPT IMAGE (an attn ViT/DeiT checkpoint and a PNG or JPEG file), or IMAGE "
                "with --weights; with --text: CKPT (an attn BERT checkpoint), or nothing with --weights");
  add_source_flags(c, o->source);
  c->add_option("--out", o->out, "the PNG to write")->capture_default_str();
  c->add_option("--head-fusion", o->fusion, "mean | max | min over heads")->capture_default_str();
  c->add_option("--size", o->size, "minimum panel side in pixels (integer upscaling)")->capture_default_str();
  c->add_option("--alpha", o->alpha, "heat-map opacity")->capture_default_str();
  c->add_flag("--json", o->json, "print one JSON object");
  c->add_option("--text", o->text.text, "a text: draw a BERT's attention over its tokens instead of an image's");
  c->add_option("--layer", o->text.layer, "--text: the layer (0-based; negative: from the last)")->capture_default_str();
  c->add_option_function<int64_t>("--head", [o](const int64_t& h) { o->head = h; },
                                  "--text: the head (default: the heads fused by --head-fusion)");
  c->add_option("--cell", o->text.cell, "--text: pixels per token cell")->capture_default_str();
  add_vocab_flag(c, o->bert);
  c->add_option("--threads", o->threads);
  c->callback([o] {
    apply_threads(o->threads);
    if (!o->text.text.empty()) {
      const SourceFlags& f = o->source;
      ATTN_CHECK(f.format == "auto" && f.image_size == 0 && !f.pos_embed_antialias && !f.preprocess_given() && !f.ema,
                 "explain: --format, --image-size, --pos-embed-antialias, --ema and the preprocessing flags are for "
                 "images, not --text");
      BertFlags b = o->bert;
      b.weights = f.weights, b.model = f.model, b.config = f.config, b.model_config = f.model_config;
      std::vector<std::string> args = o->inputs;
      const infer::BertSource src = b.take_source(args, "explain");
      ATTN_CHECK(args.empty(), "explain: with --text, expected CKPT (or --weights W) and no other argument, got '",
                 args.empty() ? "" : args.front(), "'");
      TextExplainOptions t = o->text;
      t.out = o->out, t.fusion = o->fusion, t.head = o->head, t.json = o->json;
      explain_text(src, t);
      return;
    }
    ATTN_CHECK(o->bert.vocab.empty() && o->head == std::nullopt, "explain: --vocab and --head go with --text");
    const viz::HeadFusion fusion = viz::parse_head_fusion(o->fusion);
    std::vector<std::string> images = o->inputs;
    const models::PretrainedSource src = o->source.take_source(
        images, {1, 1, "CKPT IMAGE (or --weights W --model NAME IMAGE)", "one IMAGE"}, "explain");
    const models::Pretrained cl = models::load_pretrained(src);
    const std::string& image = images.front();
    auto* vit = dynamic_cast<models::VisionTransformer*>(cl.model.get());
    ATTN_CHECK(vit != nullptr, "explain: the model of '", src.path, "' (", cl.model_name,
               ") is not a Vision Transformer: attention rollout needs attention maps");
    // attn's own checkpoints: resized to the model's size and normalised as in training; foreign and
    // converted weights: their source's eval transform (the panel shows the crop the model sees).
    viz::PreparedImage p = viz::prepare_image(image, cl.preprocess);
    viz::Explanation e = viz::explain(*vit, p, fusion, o->size, o->alpha);
    std::vector<double> logits;
    {
      NoGradGuard ng;
      logits = cl.model->forward(p.input).to_vector<double>();
    }
    const infer::ClassScore best = infer::top_classes(logits, 1, cl.labels).front();
    data::write_png(o->out, e.panel);
    if (o->json) {
      std::printf("%s\n", nlohmann::json({{"image", image}, {"out", o->out}, {"class", best.index}, {"name", best.name},
                                          {"probability", best.probability}, {"rollout", e.rollout.to_vector<float>()},
                                          {"last_layer", e.last_cls.to_vector<float>()},
                                          {"grid", e.rollout.size(0)}})
                              .dump()
                              .c_str());
    } else {
      std::printf("%s: %s (%.2f%%); wrote %s (image | rollout | last-layer CLS attention, %lld x %lld)\n",
                  image.c_str(), best.name.c_str(), 100.0 * best.probability, o->out.c_str(),
                  (long long)e.panel.size(1), (long long)e.panel.size(0));
    }
  });
}

}  // namespace attn::cli

// attn explain CKPT IMAGE --out map.png: where a Vision Transformer looks. Writes a side-by-side
// PNG: the image | attention rollout over it | the last layer's class-token attention over it,
// and prints the predicted class. attn explain --weights W --model NAME IMAGE does the same for
// foreign ViT / DeiT weights, on the center crop their eval preprocessing feeds the model.
// For a Swin Transformer: image | one block's window attention for a query token | the attention
// each token receives within its window, the block's (shifted) window grid drawn (--stage, --block,
// --query-row, --query-col; viz/explain_swin.h).
// attn explain CKPT --text "..." [--layer L] [--head H] --out map.png: a BERT's attention over the
// tokens of a text (explain_text.h); --weights W reads transformers' BERT weights.
#include <cstdio>

#include "attn/attn.h"
#include "attn/data/image.h"
#include "attn/infer/classify.h"
#include "attn/models/pretrained.h"
#include "attn/viz/explain.h"
#include "attn/viz/explain_swin.h"
#include "../commands.h"
#include "bert_flags.h"
#include "explain_text.h"
#include "source_flags.h"

namespace attn::cli {

namespace {

void print_result(const std::string& image, const std::string& out, const infer::ClassScore& best,
                  const Tensor& panel, const char* what) {
  std::printf("%s: %s (%.2f%%); wrote %s (%s, %lld x %lld)\n", image.c_str(), best.name.c_str(),
              100.0 * best.probability, out.c_str(), what, (long long)panel.size(1), (long long)panel.size(0));
}

// The Swin branch: one block's window attention.
void explain_swin_image(const models::SwinTransformer& swin, const viz::PreparedImage& p,
                        const viz::SwinExplainOptions& so, const std::string& image, const std::string& out,
                        const infer::ClassScore& best, bool json) {
  viz::SwinExplanation e = viz::explain_swin(swin, p, so);
  data::write_png(out, e.panel);
  if (json) {
    std::printf("%s\n", nlohmann::json({{"image", image}, {"out", out}, {"class", best.index}, {"name", best.name},
                                        {"probability", best.probability}, {"stage", so.stage}, {"block", so.block},
                                        {"map", {e.query_map.size(0), e.query_map.size(1)}},
                                        {"query", {e.query_row, e.query_col}}, {"window", e.window},
                                        {"shift", {e.shift_h, e.shift_w}}, {"cell", e.cell},
                                        {"query_attention", e.query_map.to_vector<float>()},
                                        {"received", e.received.to_vector<float>()}})
                            .dump()
                            .c_str());
  } else {
    print_result(image, out, best, e.panel, "image | the query's window attention | attention received per window");
  }
}

}  // namespace

void add_explain(CLI::App& app) {
  auto* c = app.add_subcommand("explain", "attention rollout of a ViT/DeiT checkpoint drawn over an image, a Swin "
                               "block's window attention over it, or (--text) a BERT's attention over a text's tokens");
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
    viz::SwinExplainOptions swin;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("inputs", o->inputs, "CKPT IMAGE (an attn ViT/DeiT/Swin checkpoint and a PNG or JPEG file), or IMAGE "
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
  c->add_option("--stage", o->swin.stage, "Swin: the stage (0-based)")->capture_default_str();
  c->add_option("--block", o->swin.block, "Swin: the block of the stage (0-based; odd blocks are shifted)")
      ->capture_default_str();
  c->add_option("--query-row", o->swin.query_row, "Swin: the query token's row in the stage's map (-1: the centre)")
      ->capture_default_str();
  c->add_option("--query-col", o->swin.query_col, "Swin: the query token's column (-1: the centre)")
      ->capture_default_str();
  add_vocab_flag(c, o->bert);
  c->add_option("--threads", o->threads);
  c->callback([c, o] {
    apply_threads(o->threads);
    bool swin_flags = false;
    for (const char* f : {"--stage", "--block", "--query-row", "--query-col"}) swin_flags |= c->count(f) > 0;
    if (!o->text.text.empty()) {
      const SourceFlags& f = o->source;
      ATTN_CHECK(f.format == "auto" && f.image_size == 0 && !f.pos_embed_antialias && !f.preprocess_given() && !f.ema &&
                     !swin_flags,
                 "explain: --format, --image-size, --pos-embed-antialias, --ema, the preprocessing flags and the Swin "
                 "flags (--stage, --block, --query-row, --query-col) are for images, not --text");
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
    auto* swin = dynamic_cast<models::SwinTransformer*>(cl.model.get());
    ATTN_CHECK(vit != nullptr || swin != nullptr, "explain: the model of '", src.path, "' (", cl.model_name,
               ") is neither a Vision Transformer nor a Swin Transformer: explain draws their attention maps");
    // attn's own checkpoints: resized to the model's size and normalised as in training; foreign and
    // converted weights: their source's eval transform (the panel shows the crop the model sees).
    viz::PreparedImage p = viz::prepare_image(image, cl.preprocess);
    std::vector<double> logits;
    {
      NoGradGuard ng;
      logits = cl.model->forward(p.input).to_vector<double>();
    }
    const infer::ClassScore best = infer::top_classes(logits, 1, cl.labels).front();
    ATTN_CHECK(swin || !swin_flags, "explain: --stage, --block, --query-row and --query-col are for a Swin "
               "Transformer, got ", cl.model_name);
    if (swin) {
      viz::SwinExplainOptions so = o->swin;
      so.fusion = fusion, so.min_panel = o->size, so.alpha = o->alpha;
      explain_swin_image(*swin, p, so, image, o->out, best, o->json);
      return;
    }
    viz::Explanation e = viz::explain(*vit, p, fusion, o->size, o->alpha);
    data::write_png(o->out, e.panel);
    if (o->json) {
      std::printf("%s\n", nlohmann::json({{"image", image}, {"out", o->out}, {"class", best.index}, {"name", best.name},
                                          {"probability", best.probability}, {"rollout", e.rollout.to_vector<float>()},
                                          {"last_layer", e.last_cls.to_vector<float>()},
                                          {"grid", e.rollout.size(0)}})
                              .dump()
                              .c_str());
    } else {
      print_result(image, o->out, best, e.panel, "image | rollout | last-layer CLS attention");
    }
  });
}

}  // namespace attn::cli

// attn explain CKPT IMAGE --out map.png: where a Vision Transformer looks. Writes a side-by-side
// PNG: the image | attention rollout over it | the last layer's class-token attention over it,
// and prints the predicted class. attn explain --weights W --model NAME IMAGE does the same for
// foreign ViT / DeiT weights, on the center crop their eval preprocessing feeds the model.
#include <cstdio>

#include "attn/attn.h"
#include "attn/data/image.h"
#include "attn/infer/classify.h"
#include "attn/models/pretrained.h"
#include "attn/viz/explain.h"
#include "../commands.h"
#include "source_flags.h"

namespace attn::cli {

void add_explain(CLI::App& app) {
  auto* c = app.add_subcommand("explain", "attention rollout of a ViT/DeiT checkpoint drawn over an image");
  struct Opts {
    std::vector<std::string> inputs;
    SourceFlags source;
    std::string out = "attention.png", fusion = "mean";
    int64_t size = 224;
    double alpha = 0.5;
    bool json = false;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("inputs", o->inputs, "CKPT IMAGE (an attn ViT/DeiT checkpoint and a PNG or JPEG file), or IMAGE "
                "with --weights")->required();
  add_source_flags(c, o->source);
  c->add_option("--out", o->out, "the PNG to write")->capture_default_str();
  c->add_option("--head-fusion", o->fusion, "mean | max | min over heads")->capture_default_str();
  c->add_option("--size", o->size, "minimum panel side in pixels (integer upscaling)")->capture_default_str();
  c->add_option("--alpha", o->alpha, "heat-map opacity")->capture_default_str();
  c->add_flag("--json", o->json, "print one JSON object");
  c->add_option("--threads", o->threads);
  c->callback([o] {
    apply_threads(o->threads);
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

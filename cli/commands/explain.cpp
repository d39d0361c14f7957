// attn explain CKPT IMAGE --out map.png: where a Vision Transformer looks. Writes a side-by-side
// PNG: the image | attention rollout over it | the last layer's class-token attention over it,
// and prints the predicted class. attn explain --weights W --model NAME IMAGE does the same for
// foreign ViT / DeiT weights, on the center crop their eval preprocessing feeds the model.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "attn/attn.h"
#include "attn/data/image.h"
#include "attn/train/tasks/image_classification.h"
#include "attn/train/explain.h"
#include "../commands.h"
#include "classifier_source.h"

namespace attn::cli {

void add_explain(CLI::App& app) {
  auto* c = app.add_subcommand("explain", "attention rollout of a ViT/DeiT checkpoint drawn over an image");
  struct Opts {
    std::vector<std::string> inputs;
    ForeignFlags foreign;
    PreprocessFlags pre;
    std::string out = "attention.png", fusion = "mean";
    int64_t size = 224;
    double alpha = 0.5;
    bool json = false;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("inputs", o->inputs, "CKPT IMAGE (an attn ViT/DeiT checkpoint and a PNG or JPEG file), or IMAGE "
                "with --weights")->required();
  add_foreign_flags(c, o->foreign);
  add_preprocess_flags(c, o->pre);
  c->add_option("--out", o->out, "the PNG to write")->capture_default_str();
  c->add_option("--head-fusion", o->fusion, "mean | max | min over heads")->capture_default_str();
  c->add_option("--size", o->size, "minimum panel side in pixels (integer upscaling)")->capture_default_str();
  c->add_option("--alpha", o->alpha, "heat-map opacity")->capture_default_str();
  c->add_flag("--json", o->json, "print one JSON object");
  c->add_option("--threads", o->threads);
  c->callback([o] {
    apply_threads(o->threads);
    const train::HeadFusion fusion = train::parse_head_fusion(o->fusion);
    std::string source;
    Classifier cl;
    if (o->foreign.given()) {
      ATTN_CHECK(o->inputs.size() == 1, "explain: expected one IMAGE with --weights, got ", o->inputs.size(),
                 " arguments");
      cl = classifier_from_foreign(o->foreign, DType::f32, "explain");
      source = o->foreign.weights;
    } else {
      o->foreign.check_unused("explain");
      ATTN_CHECK(o->inputs.size() == 2, "explain: expected CKPT IMAGE (or --weights W --model NAME IMAGE), got ",
                 o->inputs.size(), " arguments");
      source = o->inputs.front();
      cl = classifier_from_checkpoint(source, DType::f32);
    }
    apply_preprocess_flags(cl, o->pre, "explain");
    const std::string& image = o->inputs.back();
    auto* vit = dynamic_cast<models::VisionTransformer*>(cl.model.get());
    ATTN_CHECK(vit != nullptr, "explain: the model of '", source, "' (", cl.model_name,
               ") is not a Vision Transformer: attention rollout needs attention maps");
    auto& model = cl.model;
    model->eval();
    // attn's own checkpoints: resized to the model's size and normalised as in training; foreign and
    // converted weights: their source's eval transform (the panel shows the crop the model sees).
    train::PreparedImage p = train::prepare_image(image, cl.pre);
    train::Explanation e = train::explain(*vit, p, fusion, o->size, o->alpha);
    std::vector<double> logits;
    {
      NoGradGuard ng;
      logits = model->forward(p.input).to_vector<double>();
    }
    const size_t best = size_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    const double mx = logits[best];
    double z = 0;
    for (double l : logits) z += std::exp(l - mx);
    const std::string name = best < cl.class_names.size() ? cl.class_names[best] : "class " + std::to_string(best);
    data::write_png(o->out, e.panel);
    if (o->json) {
      std::printf("%s\n", nlohmann::json({{"image", image}, {"out", o->out}, {"class", best}, {"name", name},
                                          {"probability", 1.0 / z}, {"rollout", e.rollout.to_vector<float>()},
                                          {"last_layer", e.last_cls.to_vector<float>()},
                                          {"grid", e.rollout.size(0)}})
                              .dump()
                              .c_str());
    } else {
      std::printf("%s: %s (%.2f%%); wrote %s (image | rollout | last-layer CLS attention, %lld x %lld)\n",
                  image.c_str(), name.c_str(), 100.0 / z, o->out.c_str(), (long long)e.panel.size(1),
                  (long long)e.panel.size(0));
    }
  });
}

}  // namespace attn::cli

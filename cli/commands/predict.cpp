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
// The classifier comes from models::load_pretrained; images go through infer::classify_files.
// Preprocessing follows the weights' source (data/preprocess.h): foreign weights (and attn checkpoints
// made from them by `attn convert`, which records "source_format") get that source's eval transform
// for the model; attn's own training checkpoints are resized to the model's image size (PIL
// bilinear) and normalised with the checkpoint's mean/std, as in training. 1000-class models print
// the ImageNet class names (a Hugging Face config's id2label wins when given). An image that cannot
// be read gets an error line naming it; the others are still classified; the exit code is then 1.
#include <algorithm>
#include <cstdio>

#include "attn/attn.h"
#include "attn/infer/classify.h"
#include "attn/models/pretrained.h"
#include "../commands.h"
#include "source_flags.h"

namespace attn::cli {

void add_predict(CLI::App& app) {
  auto* c = app.add_subcommand("predict", "classify PNG/JPEG images with a checkpoint or foreign ViT/DeiT weights");
  struct Opts {
    std::vector<std::string> inputs;
    SourceFlags source;
    int64_t topk = 5, batch = 1;
    bool json = false;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("inputs", o->inputs, "CKPT IMAGE... (attn checkpoint), or IMAGE... with --weights")->required();
  c->add_option("--topk", o->topk, "how many classes to print per image")->capture_default_str();
  c->add_option("--batch", o->batch, "images per forward pass")->capture_default_str();
  add_source_flags(c, o->source, "f32 | bf16 (Linear weights in bf16, f32 accumulation; see docs/design.md)");
  c->add_flag("--json", o->json, "print one JSON object");
  c->add_option("--threads", o->threads);
  c->callback([o] {
    apply_threads(o->threads);
    ATTN_CHECK(o->topk >= 1, "predict: expected --topk >= 1, got ", o->topk);
    ATTN_CHECK(o->batch >= 1, "predict: expected --batch >= 1, got ", o->batch);
    std::vector<std::string> images = o->inputs;
    const models::PretrainedSource src = o->source.take_source(
        images, {1, kAny, "CKPT IMAGE... (or --weights W --model NAME IMAGE...)", "IMAGE..."}, "predict");
    const models::Pretrained pr = models::load_pretrained(src);
    // --dtype bf16: the Linear weights were made bf16 before loading and converted as they were
    // streamed in, so the f32 source weights were never held whole; hand back what the load freed.
    release_cached_memory();

    nlohmann::json results = nlohmann::json::array();
    int64_t failed = 0;
    for (size_t first = 0; first < images.size(); first += size_t(o->batch)) {
      const size_t last = std::min(images.size(), first + size_t(o->batch));
      const std::vector<infer::ImagePrediction> batch = infer::classify_files(
          *pr.model,
          std::vector<std::string>(images.begin() + std::ptrdiff_t(first), images.begin() + std::ptrdiff_t(last)),
          pr.preprocess, pr.labels, o->topk);
      for (const infer::ImagePrediction& r : batch) {
        if (!r.error.empty()) {
          ++failed;
          if (o->json)
            results.push_back({{"image", r.path}, {"error", r.error}});
          else {
            std::fflush(stdout);
            std::fprintf(stderr, "attn: error: %s\n", r.error.c_str());
          }
          continue;
        }
        if (o->json) {
          nlohmann::json top = nlohmann::json::array();
          for (const infer::ClassScore& t : r.top)
            top.push_back({{"class", t.index}, {"name", t.name}, {"probability", t.probability}, {"logit", t.logit}});
          results.push_back({{"image", r.path}, {"top", top}});
        } else {
          std::printf("%s\n", r.path.c_str());
          for (size_t j = 0; j < r.top.size(); ++j)
            std::printf("  %zu. %-24s %7.3f%%  (class %lld)\n", j + 1, r.top[j].name.c_str(),
                        100.0 * r.top[j].probability, (long long)r.top[j].index);
        }
      }
      std::fflush(stdout);
    }
    if (o->json) {
      nlohmann::json j = {{o->source.foreign() ? "weights" : "checkpoint", src.path},
                          {"model", pr.model_name},
                          {"source", pr.source},
                          {"preprocess", pr.preprocess.describe()},
                          {"results", results}};
      std::printf("%s\n", j.dump().c_str());
    }
    std::fflush(stdout);
    ATTN_CHECK(failed == 0, "predict: ", failed, " of ", images.size(), " images could not be read");
  });
}

}  // namespace attn::cli

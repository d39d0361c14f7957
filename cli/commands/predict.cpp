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
#include <numeric>

#include "attn/attn.h"
#include "attn/data/preprocess.h"
#include "../commands.h"
#include "classifier_source.h"

namespace attn::cli {

void add_predict(CLI::App& app) {
  auto* c = app.add_subcommand("predict", "classify PNG/JPEG images with a checkpoint or foreign ViT/DeiT weights");
  struct Opts {
    std::vector<std::string> inputs;
    ForeignFlags foreign;
    PreprocessFlags pre;
    std::string dtype = "f32";
    int64_t topk = 5, batch = 1;
    bool json = false;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("inputs", o->inputs, "CKPT IMAGE... (attn checkpoint), or IMAGE... with --weights")->required();
  add_foreign_flags(c, o->foreign);
  c->add_option("--topk", o->topk, "how many classes to print per image")->capture_default_str();
  c->add_option("--batch", o->batch, "images per forward pass")->capture_default_str();
  c->add_option("--dtype", o->dtype, "f32 | bf16 (Linear weights in bf16, f32 accumulation; see docs/design.md)")->capture_default_str();
  add_preprocess_flags(c, o->pre);
  c->add_flag("--json", o->json, "print one JSON object");
  c->add_option("--threads", o->threads);
  c->callback([o] {
    apply_threads(o->threads);
    ATTN_CHECK(o->topk >= 1, "predict: expected --topk >= 1, got ", o->topk);
    ATTN_CHECK(o->batch >= 1, "predict: expected --batch >= 1, got ", o->batch);
    const DType linear_dtype = parse_linear_dtype(o->dtype, "predict");
    Classifier pr;
    std::vector<std::string> images = o->inputs;
    std::string source_path;
    if (o->foreign.given()) {
      pr = classifier_from_foreign(o->foreign, linear_dtype, "predict");
      source_path = o->foreign.weights;
    } else {
      o->foreign.check_unused("predict");
      ATTN_CHECK(images.size() >= 2, "predict: expected CKPT IMAGE... (or --weights W --model NAME IMAGE...), got ",
                 images.size(), " argument");
      source_path = images.front();
      images.erase(images.begin());
      pr = classifier_from_checkpoint(source_path, linear_dtype);
    }
    apply_preprocess_flags(pr, o->pre, "predict");
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
      std::vector<std::string> errors;
      const std::vector<Tensor> decoded = data::preprocess_files(
          std::vector<std::string>(images.begin() + std::ptrdiff_t(first), images.begin() + std::ptrdiff_t(last)),
          pr.pre, errors);
      std::vector<Tensor> inputs;
      for (const Tensor& t : decoded)
        if (t.defined()) inputs.push_back(t);
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
      nlohmann::json j = {{o->foreign.given() ? "weights" : "checkpoint", source_path},
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

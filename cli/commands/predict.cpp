// attn predict CKPT IMAGE... [--topk K] [--json]: classify image files with a checkpoint.
//
// Each image is decoded (PNG/JPEG), converted to the model's channels, resized to its image size
// (PIL bilinear) and normalised with the checkpoint's mean/std, as in training. An image that
// cannot be read gets an error line; the others are still classified; the exit code is then 1.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "attn/attn.h"
#include "attn/train/classifier.h"
#include "attn/train/explain.h"
#include "../commands.h"

namespace attn::cli {

void add_predict(CLI::App& app) {
  auto* c = app.add_subcommand("predict", "classify PNG/JPEG images with a checkpoint");
  struct Opts {
    std::string ckpt;
    std::vector<std::string> images;
    int64_t topk = 5;
    bool json = false;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("checkpoint", o->ckpt, "an attn checkpoint (.safetensors)")->required();
  c->add_option("images", o->images, "PNG or JPEG files")->required();
  c->add_option("--topk", o->topk, "how many classes to print per image")->capture_default_str();
  c->add_flag("--json", o->json, "print one JSON object");
  c->add_option("--threads", o->threads);
  c->callback([o] {
    apply_threads(o->threads);
    ATTN_CHECK(o->topk >= 1, "predict: expected --topk >= 1, got ", o->topk);
    const train::CheckpointInputs in = train::checkpoint_inputs(o->ckpt);
    auto model = train::load_classifier(o->ckpt);
    model->eval();
    nlohmann::json results = nlohmann::json::array();
    int64_t failed = 0;
    for (const std::string& path : o->images) {
      train::PreparedImage p;
      try {
        p = train::prepare_image(path, in.image_size, in.channels, in.mean, in.std);
      } catch (const Error& e) {
        ++failed;
        if (o->json)
          results.push_back({{"image", path}, {"error", e.what()}});
        else {
          std::fflush(stdout);
          std::fprintf(stderr, "attn: error: %s\n", e.what());
        }
        continue;
      }
      std::vector<double> logits;
      {
        NoGradGuard ng;
        logits = model->forward(p.input).to_vector<double>();
      }
      const double mx = *std::max_element(logits.begin(), logits.end());
      double z = 0;
      std::vector<double> prob(logits.size());
      for (size_t k = 0; k < logits.size(); ++k) z += prob[k] = std::exp(logits[k] - mx);
      for (double& v : prob) v /= z;
      std::vector<size_t> order(prob.size());
      std::iota(order.begin(), order.end(), 0);
      const size_t k = std::min<size_t>(size_t(o->topk), order.size());
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return prob[a] > prob[b]; });
      auto name = [&](size_t cls) {
        return cls < in.class_names.size() ? in.class_names[cls] : "class " + std::to_string(cls);
      };
      if (o->json) {
        nlohmann::json top = nlohmann::json::array();
        for (size_t i = 0; i < k; ++i)
          top.push_back({{"class", order[i]}, {"name", name(order[i])}, {"probability", prob[order[i]]}});
        results.push_back({{"image", path}, {"top", top}});
      } else {
        std::printf("%s\n", path.c_str());
        for (size_t i = 0; i < k; ++i)
          std::printf("  %zu. %-24s %7.3f%%  (class %zu)\n", i + 1, name(order[i]).c_str(), 100.0 * prob[order[i]],
                      order[i]);
      }
    }
    if (o->json)
      std::printf("%s\n", nlohmann::json({{"checkpoint", o->ckpt}, {"results", results}}).dump().c_str());
    std::fflush(stdout);
    ATTN_CHECK(failed == 0, "predict: ", failed, " of ", o->images.size(), " images could not be read");
  });
}

}  // namespace attn::cli

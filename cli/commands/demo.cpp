// attn demo: the README's main job. Trains the default model on Fashion-MNIST, then prints the
// test accuracy, a few predictions and where the outputs are.
#include <algorithm>
#include <cstdio>

#include "attn/attn.h"
#include "attn/data/fashion_mnist.h"
#include "attn/data/image.h"
#include "attn/models/vit.h"
#include "attn/train/classifier.h"
#include "attn/viz/explain.h"
#include "attn/viz/plot.h"
#include "../commands.h"

namespace attn::cli {

void add_train_flags(CLI::App* c, train::TrainConfig& cfg, int& threads, std::string& model_json);
void finish_train_flags(train::TrainConfig& cfg, int threads, const std::string& model_json);
void print_result(const train::TrainResult& r);

void add_demo(CLI::App& app) {
  auto* c = app.add_subcommand("demo", "train and evaluate the default model on Fashion-MNIST (the README's main job)");
  auto cfg = std::make_shared<train::TrainConfig>();
  // The default: a small ViT (patch 7 -> 16 tokens + [class], D 128, depth 4, 4 heads), 5 epochs:
  // 3 min 16 s and 83.7% test accuracy on 2 quiet cores (docs/results.md).
  cfg->model = "vit_fmnist_demo";
  cfg->epochs = 5;
  cfg->augment = true;
  cfg->out = "runs/demo";
  auto threads = std::make_shared<int>(0);
  auto model_json = std::make_shared<std::string>();
  add_train_flags(c, *cfg, *threads, *model_json);
  c->callback([cfg, threads, model_json] {
    finish_train_flags(*cfg, *threads, *model_json);
    std::printf("attn demo: training %s on Fashion-MNIST for %lld epochs (%d threads), output in %s\n",
                cfg->model.c_str(), (long long)cfg->epochs, get_num_threads(), cfg->out.c_str());
    train::TrainResult r = train::train_classifier(*cfg);
    print_result(r);
    auto model = train::load_classifier(r.checkpoint);
    auto test = data::FashionMnist::load(cfg->data_dir, data::Split::test);
    auto [mean, std] = train::dataset_normalization(cfg->data);
    train::EvalResult e = train::evaluate(*model, test, mean, std, 256, 0);   // every test image
    const auto& names = data::FashionMnist::class_names();
    std::printf("\na few test images:\n");
    for (int64_t i = 0; i < std::min<int64_t>(8, e.count); ++i) {
      const int64_t y = int64_t(test.labels().at({i}));
      std::printf("  #%lld  predicted %-12s  true %-12s %s\n", (long long)i, names[size_t(e.predictions[size_t(i)])].c_str(),
                  names[size_t(y)].c_str(), e.predictions[size_t(i)] == y ? "ok" : "WRONG");
    }
    // The attention map of test image 0: image | attention rollout | last layer's class-token attention.
    if (auto* vit = dynamic_cast<models::VisionTransformer*>(model.get())) {
      const std::string img_path = cfg->out + "/test0.png", map_path = cfg->out + "/attention.png";
      data::write_png(img_path, test.images().select(0, 0).permute({1, 2, 0}).contiguous());   // (28, 28, 1) u8
      viz::PreparedImage p = viz::prepare_image(img_path, vit->cfg().image_size, vit->cfg().in_channels, mean, std);
      data::write_png(map_path, viz::explain(*vit, p).panel);
      std::printf("\nattention map of test image 0 (%s): %s\n", names[size_t(test.labels().at({0}))].c_str(),
                  map_path.c_str());
    }
    const std::string cm_path = cfg->out + "/confusion.svg";
    train::write_confusion_svg(cm_path, "Fashion-MNIST test, " + cfg->model, names, e.labels, e.predictions);
    std::printf("confusion matrix of the %lld test images: %s\n", (long long)e.count, cm_path.c_str());
  });
}

}  // namespace attn::cli

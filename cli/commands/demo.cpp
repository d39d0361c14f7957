// attn demo: the README's main job. Trains the default model on Fashion-MNIST, then prints the
// test accuracy, a few predictions and where the outputs are.
#include <algorithm>
#include <cstdio>

#include "attn/attn.h"
#include "attn/data/fashion_mnist.h"
#include "attn/data/image.h"
#include "attn/models/vit.h"
#include "attn/train/tasks/image_classification.h"
#include "attn/viz/explain.h"
#include "attn/viz/plot.h"
#include "../commands.h"
#include "train_flags.h"

namespace attn::cli {

void add_demo(CLI::App& app) {
  auto* c = app.add_subcommand("demo", "train and evaluate the default model on Fashion-MNIST (the README's main job)");
  auto f = std::make_shared<TrainFlags>();
  train::TrainConfig* cfg = &f->cfg;
  // The default: a small ViT (patch 7 -> 16 tokens + [class], D 128, depth 4, 4 heads), 5 epochs:
  // 3 min 16 s and 83.7% test accuracy on 2 quiet cores of a Zen 2 host.
  cfg->model = "vit_fmnist_demo";
  cfg->epochs = 5;
  cfg->image.augment = true;
  cfg->out = "runs/demo";
  add_common_train_flags(c, *f);
  add_image_train_flags(c, *f);
  c->callback([f, cfg] {
    finish_train_flags(*f);
    ATTN_CHECK(models::has_model(cfg->model) && models::model_entry(cfg->model).task == models::kImageClassification,
               "demo: expected an image classifier (`attn info --list`), got '", cfg->model, "'");
    const std::string out = cfg->out.value_or("runs/demo"), data_name = cfg->data.value_or("fashion-mnist");
    std::printf("attn demo: training %s on Fashion-MNIST for %lld epochs (%d threads), output in %s\n",
                cfg->model.c_str(), (long long)cfg->epochs.value_or(5), get_num_threads(), out.c_str());
    train::TrainResult r = train::train(*cfg);
    print_result(r);
    if (!r.finished) return;
    auto model = models::load_classifier_checkpoint(r.checkpoint);
    auto test = data::FashionMnist::load(cfg->image.data_dir, data::Split::test);
    auto [mean, std] = data::dataset_normalization(data_name);
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
      const std::string img_path = out + "/test0.png", map_path = out + "/attention.png";
      data::write_png(img_path, test.images().select(0, 0).permute({1, 2, 0}).contiguous());   // (28, 28, 1) u8
      viz::PreparedImage p = viz::prepare_image(img_path, vit->cfg().image_size, vit->cfg().in_channels, mean, std);
      data::write_png(map_path, viz::explain(*vit, p).panel);
      std::printf("\nattention map of test image 0 (%s): %s\n", names[size_t(test.labels().at({0}))].c_str(),
                  map_path.c_str());
    }
    const std::string cm_path = out + "/confusion.svg";
    viz::write_confusion_svg(cm_path, "Fashion-MNIST test, " + cfg->model, names, e.labels, e.predictions);
    std::printf("confusion matrix of the %lld test images: %s\n", (long long)e.count, cm_path.c_str());
  });
}

}  // namespace attn::cli

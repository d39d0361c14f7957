// attn demo: the README's main job. Trains the default model on Fashion-MNIST, then prints the
// test accuracy, a few predictions and where the outputs are.
#include <cstdio>

#include "attn/attn.h"
#include "attn/data/fashion_mnist.h"
#include "attn/train/classifier.h"
#include "../commands.h"

namespace attn::cli {

void add_train_flags(CLI::App* c, train::TrainConfig& cfg, int& threads, std::string& model_json);
void finish_train_flags(train::TrainConfig& cfg, int threads, const std::string& model_json);
void print_result(const train::TrainResult& r);

void add_demo(CLI::App& app) {
  auto* c = app.add_subcommand("demo", "train and evaluate the default model on Fashion-MNIST (the README's main job)");
  auto cfg = std::make_shared<train::TrainConfig>();
  // The default model until ViT lands: the 784-512-512-10 MLP, 5 epochs (about a minute on 2 cores).
  cfg->model = "mlp";
  cfg->epochs = 5;
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
    train::EvalResult e = train::evaluate(*model, test, mean, std, 256, 8);
    const auto& names = data::FashionMnist::class_names();
    std::printf("\na few test images:\n");
    for (int64_t i = 0; i < e.count; ++i) {
      const int64_t y = int64_t(test.labels().at({i}));
      std::printf("  #%lld  predicted %-12s  true %-12s %s\n", (long long)i, names[size_t(e.predictions[size_t(i)])].c_str(),
                  names[size_t(y)].c_str(), e.predictions[size_t(i)] == y ? "ok" : "WRONG");
    }
  });
}

}  // namespace attn::cli

// `attn demo`, shortened (one epoch on 256 images, a one-block ViT, one thread): it trains, prints
// the test accuracy and the predictions of the first test images (the checkpoint's, as the library
// computes them on the same test set), and writes the checkpoint, the attention map and the
// confusion matrix where it says.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "attn/attn.h"
#include "attn/core/parallel.h"
#include "attn/data/fashion_mnist.h"
#include "attn/models/pretrained.h"
#include "attn/train/tasks/image_classification.h"
#include "attn_cli.h"
#include "train_checks.h"

using namespace attn;
using test::run_attn;
namespace fs = std::filesystem;

TEST(DemoCli, ShortDemoTrainsPredictsAndDraws) {
  const std::string dir = test::fresh_tmp_dir("attn_demo_cli_test", "demo");
  const std::string out = dir + "/demo";
  const test::CliRun r = run_attn(dir, {"demo", "--epochs", "1", "--limit-train", "256", "--limit-eval", "64",
                                        "--batch", "64", "--model-config", R"({"dim":32,"depth":1,"heads":2})",
                                        "--threads", "1", "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("attn demo: training vit_fmnist_demo on Fashion-MNIST for 1 epochs (1 threads), output in " +
                       out),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(test accuracy: \d+\.\d\d%)"))) << r.out;
  EXPECT_NE(r.out.find("checkpoint: " + out + "/checkpoint.safetensors"), std::string::npos) << r.out;

  // The eight predictions it prints are the checkpoint's on the test set.
  set_num_threads(1);
  auto model = models::load_classifier_checkpoint(out + "/checkpoint.safetensors");
  EXPECT_EQ(model->config().at("dim"), 32);
  EXPECT_EQ(model->config().at("depth"), 1);
  const auto test_set = data::FashionMnist::load(data::FashionMnist::kDefaultDir, data::Split::test);
  const auto [mean, std] = data::dataset_normalization("fashion-mnist");
  const train::EvalResult e = train::evaluate(*model, test_set, mean, std, 256, 0);
  ASSERT_EQ(e.count, 10000);
  const auto& names = data::FashionMnist::class_names();
  for (size_t i = 0; i < 8; ++i) {
    const int64_t p = e.predictions[i], y = e.labels[i];
    const std::regex line("  #" + std::to_string(i) + "  predicted " + names[size_t(p)] + " +true " +
                          names[size_t(y)] + " +" + (p == y ? "ok" : "WRONG") + "\n");
    EXPECT_TRUE(std::regex_search(r.out, line)) << "test image " << i << ": predicted " << names[size_t(p)]
                                                << ", true " << names[size_t(y)] << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("attention map of test image 0 (" + names[size_t(e.labels[0])] + "): " + out + "/attention.png"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("confusion matrix of the 10000 test images: " + out + "/confusion.svg"), std::string::npos)
      << r.out;
  for (const char* f : {"/checkpoint.safetensors", "/test0.png", "/attention.png", "/confusion.svg", "/log.jsonl"})
    EXPECT_TRUE(fs::exists(out + f) && fs::file_size(out + f) > 0) << f;
  std::ifstream svg(out + "/confusion.svg");
  const std::string text((std::istreambuf_iterator<char>(svg)), {});
  EXPECT_NE(text.find("Ankle boot"), std::string::npos) << "class names on the confusion matrix";

  // Not an image classifier: refused with the reason.
  const test::CliRun bad = run_attn(dir, {"demo", "--model", "transformer", "--out", dir + "/bad"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("demo: expected an image classifier (`attn info --list`), got 'transformer'"),
            std::string::npos)
      << bad.err;
  fs::remove_all(dir);
}

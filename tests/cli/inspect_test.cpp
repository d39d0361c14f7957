// `attn inspect`: on a checkpoint trained for a few steps on Fashion-MNIST, the mean attention distance
// it prints (batched, averaged over the test images it reads) equals the library's on the same images
// in one batch, the position-embedding similarity is the library's, and both figures are written; on
// foreign weights, given image files; and its errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/attn.h"
#include "attn/autograd/grad_mode.h"
#include "attn/data/fashion_mnist.h"
#include "attn/models/vit.h"
#include "attn/train/tasks/image_classification.h"
#include "attn/viz/inspect.h"
#include "attn_cli.h"
#include "train_checks.h"

using namespace attn;
using test::run_attn;
using nlohmann::json;
namespace fs = std::filesystem;

TEST(InspectCli, FashionMnistCheckpoint) {
  const std::string dir = test::fresh_tmp_dir("attn_inspect_cli_test", "fmnist");
  const test::CliRun t = test::train_small_vit(dir, 2);
  ASSERT_EQ(t.code, 0) << t.err;
  const std::string ckpt = dir + "/run/checkpoint.safetensors";
  const test::CliRun r = run_attn(dir, {"inspect", ckpt, "--count", "20", "--batch", "8", "--out", dir + "/fig", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["grid"].get<int64_t>(), 4);
  EXPECT_EQ(j["images"].get<int64_t>(), 20);
  EXPECT_GT(fs::file_size(dir + "/fig/pos_embed_similarity.png"), 0u);
  EXPECT_GT(fs::file_size(dir + "/fig/attention_distance.svg"), 0u);

  // The same in-process, the 20 images in one batch.
  auto model = models::load_classifier_checkpoint(ckpt);
  auto* vit = dynamic_cast<models::VisionTransformer*>(model.get());
  ASSERT_NE(vit, nullptr);
  vit->eval();
  const auto test = data::FashionMnist::load(data::FashionMnist::kDefaultDir, data::Split::test);
  const auto [mean, std] = data::dataset_normalization("fashion-mnist");
  const Tensor x = (test.images_f32().slice(0, 0, 20).contiguous() - double(mean[0])) / double(std[0]);
  Tensor d;
  {
    NoGradGuard ng;
    d = viz::mean_attention_distance(vit->attention_maps(x), vit->num_prefix_tokens(), 4, 7);
  }
  // Batches of 8 against one of 20 agree to f32 rounding, not bit for bit: where oneDNN's GEMM blocks
  // by rows (its AVX2 kernels), a row's sums depend on the batch size (seen: 1.6e-9 to 9e-9 on values
  // near 13). Dropping the last partial batch (the means of 16 of the 20 images) moves them by 2e-4
  // to 2.5e-3 on this checkpoint, so 1e-6 still tells a batching error apart.
  ASSERT_EQ(j["attention_distance"].size(), 2u);
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 2; ++h)
      EXPECT_NEAR(j["attention_distance"][size_t(l)][size_t(h)].get<double>(), d.at({l, h}), 1e-6) << l << ", " << h;
  const auto sim = j["pos_embed_similarity"].get<std::vector<double>>();
  const auto want = viz::pos_embed_similarity(*vit).to_vector<double>();
  ASSERT_EQ(sim.size(), want.size());
  for (size_t i = 0; i < sim.size(); ++i) EXPECT_NEAR(sim[i], want[i], 1e-12);

  // Given image files instead (written from the test set; PNG, resized as predict resizes).
  const test::CliRun text = run_attn(dir, {"inspect", ckpt, dir + "/run/../fig/pos_embed_similarity.png", "--out", dir + "/fig2"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("mean attention distance in pixels (1 images"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("layer  2:"), std::string::npos) << text.out;

  test::CliRun bad = run_attn(dir, {"inspect"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("inspect: expected CKPT [IMAGE...]"), std::string::npos) << bad.err;
  bad = run_attn(dir, {"inspect", ckpt, "--model", "vit"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("inspect: --model, --format"), std::string::npos) << bad.err;
  fs::remove_all(dir);
}

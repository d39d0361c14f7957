// `attn eval` on foreign ImageNet-style weights and a folder of labelled images: the --weights form and
// a checkpoint made by `attn convert` give the library's top-1 / top-5 / loss (tests/infer/
// folder_eval_test.cpp checks those against torchvision), DIR/val is found under DIR, and the errors
// of a call without --data, without anything to evaluate, or with both a checkpoint and --weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/attn.h"
#include "attn/data/image_folder.h"
#include "attn/data/preprocess.h"
#include "attn/infer/folder_eval.h"
#include "attn/io/safetensors.h"
#include "attn/infer/folder_eval.h"
#include "attn_cli.h"
#include "files.h"
#include "attn/models/name_maps.h"
#include "torch_ref.h"
#include "train_checks.h"

using namespace attn;
using test::run_attn;
using test::write_bytes;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {


const json kModel = {{"image_size", 32}, {"patch_size", 8}, {"in_channels", 3}, {"num_classes", 1000},
                     {"dim", 32},        {"depth", 2},      {"heads", 2},       {"mlp_ratio", 2.0}};

}  // namespace

TEST(EvalCli, ForeignWeightsOnAnImagenetStyleFolder) {
  const std::string dir = test::fresh_tmp_dir("attn_eval_folder_test", "cli");
  const data::Preprocess pre = data::preset_for("vit", data::WeightSource::torchvision, 32);
  const int64_t n = 30;
  const json args = {{"seed", 5}, {"n", n}, {"resize", pre.resize_size}, {"crop", pre.crop_size},
                     {"interpolation", "bilinear"}, {"mean", pre.mean}, {"std", pre.std}};
  const test::Tensors ref = test::torch_ref("folder_eval.reference", {}, args);
  const auto labels = ref.at("labels").to_vector<int64_t>();
  const auto jpeg = ref.at("jpeg").to_vector<int64_t>();
  for (int64_t k = 0; k < n; ++k) {
    const Tensor& b = ref.at("img_" + std::to_string(k));
    write_bytes(dir + "/data/val/" + data::imagenet_wnids()[size_t(labels[size_t(k)])] + "/" + std::to_string(k) +
                    (jpeg[size_t(k)] ? ".jpg" : ".png"),
                b.data<uint8_t>(), size_t(b.numel()));
  }
  const std::string weights = dir + "/vit.safetensors";
  write_bytes(weights, ref.at("file").data<uint8_t>(), size_t(ref.at("file").numel()));
  const int64_t top1 = ref.at("top1").to_vector<int64_t>()[0], top5 = ref.at("top5").to_vector<int64_t>()[0];
  const double loss = ref.at("loss").to_vector<double>()[0];

  auto check = [&](const test::CliRun& r, const char* what) {
    ASSERT_EQ(r.code, 0) << what << ": " << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["images"].get<int64_t>(), n) << what;
    EXPECT_EQ(std::llround(j["top1"].get<double>() * double(n)), top1) << what;
    EXPECT_EQ(std::llround(j["top5"].get<double>() * double(n)), top5) << what;
    EXPECT_NEAR(j["loss"].get<double>(), loss, 1e-4 * std::max(1.0, loss)) << what;
    EXPECT_EQ(j["labels"], "wnid") << what;
    EXPECT_EQ(j["source"], "torchvision") << what;
    EXPECT_EQ(j["data"], dir + "/data/val") << what;   // DIR/val, found under DIR
    EXPECT_EQ(j["preprocess"], pre.describe()) << what;
    EXPECT_TRUE(j["errors"].empty()) << what;
    int64_t count = 0;
    for (const auto& c : j["per_class"]) count += c["images"].get<int64_t>();
    EXPECT_EQ(count, n) << what;
  };
  check(run_attn(dir, {"eval", "--weights", weights, "--model", "vit", "--model-config", kModel.dump(), "--format",
                      "torchvision", "--data", dir + "/data", "--batch", "4", "--json"}),
        "--weights");
  // The same weights converted to an attn checkpoint: it keeps the source's preprocessing.
  const std::string ckpt = dir + "/converted.safetensors";
  const test::CliRun conv = run_attn(dir, {"convert", weights, "--model", "vit", "--model-config", kModel.dump(), "--format",
                                    "torchvision", "--out", ckpt});
  ASSERT_EQ(conv.code, 0) << conv.err;
  check(run_attn(dir, {"eval", ckpt, "--data", dir + "/data", "--json"}), "converted checkpoint");
  // The text form.
  const test::CliRun text = run_attn(dir, {"eval", ckpt, "--data", dir + "/data/val"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("top-1 "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("labels: "), std::string::npos) << text.out;

  // attn explain on the same weights: the class it prints is torchvision's top-1 for an image whose
  // top-1 margin is clear (label = top-1 for k % 3 == 0 in the reference), and the panel is written.
  {
    const auto logits = ref.at("logits").to_vector<double>();
    const size_t k = 3;
    const size_t best = size_t(std::max_element(logits.begin() + k * 1000, logits.begin() + (k + 1) * 1000) -
                               (logits.begin() + k * 1000));
    ASSERT_EQ(int64_t(best), labels[k]);
    const std::string img = dir + "/data/val/" + data::imagenet_wnids()[best] + "/3" + (jpeg[k] ? ".jpg" : ".png");
    const test::CliRun e = run_attn(dir, {"explain", "--weights", weights, "--model", "vit", "--model-config", kModel.dump(),
                                   "--format", "torchvision", img, "--out", dir + "/map.png", "--json"});
    ASSERT_EQ(e.code, 0) << e.err;
    const json j = json::parse(e.out);
    EXPECT_EQ(j["class"].get<size_t>(), best);
    EXPECT_EQ(j["name"], data::imagenet_class_names()[best]);
    EXPECT_EQ(j["grid"].get<int64_t>(), 4);   // 32 / 8
    EXPECT_TRUE(fs::file_size(dir + "/map.png") > 0);
    const test::CliRun bad = run_attn(dir, {"explain", "--weights", weights, "--model", "vit", ckpt, img});
    EXPECT_EQ(bad.code, 1);
    EXPECT_NE(bad.err.find("explain: expected one IMAGE with --weights, got 2 arguments"), std::string::npos)
        << bad.err;
  }

  test::CliRun r = run_attn(dir, {"eval", ckpt});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("is an ImageNet-style classifier (vit, torchvision preprocessing): expected --data DIR"),
            std::string::npos)
      << r.err;
  r = run_attn(dir, {"eval"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("eval: expected a checkpoint (attn eval CKPT) or foreign weights"), std::string::npos) << r.err;
  r = run_attn(dir, {"eval", ckpt, "--weights", weights, "--model", "vit", "--data", dir + "/data"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("eval: give either an attn checkpoint or --weights, not both"), std::string::npos) << r.err;
  r = run_attn(dir, {"eval", ckpt, "--data", dir + "/nowhere"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("eval: --data '" + dir + "/nowhere' is not a folder"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

// attn eval --confusion on attn's own checkpoint (a few training steps on Fashion-MNIST): the matrix in
// the JSON sums to the images scored, its diagonal is the accuracy, and the SVG names the classes.
TEST(EvalCli, ConfusionMatrixOfAnAttnCheckpoint) {
  const std::string dir = test::fresh_tmp_dir("attn_eval_folder_test", "confusion");
  const test::CliRun t = test::train_small_vit(dir, 1);
  ASSERT_EQ(t.code, 0) << t.err;
  const std::string ckpt = dir + "/run/checkpoint.safetensors";
  const test::CliRun r = run_attn(dir, {"eval", ckpt, "--limit", "300", "--confusion", dir + "/cm.svg", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["confusion"].size(), 10u);
  int64_t total = 0, diagonal = 0;
  for (size_t row = 0; row < 10; ++row) {
    ASSERT_EQ(j["confusion"][row].size(), 10u);
    for (size_t col = 0; col < 10; ++col) {
      total += j["confusion"][row][col].get<int64_t>();
      if (row == col) diagonal += j["confusion"][row][col].get<int64_t>();
    }
  }
  EXPECT_EQ(total, 300);
  EXPECT_EQ(j["count"].get<int64_t>(), 300);
  EXPECT_NEAR(j["accuracy"].get<double>(), double(diagonal) / 300.0, 1e-12);
  std::ifstream in(dir + "/cm.svg");
  const std::string svg((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(svg.find(">Ankle boot</text>"), std::string::npos);
  const test::CliRun bad = run_attn(dir, {"eval", "--weights", ckpt, "--model", "vit", "--data", dir, "--confusion", "x.svg"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("eval: --confusion is for attn's own image classifiers, not foreign weights"),
            std::string::npos)
      << bad.err;
  fs::remove_all(dir);
}

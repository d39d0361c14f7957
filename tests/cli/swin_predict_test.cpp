// `attn predict --weights swin_t.safetensors --model swin_t --format torchvision IMAGE...`: seeded random
// swin_t weights written by PyTorch in torchvision's layout, PNG and JPEG images; each image's top-5
// classes and logits are torchvision's, with the images through torchvision's own eval transform of
// Swin_T_Weights.IMAGENET1K_V1 (resize 232 bicubic, center crop 224).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/attn.h"
#include "attn_cli.h"
#include "files.h"
#include "torch_ref.h"

using namespace attn;
using nlohmann::json;

TEST(SwinPredictCli, TorchvisionWeightsGiveTorchvisionsTop5) {
  const std::string dir = test::fresh_tmp_dir("attn_swin_predict_test", "cli");
  const json model = {{"seed", 0}, {"model", "swin_t"}};
  const Tensor file = test::torch_ref("swin.weights", {}, model).at("file");
  const std::string weights = dir + "/swin_t.safetensors";
  test::write_bytes(weights, file.data<uint8_t>(), size_t(file.numel()));
  json args = model;
  args["n"] = 6;
  args["weights_enum"] = "Swin_T_Weights";
  const test::Tensors ref = test::torch_ref("swin.predict_reference", {}, args);
  const auto jpeg = ref.at("jpeg").to_vector<int64_t>();
  const auto logits = ref.at("logits").to_vector<double>();
  std::vector<std::string> cmd = {"predict", "--weights", weights, "--model", "swin_t", "--format", "torchvision",
                                  "--json", "--topk", "5", "--batch", "2"};
  for (int64_t k = 0; k < 6; ++k) {
    const Tensor& b = ref.at("img_" + std::to_string(k));
    const std::string img = dir + "/" + std::to_string(k) + (jpeg[size_t(k)] ? ".jpg" : ".png");
    test::write_bytes(img, b.data<uint8_t>(), size_t(b.numel()));
    cmd.push_back(img);
  }
  EXPECT_EQ(std::count(jpeg.begin(), jpeg.end(), 1), 2);
  const test::CliRun r = test::run_attn(dir, cmd);
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["results"].size(), 6u) << r.out;
  for (size_t k = 0; k < 6; ++k) {
    const std::vector<double> row(logits.begin() + std::ptrdiff_t(k * 1000), logits.begin() + std::ptrdiff_t((k + 1) * 1000));
    std::vector<size_t> order(1000);
    std::iota(order.begin(), order.end(), size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return row[a] > row[b]; });
    const double scale = std::max(1.0, std::abs(row[order[0]]));
    const json& top = j["results"][k]["top"];
    ASSERT_EQ(top.size(), 5u);
    for (size_t i = 0; i < 5; ++i) {
      const auto c = top[i]["class"].get<size_t>();
      EXPECT_NEAR(top[i]["logit"].get<double>(), row[c], 1e-4 * scale) << "image " << k << " rank " << i;
      // The rank is torchvision's unless two logits are within the tolerance.
      if (std::abs(row[order[i]] - row[c]) > 2e-4 * scale) EXPECT_EQ(c, order[i]) << "image " << k << " rank " << i;
    }
    EXPECT_EQ(top[0]["name"], data::imagenet_class_names()[top[0]["class"].get<size_t>()]);
  }
}

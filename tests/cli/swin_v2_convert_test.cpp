// `attn convert` and `attn info` for Swin V2 in every layout: seeded random weights written by PyTorch
// in torchvision's layout (torchvision's SwinTransformer V2), timm's and Hugging Face's (the module
// trees of tests/golden/gen/swin_v2_refs.py, HF with its config.json beside the weights), converted to
// attn checkpoints; each checkpoint reopens with its source's convention and gives the reference's
// logits (within 1e-4 * max(1, max |logit|)), and `attn info` describes the model of its config (the
// parameter total, and MACs per stage that sum to the cost per image).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "attn/attn.h"
#include "attn/autograd/grad_mode.h"
#include "attn/models/pretrained.h"
#include "attn/models/registry.h"
#include "attn_cli.h"
#include "files.h"
#include "torch_ref.h"

using namespace attn;
using nlohmann::json;

namespace {

struct Layout {
  std::string name, generator, format;
  json args, model_config;   // model_config: --model-config (none for hf: config.json)
  int64_t H, W;
};

json refs_args(int64_t seed) {
  return {{"seed", seed}, {"patch", 2}, {"embed", 8}, {"depths", {2, 2, 2, 2}}, {"heads", {1, 2, 2, 4}},
          {"window", 8}, {"num_classes", 10}, {"image_size", 64}, {"pretrained", {6, 6, 6, 3}}};
}

std::vector<Layout> layouts() {
  const json tv_args = {{"seed", 41}, {"model", "custom"}, {"patch", 2}, {"embed", 16}, {"depths", {2, 2}},
                        {"heads", {2, 4}}, {"window", 4}, {"num_classes", 10}, {"v2", true}};
  const json tv_model = {{"patch_size", 2}, {"embed_dim", 16}, {"depths", {2, 2}}, {"heads", {2, 4}},
                         {"window_size", 4}, {"num_classes", 10}, {"version", 2}, {"image_size", 16}};
  const json timm_model = {{"patch_size", 2}, {"embed_dim", 8}, {"depths", {2, 2, 2, 2}}, {"heads", {1, 2, 2, 4}},
                           {"window_size", 8}, {"num_classes", 10}, {"version", 2}, {"image_size", 64},
                           {"pretrained_window_sizes", {6, 6, 6, 3}}};
  return {{"torchvision", "swin.weights", "torchvision", tv_args, tv_model, 22, 17},
          {"timm", "swin_v2_refs.timm_v2", "timm", refs_args(42), timm_model, 64, 64},
          {"hf", "swin_v2_refs.hf_v2", "hf", refs_args(43), json(), 61, 90}};
}

int64_t total_of(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex(R"((^|\n)total +(\d+)\n)"))) return -1;
  return std::stoll(m[2].str());
}

}  // namespace

TEST(SwinV2ConvertCli, EveryLayoutConvertsAndReopens) {
  const std::string dir = test::fresh_tmp_dir("attn_swin_v2_convert_test", "cli");
  for (const Layout& l : layouts()) {
    SCOPED_TRACE(l.name);
    const test::Tensors ref = test::torch_ref(l.generator, {}, l.args);
    const std::string sub = dir + "/" + l.name;
    std::filesystem::create_directories(sub);
    const std::string in = sub + "/model.safetensors", out = sub + "/converted.safetensors";
    test::write_bytes(in, ref.at("file").data<uint8_t>(), size_t(ref.at("file").numel()));
    if (ref.count("config"))
      test::write_bytes(sub + "/config.json", ref.at("config").data<uint8_t>(), size_t(ref.at("config").numel()));
    std::vector<std::string> cmd = {"convert", in, "--model", "swin", "--out", out};
    if (!l.model_config.is_null()) cmd.insert(cmd.end(), {"--model-config", l.model_config.dump()});
    const test::CliRun r = test::run_attn(dir, cmd);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("(" + l.format + " layout"), std::string::npos) << r.out;

    models::Pretrained p = models::load_pretrained(models::PretrainedSource::checkpoint(out));
    EXPECT_EQ(p.source, l.format);
    const json cfg = p.model->config();
    EXPECT_EQ(cfg["version"], 2);
    EXPECT_EQ(cfg["convention"], l.format);
    manual_seed(uint64_t(l.H * 1000 + l.W));
    const Tensor x = Tensor::randn({2, 3, l.H, l.W});
    Tensor got;
    {
      NoGradGuard ng;
      got = p.model->forward(x).to(DType::f64);
    }
    const std::string logits_fn = l.name == "torchvision" ? "swin.logits" : l.generator;
    const Tensor want = test::torch_ref(logits_fn, {{"x", x}}, l.args).at("logits");
    double d = 0, mx = 0;
    const auto a = got.to_vector<double>(), e = want.to_vector<double>();
    ASSERT_EQ(a.size(), e.size());
    for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - e[i])), mx = std::max(mx, std::abs(e[i]));
    EXPECT_LE(d, 1e-4 * std::max(1.0, mx)) << l.H << "x" << l.W;

    json over = cfg;
    over.erase("model");
    const test::CliRun info = test::run_attn(dir, {"info", "swin", "--model-config", over.dump()});
    ASSERT_EQ(info.code, 0) << info.err;
    EXPECT_EQ(total_of(info.out), p.model->num_parameters()) << info.out;
    const int64_t macs = p.model->macs_per_image();
    const std::string last = "\n  stage" + std::to_string(cfg["depths"].size()) + " ";
    EXPECT_NE(info.out.find(last), std::string::npos) << info.out;
    char cost[96];
    std::snprintf(cost, sizeof cost, "cost per image: %.4g GMACs", double(macs) / 1e9);
    EXPECT_NE(info.out.find(cost), std::string::npos) << info.out;
  }
  std::filesystem::remove_all(dir);
}

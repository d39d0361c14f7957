// Swin V2 weights in timm's (>= 0.9) and Hugging Face's (Swinv2ForImageClassification) layouts
// against module trees written from their sources, with their own names (tests/golden/gen/
// swin_v2_refs.py): seeded random weights (every tensor drawn; the position-bias MLP large enough for
// its bias to vary), written by PyTorch in the source's layout, loaded through load_pretrained with
// format auto; eval logits within 1e-4 * max(1, max |logit|) at the weights' size and at another one in
// each source's convention. The small config has four stages, window 8 at image_size 64 (maps 32, 16,
// 8, 4: the third stage unshifted, the fourth's window shrunk to 4) and pretrained windows [6, 6, 6, 3].
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "attn/attn.h"
#include "attn/autograd/grad_mode.h"
#include "attn/models/pretrained.h"
#include "attn/models/registry.h"
#include "attn/models/swin.h"
#include "errors.h"
#include "files.h"
#include "torch_ref.h"

using namespace attn;
using nlohmann::json;

namespace {

std::string tmp_dir(const std::string& name) {
  const std::string d = "/tmp/attn_swin_v2_test_" + std::to_string(::getpid()) + "_" + name;
  std::filesystem::create_directories(d);
  return d;
}

json v2_args(int64_t seed) {
  return {{"seed", seed}, {"patch", 2}, {"embed", 8}, {"depths", {2, 2, 2, 2}}, {"heads", {1, 2, 2, 4}},
          {"window", 8}, {"num_classes", 10}, {"image_size", 64}, {"pretrained", {6, 6, 6, 3}}};
}

// The same model in attn's config (for timm, whose files carry no config).
json v2_model(int64_t image_size = 64) {
  return {{"patch_size", 2}, {"embed_dim", 8}, {"depths", {2, 2, 2, 2}}, {"heads", {1, 2, 2, 4}}, {"window_size", 8},
          {"num_classes", 10}, {"version", 2}, {"image_size", image_size}, {"pretrained_window_sizes", {6, 6, 6, 3}},
          {"drop_path", 0.0}};
}

// `ref`'s "file" (and "config" as config.json beside it) written to a fresh folder: the weights' path.
std::string write_layout(const test::Tensors& ref, const std::string& name) {
  const std::string dir = tmp_dir(name);
  test::write_bytes(dir + "/model.safetensors", ref.at("file").data<uint8_t>(), size_t(ref.at("file").numel()));
  if (ref.count("config"))
    test::write_bytes(dir + "/config.json", ref.at("config").data<uint8_t>(), size_t(ref.at("config").numel()));
  return dir + "/model.safetensors";
}

models::Pretrained load(const std::string& path, const json& overrides) {
  models::PretrainedSource s = models::PretrainedSource::foreign(path, "swin");
  s.model_config = overrides;
  return models::load_pretrained(s);
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector<double>()) m = std::max(m, std::abs(v));
  return m;
}

// attn's logits on seeded images (B, 3, H, W) against the reference generator `fn` with `args`.
void expect_logits(models::ImageClassifier& m, const std::string& fn, const json& args, int64_t H, int64_t W,
                   uint64_t seed, const std::string& what) {
  manual_seed(seed);
  const Tensor x = Tensor::randn({2, 3, H, W});
  NoGradGuard ng;
  const Tensor got = m.forward(x).to(DType::f64);
  const Tensor want = test::torch_ref(fn, {{"x", x}}, args).at("logits");
  ASSERT_EQ(got.shape(), want.shape());
  const double mx = max_abs(want), d = max_abs(got - want);
  EXPECT_LE(d, 1e-4 * std::max(1.0, mx)) << what << " " << H << "x" << W;
  EXPECT_GT(mx, 0.1) << "logits this small would hide differences";
  std::printf("  %s %lldx%lld: max |dlogit| %.3g (max |logit| %.3g)\n", what.c_str(), (long long)H, (long long)W, d,
              mx);
}

}  // namespace

// timm's strict rules: at 64 (the fourth stage's window shrunk to its 4 x 4 map); the same weights with
// image_size 128 at 128 x 256 (maps 64 x 128 ... 8 x 16: the last stage shifts along its width only,
// as timm built at that size does); 64 x 96 refused (an 8 x 12 map does not tile by 8).
TEST(SwinV2Layouts, TimmMatchesTimm) {
  const json args = v2_args(31);
  const std::string path = write_layout(test::torch_ref("swin_v2_refs.timm_v2", {}, args), "timm");
  models::Pretrained p = load(path, v2_model());
  EXPECT_EQ(p.source, "timm");
  EXPECT_EQ(p.model->config()["convention"], "timm");
  expect_logits(*p.model, "swin_v2_refs.timm_v2", args, 64, 64, 1, "timm");
  NoGradGuard ng;
  EXPECT_EQ(test::error_of([&] { p.model->forward(Tensor::zeros({1, 3, 64, 96})); }),
            "swin (convention timm, strict): a 64 x 96 image does not divide into 2 x 2 patches whose maps halve "
            "evenly and tile by the 8 x 8 window at every stage (64 x 64 does); resize the image, or use convention "
            "torchvision or hf, which pad");
  models::Pretrained big = load(path, v2_model(128));
  json run = args;
  run["run_size"] = {128, 256};
  expect_logits(*big.model, "swin_v2_refs.timm_v2", run, 128, 256, 2, "timm at 128");
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

// The original release's layout (timm < 0.9): merging at the end of each stage, the classifier "head",
// the coordinates, index and masks stored (renamed as timm's checkpoint_filter_fn does).
TEST(SwinV2Layouts, OldTimmLayoutMatchesTimm) {
  json args = v2_args(35);
  args["old"] = true;
  const std::string path = write_layout(test::torch_ref("swin_v2_refs.timm_v2", {}, args), "timm_old");
  models::Pretrained p = load(path, v2_model());
  EXPECT_EQ(p.source, "timm");
  expect_logits(*p.model, "swin_v2_refs.timm_v2", args, 64, 64, 8, "timm (old layout)");
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

// Weights trained at window 8 run at window 4 (timm's window12to16 fine-tuning, scaled down): V2's bias
// MLP is the same at any window, only the coordinates change; with pretrained_window_sizes 8 they are
// those timm builds (the reference: timm's tree at window 4, pretrained windows 8, the same weights).
TEST(SwinV2Layouts, AnotherWindowWithPretrainedWindows) {
  json args = v2_args(36);
  args["pretrained"] = json::array();
  const std::string path = write_layout(test::torch_ref("swin_v2_refs.timm_v2", {}, args), "timm_w4");
  json cfg = v2_model();
  cfg["window_size"] = 4;
  cfg["pretrained_window_sizes"] = {8, 8, 8, 8};
  models::Pretrained p = load(path, cfg);
  json ref = args;
  ref["window"] = 4;
  ref["pretrained"] = {8, 8, 8, 8};
  expect_logits(*p.model, "swin_v2_refs.timm_v2", ref, 64, 64, 9, "timm, window 8 -> 4");
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

// The published shapes at 256: timm's swinv2_tiny_window16_256 (the last stage's window shrunk to 8)
// and transformers' swinv2-tiny-patch4-window8-256, batch 1.
TEST(SwinV2Layouts, TinyAt256MatchesTheirReferencesSlow) {
  const json tiny = {{"seed", 37}, {"patch", 4}, {"embed", 96}, {"depths", {2, 2, 6, 2}}, {"heads", {3, 6, 12, 24}},
                     {"num_classes", 1000}, {"image_size", 256}};
  json timm = tiny;
  timm["window"] = 16;
  const std::string tp = write_layout(test::torch_ref("swin_v2_refs.timm_v2", {}, timm), "tiny_timm");
  models::Pretrained t = load(tp, {{"version", 2}, {"window_size", 16}, {"image_size", 256}, {"drop_path", 0.0}});
  std::filesystem::remove_all(std::filesystem::path(tp).parent_path());
  manual_seed(10);
  const Tensor x = Tensor::randn({1, 3, 256, 256});
  NoGradGuard ng;
  const Tensor a = t.model->forward(x).to(DType::f64), e = test::torch_ref("swin_v2_refs.timm_v2", {{"x", x}}, timm).at("logits");
  EXPECT_LE(max_abs(a - e), 1e-4 * std::max(1.0, max_abs(e)));
  std::printf("  timm swinv2_tiny_window16_256: max |dlogit| %.3g (max |logit| %.3g)\n", max_abs(a - e), max_abs(e));
  json hf = tiny;
  hf["window"] = 8;
  const std::string hp = write_layout(test::torch_ref("swin_v2_refs.hf_v2", {}, hf), "tiny_hf");
  models::Pretrained h = load(hp, {{"drop_path", 0.0}});
  std::filesystem::remove_all(std::filesystem::path(hp).parent_path());
  const Tensor b = h.model->forward(x).to(DType::f64), f = test::torch_ref("swin_v2_refs.hf_v2", {{"x", x}}, hf).at("logits");
  EXPECT_LE(max_abs(b - f), 1e-4 * std::max(1.0, max_abs(f)));
  std::printf("  hf swinv2-tiny-patch4-window8-256: max |dlogit| %.3g (max |logit| %.3g)\n", max_abs(b - f), max_abs(f));
}

// timm with strict_img_size=False (convention timm_dynamic): built at 64, run at 62 x 90 (31 x 45 ...
// 4 x 6 maps; windows and shifts as built; roll, then pad).
TEST(SwinV2Layouts, TimmDynamicMatchesTimm) {
  json args = v2_args(32);
  args["dynamic"] = true;
  const std::string path = write_layout(test::torch_ref("swin_v2_refs.timm_v2", {}, args), "timm_dyn");
  json cfg = v2_model();
  cfg["convention"] = "timm_dynamic";
  models::Pretrained p = load(path, cfg);
  expect_logits(*p.model, "swin_v2_refs.timm_v2", args, 64, 64, 3, "timm_dynamic");
  expect_logits(*p.model, "swin_v2_refs.timm_v2", args, 62, 90, 4, "timm_dynamic");
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

// transformers: config.json beside the weights gives the model (V2, pretrained windows, 10 labels);
// at 64, and at 61 x 90 (the image padded to 62 x 90; blocks pad, then roll, shifts as built).
TEST(SwinV2Layouts, HfMatchesTransformers) {
  const json args = v2_args(33);
  const std::string path = write_layout(test::torch_ref("swin_v2_refs.hf_v2", {}, args), "hf");
  models::Pretrained p = load(path, {{"drop_path", 0.0}});
  EXPECT_EQ(p.source, "hf");
  EXPECT_EQ(p.model->config()["convention"], "hf");
  EXPECT_EQ(p.model->config()["version"], 2);
  EXPECT_EQ(p.model->config()["pretrained_window_sizes"], json({6, 6, 6, 3}));
  ASSERT_EQ(p.labels.size(), 10u);
  EXPECT_EQ(p.labels[3], "class_3");
  expect_logits(*p.model, "swin_v2_refs.hf_v2", args, 64, 64, 5, "hf");
  expect_logits(*p.model, "swin_v2_refs.hf_v2", args, 61, 90, 6, "hf");
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

// Files of older transformers store relative_coords_table and relative_position_index: accepted, and a
// coordinates table that is not the model's (its config without the pretrained windows) named.
TEST(SwinV2Layouts, HfStoredBuffersChecked) {
  json args = v2_args(34);
  args["store_buffers"] = true;
  const auto ref = test::torch_ref("swin_v2_refs.hf_v2", {}, args);
  const std::string path = write_layout(ref, "hf_buffers");
  models::Pretrained p = load(path, {{"drop_path", 0.0}});
  expect_logits(*p.model, "swin_v2_refs.hf_v2", args, 64, 64, 7, "hf (buffers stored)");
  const std::string e = test::error_of([&] { load(path, {{"pretrained_window_sizes", json::array()}}); });
  EXPECT_NE(e.find("mis-shaped: swinv2.encoder.layers.0.blocks.0.attention.self.relative_coords_table: the file's "
                   "coordinates are not the model's (set pretrained_window_sizes as the weights were trained)"),
            std::string::npos) << e;
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

// A V2 file for a V1 model: the V1 keys the file lacks, and its V2 keys, named in its layout.
TEST(SwinV2Layouts, V2WeightsForAV1ModelNameTheKeys) {
  const std::string path = write_layout(test::torch_ref("swin_v2_refs.timm_v2", {}, v2_args(31)), "timm_v1");
  json cfg = v2_model();
  cfg["version"] = 1;
  cfg["pretrained_window_sizes"] = json::array();
  const std::string e = test::error_of([&] { load(path, cfg); });
  EXPECT_NE(e.find("missing: "), std::string::npos) << e;
  EXPECT_NE(e.find("layers.0.blocks.0.attn.qkv.bias [24]"), std::string::npos) << e;
  EXPECT_NE(e.find("layers.0.blocks.0.attn.relative_position_bias_table [225, 1]"), std::string::npos) << e;
  EXPECT_NE(e.find("unexpected: "), std::string::npos) << e;
  EXPECT_NE(e.find("layers.0.blocks.0.attn.q_bias"), std::string::npos) << e;
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

// Hugging Face's Swinv2Config: model_type swinv2, pretrained_window_sizes (all zeros: none).
TEST(SwinV2Layouts, HfConfigReader) {
  models::SwinConfig c = models::swin_config_from_hf({{"model_type", "swinv2"}, {"window_size", 8},
                                                      {"image_size", 256}, {"pretrained_window_sizes", {0, 0, 0, 0}}});
  EXPECT_EQ(c.version, 2);
  EXPECT_TRUE(c.pretrained_window_sizes.empty());
  c = models::swin_config_from_hf({{"model_type", "swinv2"}, {"pretrained_window_sizes", {12, 12, 12, 6}}});
  EXPECT_EQ(c.pretrained_window_sizes, (std::vector<int64_t>{12, 12, 12, 6}));
  EXPECT_EQ(models::swin_config_from_hf({{"model_type", "swin"}}).version, 1);
  EXPECT_EQ(test::error_of([] { models::swin_config_from_hf({{"model_type", "swinv3"}}); }),
            "foreign weights: config.json model_type must be 'swin' (Swin V1) or 'swinv2' (Swin V2), got 'swinv3'");
  const std::string e = test::error_of([] {
    models::swin_config_from_hf({{"model_type", "swinv2"}, {"pretrained_window_sizes", {-1}}});
  });
  EXPECT_NE(e.find("pretrained_window_sizes[0]"), std::string::npos) << e;
}

// The stage windows and shifts each convention builds (swin_v2_tiny at 256 with window 16: the last
// stage's 8 x 8 map shrinks its window under timm's and transformers' rules, not torchvision's).
TEST(SwinV2Layouts, StageWindowsPerConvention) {
  models::SwinConfig c;
  c.version = 2;
  c.image_size = 256;
  c.window_size = 16;
  for (const std::string conv : {"torchvision", "hf", "timm", "timm_dynamic"}) {
    c.convention = conv;
    EXPECT_EQ(models::swin_stage_window(c, 2), 16) << conv;
    EXPECT_EQ(models::swin_stage_window(c, 3), conv == "torchvision" ? 16 : 8) << conv;
  }
  c.version = 1;
  c.convention = "hf";
  EXPECT_EQ(models::swin_stage_window(c, 3), 16);
}

// Configs over the limits (models::SwinLimits) are refused before anything is built, with the key.
TEST(SwinV2Layouts, ConfigLimits) {
  auto err = [](const json& over) { return test::error_of([&] { models::create_shapes_only("swin", over); }); };
  EXPECT_EQ(err({{"embed_dim", 16384}}), "swin: expected embed_dim in [1, 8192] (the last of 4 stages is 8 times as "
                                         "wide, at most 65536), got 16384");
  EXPECT_EQ(err({{"depths", json::array({2, 2, 2, 2, 2, 2, 2, 2, 2})}, {"heads", json::array({1, 1, 1, 1, 1, 1, 1, 1, 1})}}),
            "swin: expected at most 8 stages, got 9");
  EXPECT_EQ(err({{"depths", {600, 2, 6, 2}}}), "swin: stage 1 needs a depth in [1, 256] and a head count dividing its "
                                               "width 96, got depth 600 and 3 heads");
  EXPECT_EQ(err({{"window_size", 65}}).rfind("swin: expected window_size in [1, 64], ", 0), 0u);
  EXPECT_EQ(err({{"version", 2}, {"pretrained_window_sizes", {12, 12}}}),
            "swin: expected pretrained_window_sizes empty or one per stage (4), each 0 or (V2 only) in [2, 64], got "
            "[12,12] for Swin V2");
  EXPECT_EQ(err({{"pretrained_window_sizes", {7, 7, 7, 7}}}),
            "swin: expected pretrained_window_sizes empty or one per stage (4), each 0 or (V2 only) in [2, 64], got "
            "[7,7,7,7] for Swin V1");
  // 64 blocks of width 4096 with 64 x 64 windows: 1.4e10 elements.
  const std::string e = err({{"embed_dim", 4096}, {"depths", {64}}, {"heads", {1}}, {"window_size", 64}});
  EXPECT_EQ(e.rfind("swin: expected a model of at most 8.58993e+09 parameter and buffer elements", 0), 0u) << e;
  // swin_v2_b at 1536 (SwinV2 fine-tuning sizes) is within them.
  EXPECT_EQ(err({{"embed_dim", 128}, {"heads", {4, 8, 16, 32}}, {"depths", {2, 2, 18, 2}}, {"version", 2},
                 {"window_size", 24}, {"image_size", 1536}}),
            test::kNoError);
}

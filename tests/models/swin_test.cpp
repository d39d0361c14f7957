// Swin Transformer against torchvision 0.14's SwinTransformer: seeded random weights (every tensor
// drawn, the heads and the position-bias tables included) written by PyTorch in torchvision's layout
// and loaded through load_pretrained; eval-mode logits, and the gradients of one train-mode
// cross-entropy step (dropout and stochastic depth 0), each within 1e-4 * max(1, max |reference|).
// Small custom configs (V1 and V2) on odd sizes per commit; swin_t and swin_s at 224, 300 and
// 250 x 333, swin_v2_t at 256, 300 and 250 x 333 ("Slow").
// timm's (>= 0.9) and Hugging Face's layouts (the torchvision weights renamed by the golden script) and
// each source's input-size rules (written in Python in the golden script), the multi-scale
// forward_intermediates against torchvision's features, MACs per stage against hook counts.
// Parameter totals of the registry variants against torchvision's.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "attn/attn.h"
#include "attn/autograd/grad_mode.h"
#include "attn/core/profile.h"
#include "attn/models/pretrained.h"
#include "attn/models/swin.h"
#include "attn/ops/loss.h"
#include "errors.h"
#include "files.h"
#include "slow.h"
#include "torch_ref.h"

using namespace attn;
using nlohmann::json;

namespace {

std::string tmp_path(const std::string& name) {
  return "/tmp/attn_swin_test_" + std::to_string(::getpid()) + "_" + name;
}

std::vector<std::string> lines(const Tensor& bytes) {
  std::vector<std::string> out;
  std::string cur;
  for (int64_t i = 0; i < bytes.numel(); ++i) {
    const char c = char(bytes.data<uint8_t>()[i]);
    if (c == '\n') out.push_back(cur), cur.clear();
    else cur += c;
  }
  out.push_back(cur);
  return out;
}

struct ParityResult {
  double logit_diff = 0, logit_max = 0, worst_ratio = 0, worst_diff = 0, worst_max = 0;
  std::string worst;
};

std::shared_ptr<models::ImageClassifier> load(const std::string& path, const std::string& model, json overrides,
                                              bool pack) {
  models::PretrainedSource s = models::PretrainedSource::foreign(path, model);
  s.format = "torchvision";
  overrides["drop_path"] = 0.0;
  s.model_config = overrides;
  s.pack_linear_weights = pack;
  models::Pretrained p = models::load_pretrained(s);
  EXPECT_EQ(p.source, "torchvision");
  return p.model;
}

// The weights torch drew for `args`, written to a file and loaded as model `model` with `overrides`
// (as load_pretrained gives it for inference, Linear weights packed, for the logits; unpacked for the
// training step); images (B, 3, H, W) and labels from `seed`.
ParityResult check_parity(const std::string& model, const json& args, const json& overrides, int64_t B, int64_t H,
                          int64_t W, uint64_t seed) {
  const Tensor file = test::torch_ref("swin.weights", {}, args).at("file");
  const std::string path = tmp_path(model + ".safetensors");
  test::write_bytes(path, file.data<uint8_t>(), size_t(file.numel()));
  auto m = load(path, model, overrides, /*pack=*/true);
  const int64_t classes = m->config()["num_classes"].get<int64_t>();
  manual_seed(seed);
  const Tensor x = Tensor::randn({B, 3, H, W});
  std::vector<int64_t> labels;
  for (int64_t b = 0; b < B; ++b) labels.push_back((b * 7 + int64_t(seed)) % classes);
  const Tensor y = Tensor::from_vector(labels, {B});
  Tensor logits;
  {
    NoGradGuard ng;
    logits = m->forward(x);
  }
  m = load(path, model, overrides, /*pack=*/false);
  std::remove(path.c_str());
  m->train();
  cross_entropy(m->forward(x), y).backward();
  test::Tensors in = {{"x", x}, {"y", y}};
  const auto params = m->named_parameters();
  for (const auto& [name, t] : params) {
    EXPECT_TRUE(t.grad().defined()) << name;
    if (t.grad().defined()) in["g." + name] = t.grad();
  }
  auto ref = test::torch_ref("swin.parity", in, args);

  ParityResult r;
  const auto a = logits.to_vector<double>(), e = ref.at("logits").to_vector<double>();
  EXPECT_EQ(a.size(), e.size());
  for (size_t i = 0; i < a.size() && i < e.size(); ++i)
    r.logit_diff = std::max(r.logit_diff, std::abs(a[i] - e[i])), r.logit_max = std::max(r.logit_max, std::abs(e[i]));
  EXPECT_LE(r.logit_diff, 1e-4 * std::max(1.0, r.logit_max)) << "logits, max |logit| " << r.logit_max;

  const std::vector<std::string> names = lines(ref.at("names"));
  const auto diff = ref.at("gmax_abs_diff").to_vector<double>(), gmax = ref.at("gmax_ref").to_vector<double>();
  EXPECT_EQ(ref.at("gmissing").to_vector<int64_t>()[0], 0);
  EXPECT_EQ(names.size(), params.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const double bound = 1e-4 * std::max(1.0, gmax[i]);
    EXPECT_LE(diff[i], bound) << "gradient of " << names[i] << " (max |grad| " << gmax[i] << ")";
    if (diff[i] / bound > r.worst_ratio) {
      r.worst_ratio = diff[i] / bound, r.worst = names[i];
      r.worst_diff = diff[i], r.worst_max = gmax[i];
    }
  }
  std::printf("  %s %lldx%lld: max |dlogit| %.3g (max |logit| %.3g); worst gradient %s: max |d| %.3g (max |grad| "
              "%.3g), %.3g of its bound\n", model.c_str(), (long long)H, (long long)W, r.logit_diff, r.logit_max,
              r.worst.c_str(), r.worst_diff, r.worst_max, r.worst_ratio);
  return r;
}

// A small V1 / V2 config: patch 2, widths 16 / 32, two blocks per stage (so a shifted one), window 4.
json small_args(bool v2) {
  return {{"seed", v2 ? 5 : 4}, {"model", "custom"}, {"patch", 2}, {"embed", 16}, {"depths", {2, 2}},
          {"heads", {2, 4}}, {"window", 4}, {"num_classes", 10}, {"v2", v2}};
}
json small_model(bool v2) {
  return {{"patch_size", 2}, {"embed_dim", 16}, {"depths", {2, 2}}, {"heads", {2, 4}}, {"window_size", 4},
          {"num_classes", 10}, {"version", v2 ? 2 : 1}, {"image_size", 16}};
}

}  // namespace

// 8 x 30: a 4 x 15 map, where the window covers the height (no shift along it) but not the width;
// 22 x 17: 11 x 8, odd sides padded by the merging; 16 x 16: whole windows.
TEST(Swin, SmallV1MatchesTorchvision) {
  for (auto [h, w] : {std::pair<int64_t, int64_t>{8, 30}, {22, 17}, {16, 16}})
    check_parity("swin", small_args(false), small_model(false), 2, h, w, uint64_t(h * 100 + w));
}

TEST(Swin, SmallV2MatchesTorchvision) {
  for (auto [h, w] : {std::pair<int64_t, int64_t>{8, 30}, {22, 17}})
    check_parity("swin", small_args(true), small_model(true), 2, h, w, uint64_t(h * 100 + w));
}

// The buffers attn computes itself (relative_position_index; V2's relative_coords_table) equal
// torchvision's exactly: a load would overwrite them, so compare a freshly built model's.
TEST(Swin, BuffersMatchTorchvision) {
  for (bool v2 : {false, true}) {
    const Tensor file = test::torch_ref("swin.weights", {}, small_args(v2)).at("file");
    const io::SafetensorsFile f = io::parse_safetensors(file.data<uint8_t>(), size_t(file.numel()), "<torch>");
    auto m = models::create_model("swin", small_model(v2));
    size_t checked = 0;
    for (const auto& [name, t] : m->named_buffers()) {
      const Tensor* ref = f.find(name);
      ASSERT_NE(ref, nullptr) << name;
      EXPECT_TENSOR_NEAR(t.to(DType::f64), ref->to(DType::f64), 0, 0) << name;
      ++checked;
    }
    EXPECT_EQ(checked, v2 ? 8u : 4u);
  }
}

TEST(Swin, SwinT224MatchesTorchvisionSlow) {
  check_parity("swin_t", {{"seed", 0}, {"model", "swin_t"}}, json::object(), 2, 224, 224, 1);
}

TEST(Swin, SwinT300MatchesTorchvisionSlow) {
  check_parity("swin_t", {{"seed", 0}, {"model", "swin_t"}}, json::object(), 2, 300, 300, 2);
}

TEST(Swin, SwinT250x333MatchesTorchvisionSlow) {
  check_parity("swin_t", {{"seed", 0}, {"model", "swin_t"}}, json::object(), 2, 250, 333, 3);
}

// V2: cosine attention with the clamped logit scale (one head above the clamp), the continuous
// position bias MLP, post-norm residuals, PatchMergingV2.
TEST(Swin, SwinV2T256MatchesTorchvisionSlow) {
  check_parity("swin_v2_t", {{"seed", 0}, {"model", "swin_v2_t"}}, json::object(), 2, 256, 256, 4);
}

// V2 on sizes that do not tile: 300 x 300 (75 x 75 patches, padded to windows, odd maps merged) and
// 250 x 333 (62 x 83).
TEST(Swin, SwinV2T300MatchesTorchvisionSlow) {
  check_parity("swin_v2_t", {{"seed", 0}, {"model", "swin_v2_t"}}, json::object(), 2, 300, 300, 5);
}

TEST(Swin, SwinV2T250x333MatchesTorchvisionSlow) {
  check_parity("swin_v2_t", {{"seed", 0}, {"model", "swin_v2_t"}}, json::object(), 2, 250, 333, 6);
}

// swin_s (18 blocks in the third stage) at the three sizes: minutes each, so only with ATTN_TEST_SLOW=1.
TEST(Swin, SwinS224MatchesTorchvisionSlow) {
  if (!test::longest_tests_enabled()) GTEST_SKIP() << "ATTN_TEST_SLOW=1 runs it";
  check_parity("swin_s", {{"seed", 1}, {"model", "swin_s"}}, json::object(), 2, 224, 224, 7);
}

TEST(Swin, SwinS300MatchesTorchvisionSlow) {
  if (!test::longest_tests_enabled()) GTEST_SKIP() << "ATTN_TEST_SLOW=1 runs it";
  check_parity("swin_s", {{"seed", 1}, {"model", "swin_s"}}, json::object(), 2, 300, 300, 8);
}

TEST(Swin, SwinS250x333MatchesTorchvisionSlow) {
  if (!test::longest_tests_enabled()) GTEST_SKIP() << "ATTN_TEST_SLOW=1 runs it";
  check_parity("swin_s", {{"seed", 1}, {"model", "swin_s"}}, json::object(), 2, 250, 333, 9);
}

TEST(Swin, ImageBelowOnePatchIsAnError) {
  auto m = models::create_model("swin", small_model(false));
  EXPECT_EQ(test::error_of([&] { m->forward(Tensor::zeros({1, 3, 1, 16})); }),
            "swin: expected images of at least one patch (2 x 2 pixels), got 1 x 16");
  EXPECT_EQ(test::error_of([&] { m->forward(Tensor::zeros({1, 1, 16, 16})); }),
            "swin: expected images (B, 3, H, W), got shape [1, 1, 16, 16]");
  // Every version and convention (hf pads other sizes to whole patches, not an image under one).
  for (const std::string conv : {"torchvision", "hf", "timm", "timm_dynamic"}) {
    json cfg = small_model(true);
    cfg["convention"] = conv;
    auto v2 = models::create_model("swin", cfg);
    EXPECT_EQ(test::error_of([&] { v2->forward(Tensor::zeros({2, 3, 16, 1})); }),
              "swin: expected images of at least one patch (2 x 2 pixels), got 16 x 1") << conv;
  }
}

// Weights of another Swin, or a layout other than torchvision's: errors naming the file and the model.
TEST(Swin, LoadErrorsNameTheModel) {
  const Tensor file = test::torch_ref("swin.weights", {}, small_args(false)).at("file");
  const std::string path = tmp_path("small.safetensors");
  test::write_bytes(path, file.data<uint8_t>(), size_t(file.numel()));
  json v2 = small_model(true);
  const std::string e = test::error_of([&] { load(path, "swin", v2, true); });
  EXPECT_TRUE(e.starts_with("foreign weights: the weights '" + path + "' (layout: torchvision) do not match model "
                            "'swin' (Swin V2, embed_dim 16, depths [2,2], window 4, 10 classes): ")) << e;
  EXPECT_NE(e.find("features.1.0.attn.logit_scale"), std::string::npos) << e;
  models::PretrainedSource s = models::PretrainedSource::foreign(path, "swin");
  s.format = "timm";
  s.model_config = small_model(false);
  const std::string et = test::error_of([&] { models::load_pretrained(s); });
  EXPECT_TRUE(et.starts_with("foreign weights: the weights '" + path + "' (layout: timm) do not match model 'swin' "
                             "(Swin V1, embed_dim 16, depths [2,2], window 4, 10 classes): missing: "
                             "patch_embed.proj.weight [16, 3, 2, 2]")) << et;
  s.format = "torchvision";
  EXPECT_EQ(test::error_of([&] { models::load_pretrained(s); }), test::kNoError);
  std::remove(path.c_str());
}

// torchvision's totals (computed by the golden script from torchvision.models) against
// num_parameters(); MACs printed (torchvision documents swin_t at 4.49 GFLOPS, i.e. multiply-adds).
TEST(Swin, ParameterTotalsMatchTorchvision) {
  const std::vector<std::string> names = {"swin_t", "swin_s", "swin_b", "swin_v2_t", "swin_v2_s", "swin_v2_b"};
  auto ref = test::torch_ref("vit.torchvision_param_counts", {}, {{"models", names}});
  const auto want = ref.at("counts").to_vector<int64_t>();
  for (size_t i = 0; i < names.size(); ++i) {
    nn::init::SkipRandomInit skip(nn::init::SkipRandomInit::Fill::none);
    auto m = models::create_model(names[i]);
    EXPECT_EQ(m->num_parameters(), want[i]) << names[i];
    std::printf("  %-10s %lld parameters (torchvision %lld), %.3f GMACs at %lld\n", names[i].c_str(),
                (long long)m->num_parameters(), (long long)want[i], double(m->macs_per_image()) / 1e9,
                (long long)m->config()["image_size"].get<int64_t>());
  }
}

// ---- timm (>= 0.9) and Hugging Face layouts ----

namespace {

// A four-stage V1 config (every merging and stage index of the layouts): patch 2, widths 8 ... 64,
// window 4.
json small4_args() {
  return {{"seed", 6}, {"model", "custom"}, {"patch", 2}, {"embed", 8}, {"depths", {2, 2, 2, 2}},
          {"heads", {1, 2, 2, 4}}, {"window", 4}, {"num_classes", 10}, {"v2", false}, {"image_size", 64}};
}
json small4_model() {
  return {{"patch_size", 2}, {"embed_dim", 8}, {"depths", {2, 2, 2, 2}}, {"heads", {1, 2, 2, 4}}, {"window_size", 4},
          {"num_classes", 10}, {"version", 1}, {"image_size", 64}};
}

// The four-stage model's weights renamed to `layout` by the golden script (HF: with its config.json
// beside them), loaded with format auto (so in the source's input-size convention); eval logits
// against the source's rules written in Python on the same weights: torchvision's model for timm
// (sizes that tile), hf_convention_logits for HF.
double foreign_layout_diff(const std::string& layout, int64_t H, int64_t W, uint64_t seed,
                           const json& base = small4_args(), const json& timm_model = small4_model(), int64_t B = 2) {
  json args = base;
  args["layout"] = layout;
  const auto ref = test::torch_ref("swin.foreign_weights", {}, args);
  const std::string dir = tmp_path(layout);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/model.safetensors";
  test::write_bytes(path, ref.at("file").data<uint8_t>(), size_t(ref.at("file").numel()));
  if (layout == "hf") test::write_bytes(dir + "/config.json", ref.at("config").data<uint8_t>(),
                                        size_t(ref.at("config").numel()));
  models::PretrainedSource s = models::PretrainedSource::foreign(path, "swin");
  s.model_config = layout.starts_with("timm") ? timm_model : json{{"drop_path", 0.0}};
  models::Pretrained p = models::load_pretrained(s);
  std::filesystem::remove_all(dir);
  const std::string source = layout.starts_with("timm") ? "timm" : layout;
  EXPECT_EQ(p.source, source);
  EXPECT_EQ(p.model->config()["convention"], source);
  if (layout == "hf") {
    EXPECT_EQ(p.labels.size(), size_t(base["num_classes"].get<int64_t>()));
    if (!p.labels.empty()) EXPECT_EQ(p.labels[3], "class_3");
  }
  manual_seed(seed);
  const Tensor x = Tensor::randn({B, 3, H, W});
  NoGradGuard ng;
  const auto a = p.model->forward(x).to_vector<double>();
  const std::string fn = layout == "hf" ? "swin.hf_convention_logits" : "swin.logits";
  const auto e = test::torch_ref(fn, {{"x", x}}, base).at("logits").to_vector<double>();
  EXPECT_EQ(a.size(), e.size());
  double diff = 0, mx = 0;
  for (size_t i = 0; i < a.size() && i < e.size(); ++i) diff = std::max(diff, std::abs(a[i] - e[i])), mx = std::max(mx, std::abs(e[i]));
  EXPECT_LE(diff, 1e-4 * std::max(1.0, mx)) << layout << " " << H << "x" << W;
  std::printf("  %s layout %lldx%lld: max |dlogit| %.3g (max |logit| %.3g)\n", layout.c_str(), (long long)H,
              (long long)W, diff, mx);
  return diff;
}

}  // namespace

// 64 x 64: maps 32, 16, 8, 4 (the last as large as the window).
TEST(Swin, TimmLayoutMatchesTorchvision) { foreign_layout_diff("timm", 64, 64, 11); }

// timm < 0.9's layout (the original release's): the merging at the end of each stage, buffers stored.
TEST(Swin, OldTimmLayoutMatchesTorchvision) { foreign_layout_diff("timm_old", 64, 64, 15); }

// 64 x 64, and 61 x 90: padded to 62 x 90, maps 31 x 45 ... 4 x 6 (unshifted under HF's rule).
TEST(Swin, HfLayoutMatchesItsReference) {
  foreign_layout_diff("hf", 64, 64, 12);
  foreign_layout_diff("hf", 61, 90, 13);
}

// swin_t's shape in Hugging Face's layout at 250 x 333: padded to 252 x 336 (63 x 84 patches, where
// torchvision floors to 62 x 83), then 32 x 42, 16 x 21, 8 x 11.
TEST(Swin, HfSwinT250x333MatchesItsReferenceSlow) {
  const json args = {{"seed", 7}, {"model", "custom"}, {"patch", 4}, {"embed", 96}, {"depths", {2, 2, 6, 2}},
                     {"heads", {3, 6, 12, 24}}, {"window", 7}, {"num_classes", 1000}, {"v2", false}, {"image_size", 224}};
  foreign_layout_diff("hf", 250, 333, 14, args, json::object(), 1);
}

// A key the layout lacks or does not know is named as the layout spells it.
TEST(Swin, ForeignLayoutErrorsNameTheKey) {
  json args = small_args(false);
  args["layout"] = "timm";
  const auto ref = test::torch_ref("swin.foreign_weights", {}, args);
  const io::SafetensorsFile f = io::parse_safetensors(ref.at("file").data<uint8_t>(), size_t(ref.at("file").numel()),
                                                      "<torch>");
  io::TensorList sd;
  for (const auto& [k, t] : f.tensors)
    if (k != "layers.1.blocks.0.mlp.fc1.weight") sd.emplace_back(k == "norm.bias" ? "norm.beta" : k, t);
  const std::string path = tmp_path("broken.safetensors");
  io::save_safetensors(path, sd);
  models::PretrainedSource s = models::PretrainedSource::foreign(path, "swin");
  s.model_config = small_model(false);
  const std::string e = test::error_of([&] { models::load_pretrained(s); });
  std::remove(path.c_str());
  EXPECT_EQ(e, "foreign weights: the weights '" + path + "' (layout: timm) do not match model 'swin' (Swin V1, "
               "embed_dim 16, depths [2,2], window 4, 10 classes): missing: layers.1.blocks.0.mlp.fc1.weight [128, 32], "
               "norm.bias [32]; unexpected: norm.beta");
}

// Each source's eval transform: timm's crop_pct 0.9 bicubic; transformers' ViTFeatureExtractor
// (224 squashed, bicubic); both with ImageNet's mean and std.
TEST(Swin, ForeignPreprocessPresets) {
  const data::Preprocess t = data::preset_for("swin", data::WeightSource::timm, 224);
  EXPECT_EQ(t.resize_size, 248);
  EXPECT_EQ(t.crop_size, 224);
  EXPECT_FALSE(t.squash);
  EXPECT_EQ(t.interpolation, data::Resample::bicubic);
  const data::Preprocess h = data::preset_for("swin", data::WeightSource::hf, 224);
  EXPECT_EQ(h.resize_size, 224);
  EXPECT_TRUE(h.squash);
  EXPECT_EQ(h.interpolation, data::Resample::bicubic);
  EXPECT_EQ(h.mean, data::Preprocess{}.mean);
  EXPECT_EQ(t.mean, data::Preprocess{}.mean);
}

// timm weights of window 4 loaded into a window-5 model: each position-bias table resized bicubic
// (timm's resize_rel_pos_bias_table), against torchvision's window-5 model given the same tables.
TEST(Swin, BiasTablesResizedToAnotherWindow) {
  json args = small_args(false);
  args["layout"] = "timm";
  const auto ref = test::torch_ref("swin.foreign_weights", {}, args);
  const std::string path = tmp_path("w4.safetensors");
  test::write_bytes(path, ref.at("file").data<uint8_t>(), size_t(ref.at("file").numel()));
  models::PretrainedSource s = models::PretrainedSource::foreign(path, "swin");
  json cfg = small_model(false);
  cfg["window_size"] = 5;
  s.model_config = cfg;
  models::Pretrained p = models::load_pretrained(s);
  std::remove(path.c_str());
  manual_seed(21);
  const Tensor x = Tensor::randn({2, 3, 20, 20});
  json rargs = small_args(false);
  rargs["new_window"] = 5;
  NoGradGuard ng;
  EXPECT_TENSOR_NEAR(p.model->forward(x).to(DType::f64),
                     test::torch_ref("swin.resized_window_logits", {{"x", x}}, rargs).at("logits"), 1e-4, 0);
}

// ---- input sizes in each source's convention ----

namespace {

std::shared_ptr<models::ImageClassifier> small_with(const std::string& convention, uint64_t seed) {
  const Tensor file = test::torch_ref("swin.weights", {}, small_args(false)).at("file");
  const std::string path = tmp_path("conv_" + convention + std::to_string(seed) + ".safetensors");
  test::write_bytes(path, file.data<uint8_t>(), size_t(file.numel()));
  json cfg = small_model(false);
  cfg["convention"] = convention;
  auto m = load(path, "swin", cfg, true);
  std::remove(path.c_str());
  return m;
}

}  // namespace

// transformers' rules: 17 x 30 pads to 18 x 30 (a 9 x 15 map, where torchvision floors to 8 x 15);
// 16 x 30: the second stage's 4 x 8 map has min side = window, so no shift along either side (torchvision
// keeps the shift along the 8); 16 x 16: the plain case.
TEST(Swin, HfConventionMatchesItsReference) {
  auto m = small_with("hf", 1);
  for (auto [h, w] : {std::pair<int64_t, int64_t>{17, 30}, {16, 30}, {16, 16}}) {
    manual_seed(uint64_t(h * 100 + w));
    const Tensor x = Tensor::randn({2, 3, h, w});
    NoGradGuard ng;
    const Tensor got = m->forward(x).to(DType::f64);
    const Tensor want = test::torch_ref("swin.hf_convention_logits", {{"x", x}}, small_args(false)).at("logits");
    const Tensor tv = test::torch_ref("swin.logits", {{"x", x}}, small_args(false)).at("logits");
    auto maxabs = [](const Tensor& t) {
      double m = 0;
      for (double v : t.to_vector<double>()) m = std::max(m, std::abs(v));
      return m;
    };
    const double mx = maxabs(want), d = maxabs(got - want), dtv = maxabs(tv - want);
    EXPECT_LE(d, 1e-4 * std::max(1.0, mx)) << h << "x" << w;
    std::printf("  hf convention %lldx%lld: max |dlogit| %.3g (max |logit| %.3g); torchvision's rules differ by %.3g\n",
                (long long)h, (long long)w, d, mx, dtv);
    if (h * w != 256) EXPECT_GT(dtv, 1e-5) << "the size should tell the rules apart";
  }
  NoGradGuard ng;
  EXPECT_EQ(test::error_of([&] { m->forward(Tensor::zeros({1, 3, 12, 30})); }),
            "swin (convention hf): a 3 x 8 map is smaller than the 4 x 4 window, which transformers' Swin cannot run "
            "either (its window shrinks to 3 but its position bias stays 16 x 16); use a larger image");
}

// timm's strict mode: 16 x 16 (8 x 8 then 4 x 4 maps) runs as torchvision; 18 x 16 (a 9-row map) does not.
TEST(Swin, TimmConventionIsStrict) {
  auto m = small_with("timm", 2);
  manual_seed(3);
  const Tensor x = Tensor::randn({2, 3, 16, 16});
  NoGradGuard ng;
  EXPECT_TENSOR_NEAR(m->forward(x).to(DType::f64), test::torch_ref("swin.logits", {{"x", x}}, small_args(false)).at("logits"),
                     1e-4, 0);
  EXPECT_EQ(test::error_of([&] { m->forward(Tensor::zeros({1, 3, 18, 16})); }),
            "swin (convention timm, strict): a 18 x 16 image does not divide into 2 x 2 patches whose maps halve evenly "
            "and tile by the 4 x 4 window at every stage (16 x 16 does); resize the image, or use convention torchvision "
            "or hf, which pad");
}

// ---- multi-scale backbone ----

// forward_intermediates against torchvision's features[1] and [3] (strides 2 and 4 here), NHWC and
// NCHW, on an odd size (22 x 17: 11 x 8, then 6 x 4).
TEST(Swin, ForwardIntermediatesMatchTorchvisionFeatures) {
  auto base = small_with("torchvision", 3);
  auto m = std::dynamic_pointer_cast<models::SwinTransformer>(base);
  ASSERT_TRUE(m);
  manual_seed(4);
  const Tensor x = Tensor::randn({2, 3, 22, 17});
  const auto ref = test::torch_ref("swin.stage_outputs", {{"x", x}}, small_args(false));
  NoGradGuard ng;
  const auto nhwc = m->forward_intermediates(x, /*nchw=*/false), nchw = m->forward_intermediates(x);
  ASSERT_EQ(nhwc.size(), 2u);
  ASSERT_EQ(nchw.size(), 2u);
  EXPECT_EQ(nhwc[0].shape(), (Shape{2, 11, 8, 16}));
  EXPECT_EQ(nchw[1].shape(), (Shape{2, 32, 6, 4}));
  for (size_t i = 0; i < 2; ++i) {
    const Tensor want = ref.at("stage_" + std::to_string(i));
    EXPECT_TENSOR_NEAR(nhwc[i].to(DType::f64), want.to(DType::f64), 1e-5, 0) << i;
    EXPECT_TENSOR_NEAR(nchw[i].to(DType::f64), want.permute({0, 3, 1, 2}).to(DType::f64), 1e-5, 0) << i;
  }
  // forward_features stays the final normalised map.
  EXPECT_EQ(m->forward_features(x).shape(), (Shape{2, 6, 4, 32}));
}

// attn info's per-stage MACs against torchvision's swin_t counted by forward hooks at 224 (Conv2d /
// Linear output x fan-in, window attention 2 N C per padded token), and against swin_v2_t at 256.
TEST(Swin, MacsPerStageMatchHookCounts) {
  for (auto [name, size] : {std::pair<std::string, int64_t>{"swin_t", 224}, {"swin_v2_t", 256}}) {
    nn::init::SkipRandomInit skip(nn::init::SkipRandomInit::Fill::none);
    auto m = std::dynamic_pointer_cast<models::SwinTransformer>(models::create_model(name));
    ASSERT_TRUE(m);
    const auto parts = m->macs_per_stage();
    const auto want = test::torch_ref("swin.stage_macs", {}, {{"seed", 0}, {"model", name}, {"size", size}})
                          .at("macs").to_vector<int64_t>();
    ASSERT_EQ(parts.size(), want.size()) << name;
    int64_t total = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      EXPECT_EQ(parts[i].second, want[i]) << name << " " << parts[i].first;
      total += parts[i].second;
    }
    EXPECT_EQ(parts.front().first, "patch_embed");
    EXPECT_EQ(parts[1].first, "stage1");
    EXPECT_EQ(parts.back().first, "head");
    EXPECT_EQ(total, m->macs_per_image()) << name;
  }
}

// timm built at 64 with strict_img_size=False on the four-stage weights: 64 x 64 (as torchvision), and
// 62 x 90 (31 x 45 ... 4 x 6 maps: blocks roll before padding; the last stage unshifted because its map
// at 64 is the window's size, where torchvision keeps the shift along the 6).
TEST(Swin, TimmDynamicConventionMatchesItsReference) {
  const Tensor file = test::torch_ref("swin.weights", {}, small4_args()).at("file");
  const std::string path = tmp_path("timm_dyn.safetensors");
  test::write_bytes(path, file.data<uint8_t>(), size_t(file.numel()));
  json cfg = small4_model();
  cfg["convention"] = "timm_dynamic";
  auto m = load(path, "swin", cfg, true);
  std::remove(path.c_str());
  for (auto [h, w] : {std::pair<int64_t, int64_t>{64, 64}, {62, 90}}) {
    manual_seed(uint64_t(h + w));
    const Tensor x = Tensor::randn({2, 3, h, w});
    NoGradGuard ng;
    const Tensor got = m->forward(x).to(DType::f64);
    const Tensor want = test::torch_ref("swin.timm_dynamic_logits", {{"x", x}}, small4_args()).at("logits");
    const Tensor tv = test::torch_ref("swin.logits", {{"x", x}}, small4_args()).at("logits");
    double d = 0, mx = 0, dtv = 0;
    const auto a = got.to_vector<double>(), e = want.to_vector<double>(), t = tv.to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i)
      d = std::max(d, std::abs(a[i] - e[i])), mx = std::max(mx, std::abs(e[i])), dtv = std::max(dtv, std::abs(t[i] - e[i]));
    EXPECT_LE(d, 1e-4 * std::max(1.0, mx)) << h << "x" << w;
    if (h != w) EXPECT_GT(dtv, 1e-5) << "the size should tell the rules apart";
    std::printf("  timm_dynamic %lldx%lld: max |dlogit| %.3g (max |logit| %.3g); torchvision's rules differ by %.3g\n",
                (long long)h, (long long)w, d, mx, dtv);
  }
  NoGradGuard ng;
  EXPECT_EQ(test::error_of([&] { m->forward(Tensor::zeros({1, 3, 63, 64})); }),
            "swin (convention timm_dynamic): a 63 x 64 image does not divide into 2 x 2 patches (timm's PatchEmbed "
            "refuses it)");
}

// swin_fmnist's geometry (28 x 28, patch 2, window 7: a 14 x 14 map whose odd blocks shift by 3 under
// the mask, merged to 7 x 7, one window, where the shift is dropped) against torchvision, logits and
// every gradient; narrower (C 16) and three channels (torchvision's patch conv is RGB).
TEST(Swin, FashionMnistGeometryMatchesTorchvision) {
  const json args = {{"seed", 6}, {"model", "custom"}, {"patch", 2}, {"embed", 16}, {"depths", {2, 2}},
                     {"heads", {1, 2}}, {"window", 7}, {"num_classes", 10}, {"v2", false}};
  const json overrides = {{"embed_dim", 16}, {"depths", {2, 2}}, {"heads", {1, 2}}, {"in_channels", 3}};
  check_parity("swin_fmnist", args, overrides, 2, 28, 28, 3);
}

// DeiT's head-only distillation: head_dist is a second Linear on the pooled features; forward combines
// the two heads as distilled_output() says.
TEST(Swin, DistillationHeadOnThePooledFeatures) {
  const json tiny = {{"embed_dim", 16}, {"depths", {2, 2}}, {"heads", {1, 2}}};
  manual_seed(0);
  auto m = models::create_model("swin_fmnist_distilled", tiny);
  auto* s = dynamic_cast<models::SwinTransformer*>(m.get());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(models::as_distilled(*m), static_cast<models::DistilledHeads*>(s));
  auto plain = models::create_model("swin_fmnist", tiny);
  EXPECT_EQ(models::as_distilled(*plain), nullptr);
  EXPECT_EQ(m->num_parameters(), plain->num_parameters() + 32 * 10 + 10);
  m->eval();
  const Tensor x = Tensor::randn({3, 1, 28, 28});
  NoGradGuard ng;
  const Tensor pooled = mean(s->forward_features(x), {1, 2});
  std::map<std::string, Tensor> p;
  for (const auto& [name, t] : m->named_parameters()) p[name] = t;
  auto [cls, dist] = s->forward_heads(x);
  EXPECT_TENSOR_NEAR(cls, linear(pooled, p.at("head.weight"), p.at("head.bias")), 1e-6, 1e-5);
  EXPECT_TENSOR_NEAR(dist, linear(pooled, p.at("head_dist.weight"), p.at("head_dist.bias")), 1e-6, 1e-5);
  EXPECT_TENSOR_NEAR(m->forward(x), (cls + dist) * 0.5, 1e-6, 1e-5);
  s->set_distilled_output(models::DistilledOutput::softmax_sum);
  EXPECT_TENSOR_NEAR(m->forward(x), softmax(cls, -1) + softmax(dist, -1), 1e-6, 1e-5);
  EXPECT_EQ(m->config().at("distilled"), true);
}

// Inference (no grad, eval mode) runs the batch in slices of images (by default ~8,192 first-stage
// tokens: 41 images of 14 x 14 here) and each block's MLP over slices of 4,096 rows once a map has
// more than 8,192: the same logits as the whole batch at once (with grad on, nothing is sliced).
TEST(Swin, InferenceInSlicesEqualsWhole) {
  const json tiny = {{"embed_dim", 16}, {"depths", {2, 2}}, {"heads", {1, 2}}};
  manual_seed(3);
  auto m = models::create_model("swin_fmnist", tiny);
  auto* s = dynamic_cast<models::SwinTransformer*>(m.get());
  ASSERT_NE(s, nullptr);
  m->eval();
  const Tensor x = Tensor::randn({48, 1, 28, 28});
  EXPECT_EQ(s->inference_chunk(x), 41);
  const Tensor whole = m->forward(x).detach();
  NoGradGuard ng;
  EXPECT_TENSOR_NEAR(m->forward(x), whole, 1e-5, 1e-5);   // slices of 41 and 7 images
  s->set_inference_chunk(5);
  EXPECT_TENSOR_NEAR(m->forward(x), whole, 1e-5, 1e-5);
  s->set_inference_chunk(0);                               // the batch whole: 9,408 rows, the MLP in slices
  EXPECT_TENSOR_NEAR(m->forward(x), whole, 1e-5, 1e-5);
  EXPECT_NE(test::error_of([&] { s->set_inference_chunk(-2); }).find("got -2"), std::string::npos);
}

// Inference leaves each block's last residual add to the next block's first layer norm and folds the
// windows' gather and scatter into the layer norms (layer_norm_rows, add_layer_norm_rows); the logits
// equal the unfused forward's (eval mode, gradients on). 16 x 16: whole windows at both stages, every
// block fused; 16 x 24: the first stage's (8 x 12) fused, the second's (4 x 6, padded) not; 22 x 17:
// padded maps, none fused. A bf16 model: close to f32.
TEST(Swin, FusedInferenceEqualsUnfused) {
  manual_seed(8);
  auto m = models::create_model("swin", small_model(false));
  m->eval();
  for (auto [h, w] : {std::pair<int64_t, int64_t>{16, 16}, {16, 24}, {22, 17}}) {
    const Tensor x = Tensor::randn({2, 3, h, w});
    const Tensor unfused = m->forward(x).detach();
    NoGradGuard ng;
    profile::start();
    const Tensor fused = m->forward(x);
    int64_t row_norms = 0;
    for (const auto& op : profile::stop())
      if (std::string(op.name) == "layer_norm_rows" || std::string(op.name) == "add_layer_norm_rows")
        row_norms += op.calls;
    EXPECT_TENSOR_NEAR(fused, unfused, 1e-5, 1e-5) << h << " x " << w;
    // Two row-map norms per fused block, two blocks per stage.
    EXPECT_EQ(row_norms, h == 22 ? 0 : w == 16 ? 8 : 4) << h << " x " << w;
  }
  const Tensor x = Tensor::randn({2, 3, 16, 16});
  NoGradGuard ng;
  const Tensor y32 = m->forward(x);
  nn::convert_linear_weights_to_bf16(*m);
  nn::pack_linear_weights(*m);
  EXPECT_TENSOR_NEAR(m->forward(x), y32, 3e-2, 5e-2);
}

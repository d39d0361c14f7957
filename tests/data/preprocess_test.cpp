// Eval preprocessing against torchvision 0.14's transforms on the same PNG (Resize, CenterCrop,
// ToTensor, Normalize on a PIL image; tests/golden/gen/preprocess.py), the presets, the ImageNet
// class names against torchvision's list, and the two CLI commands built on them: `attn predict`
// with foreign weights in each layout (logits against PyTorch's on the same preprocessed pixels, an
// undecodable image in the batch) and `attn bench` on a tiny model. The CLI tests run the `attn`
// binary next to the test binaries' folder (or $ATTN_CLI) and are skipped when it is not built.
#include <gtest/gtest.h>

#include <cstdlib>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "attn/attn.h"
#include "attn/core/isa.h"
#include "attn/data/image.h"
#include "attn/data/preprocess.h"
#include "attn/ops/matmul.h"
#include "cli_run.h"
#include "errors.h"
#include "files.h"
#include "torch_ref.h"

using namespace attn;
using test::write_bytes;
using test::error_of;
using nlohmann::json;
using test::torch_ref;

namespace {

std::string temp_dir() { return test::scratch_dir("attn_preprocess_test"); }

// Smooth pixels with noise, u8 (H, W, C): resampling errors show on both edges and gradients.
Tensor pixels(int64_t h, int64_t w, int64_t c, uint64_t seed) {
  Generator g(seed);
  Tensor t = Tensor::empty({h, w, c}, DType::u8);
  uint8_t* p = t.data<uint8_t>();
  const double fx = 0.05 + 0.3 * g.uniform(), fy = 0.05 + 0.3 * g.uniform();
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t k = 0; k < c; ++k) {
        const double v = 127.5 + 90 * std::sin(fx * double(x) + 2.0 * double(k)) * std::cos(fy * double(y)) +
                         40 * (g.uniform() - 0.5);
        p[(y * w + x) * c + k] = uint8_t(std::clamp(v, 0.0, 255.0));
      }
  return t;
}

// Writes a PNG of the given pixels; returns its path and its bytes as a u8 tensor.
std::pair<std::string, Tensor> png_file(const std::string& name, const Tensor& px) {
  const std::vector<uint8_t> bytes = data::encode_png(px);
  const std::string path = temp_dir() + "/" + name;
  write_bytes(path, bytes);
  return {path, Tensor::from_vector(std::vector<uint8_t>(bytes), {int64_t(bytes.size())})};
}

const char* filter_name(data::Resample r) {
  return r == data::Resample::bicubic ? "bicubic" : r == data::Resample::bilinear ? "bilinear" : "nearest";
}

}  // namespace

// ---------------------------------------------------------------- pipeline vs torchvision

TEST(Preprocess, MatchesTorchvisionTransformsOnTheSamePng) {
  struct Case {
    const char* what;
    int64_t h, w, c;
    data::Preprocess p;
  };
  auto with = [](data::Preprocess p, data::PreprocessOverrides o) { return data::apply_overrides(p, o); };
  const std::vector<Case> cases = {
      {"torchvision eval (256 bilinear, 224)", 300, 400, 3, data::imagenet_eval_preset()},
      {"timm ViT (248 bicubic, 0.5)", 333, 250, 3, data::preset_for("vit_base_patch16_224", data::WeightSource::timm)},
      {"timm DeiT (248 bicubic, ImageNet)", 257, 301, 3,
       data::preset_for("deit_small_patch16_224", data::WeightSource::timm)},
      {"hf DeiT (squash 256 bicubic, 224)", 180, 240, 3,
       data::preset_for("deit_base_distilled_patch16_224", data::WeightSource::hf)},
      {"hf ViT (squash 224 bilinear)", 224, 300, 3, data::preset_for("vit_base_patch16_224", data::WeightSource::hf)},
      {"torchvision vit_l_16 (242)", 260, 250, 3,
       data::preset_for("vit_large_patch16_224", data::WeightSource::torchvision)},
      {"gray PNG -> RGB", 240, 260, 1, data::imagenet_eval_preset()},
      {"crop larger than the image: zero padding", 200, 300, 3, with(data::imagenet_eval_preset(), {.resize_size = 200})},
      {"odd margin 31: round(15.5) = 16", 255, 300, 3, with(data::imagenet_eval_preset(), {.resize_size = 255})},
      {"odd margin 33: round(16.5) = 16 (half to even)", 257, 257, 3,
       with(data::imagenet_eval_preset(), {.resize_size = 257, .interpolation = "bicubic"})},
      {"upscaling bicubic, crop_pct 0.95", 100, 150, 3,
       with(data::imagenet_eval_preset(), {.crop_pct = 0.95, .interpolation = "bicubic"})},
  };
  uint64_t seed = 10;
  for (const Case& k : cases) {
    const auto [path, bytes] = png_file("case" + std::to_string(seed) + ".png", pixels(k.h, k.w, k.c, seed));
    ++seed;
    const Tensor mine = data::preprocess_file(path, k.p);
    const json args = {{"resize", k.p.resize_size}, {"squash", k.p.squash}, {"crop", k.p.crop_size},
                       {"interpolation", filter_name(k.p.interpolation)}, {"mean", k.p.mean}, {"std", k.p.std}};
    auto ref = torch_ref("preprocess.eval_transform", {{"png", bytes}}, args);
    ASSERT_EQ(mine.shape(), ref.at("out").shape()) << k.what;
    // The bound is 1/255 per pixel before Normalize; the u8 resampling equals PIL's, so the
    // only differences left are float rounding in ToTensor / Normalize.
    const auto c = test::compare(mine, ref.at("out"), 1e-5, 0);
    float min_std = *std::min_element(k.p.std.begin(), k.p.std.end());
    EXPECT_LE(c.max_abs, 1.0 / 255.0 / min_std) << k.what;
    EXPECT_TENSOR_NEAR(mine, ref.at("out"), 1e-5, 0) << k.what << " (" << k.p.describe() << ")";
  }
}

// ---------------------------------------------------------------- presets and sizes

TEST(Preprocess, Presets) {
  const data::Preprocess tv = data::preset_for("vit_base_patch16_224", data::WeightSource::torchvision);
  EXPECT_EQ(tv.resize_size, 256);
  EXPECT_EQ(tv.crop_size, 224);
  EXPECT_FALSE(tv.squash);
  EXPECT_EQ(tv.interpolation, data::Resample::bilinear);
  EXPECT_EQ(tv.mean, data::kImagenetMean);
  EXPECT_EQ(tv.std, data::kImagenetStd);
  EXPECT_EQ(data::preset_for("vit_large_patch16_224", data::WeightSource::torchvision).resize_size, 242);
  const data::Preprocess h14 = data::preset_for("vit_huge_patch14_224", data::WeightSource::torchvision);
  EXPECT_EQ(h14.resize_size, 224);
  EXPECT_EQ(h14.interpolation, data::Resample::bicubic);

  const data::Preprocess timm_vit = data::preset_for("vit_tiny_patch16_224", data::WeightSource::timm);
  EXPECT_EQ(timm_vit.resize_size, 248);   // floor(224 / 0.9)
  EXPECT_EQ(timm_vit.interpolation, data::Resample::bicubic);
  EXPECT_EQ(timm_vit.mean, data::kInceptionMean);
  EXPECT_EQ(timm_vit.std, data::kInceptionStd);
  const data::Preprocess timm_deit = data::preset_for("deit_tiny_distilled_patch16_224", data::WeightSource::timm);
  EXPECT_EQ(timm_deit.resize_size, 248);
  EXPECT_EQ(timm_deit.mean, data::kImagenetMean);
  EXPECT_EQ(data::preset_for("deit_base_patch16_224", data::WeightSource::timm, 384).resize_size, 426);   // timm: 384 / .9
  EXPECT_EQ(data::preset_for("deit_base_patch16_224", data::WeightSource::timm, 384).crop_size, 384);

  const data::Preprocess hf_vit = data::preset_for("vit_base_patch16_224", data::WeightSource::hf);
  EXPECT_TRUE(hf_vit.squash);
  EXPECT_EQ(hf_vit.resize_size, 224);
  EXPECT_EQ(hf_vit.mean, data::kInceptionMean);
  const data::Preprocess hf_deit = data::preset_for("deit_small_patch16_224", data::WeightSource::hf);
  EXPECT_EQ(hf_deit.resize_size, 256);
  EXPECT_EQ(hf_deit.interpolation, data::Resample::bicubic);

  EXPECT_EQ(data::resize_for_crop_pct(224, 0.875), 256);
  EXPECT_EQ(data::resize_for_crop_pct(224, 0.9), 248);
  EXPECT_EQ(data::resize_for_crop_pct(224, 0.95), 235);
  EXPECT_EQ(data::resized_shorter_side(300, 400, 256), (std::pair<int64_t, int64_t>{256, 341}));
  EXPECT_EQ(data::resized_shorter_side(400, 300, 256), (std::pair<int64_t, int64_t>{341, 256}));
  EXPECT_EQ(data::resized_shorter_side(100, 100, 224), (std::pair<int64_t, int64_t>{224, 224}));

  // Overrides: a new crop keeps the crop fraction; --crop-pct and --resize win.
  data::Preprocess p = data::apply_overrides(data::imagenet_eval_preset(), {.crop_size = 112});
  EXPECT_EQ(p.resize_size, 128);
  p = data::apply_overrides(data::imagenet_eval_preset(), {.crop_pct = 0.875, .interpolation = "bicubic"});
  EXPECT_EQ(p.resize_size, 256);
  EXPECT_EQ(p.interpolation, data::Resample::bicubic);
  p = data::apply_overrides(tv, {.resize_size = 300, .mean = std::vector<float>{0.5f}, .std = std::vector<float>{0.25f}});
  EXPECT_EQ(p.resize_size, 300);
  EXPECT_EQ(p.mean, std::vector<float>{0.5f});
  EXPECT_EQ(p.describe(), "resize shorter side 300 bilinear, center crop 224, mean [0.5], std [0.25]");
}

TEST(Preprocess, Errors) {
  EXPECT_EQ(error_of([] { data::apply_overrides(data::imagenet_eval_preset(), {.mean = std::vector<float>{0.1f, 0.2f}}); }),
            "preprocess: expected 1 or 3 values of mean, got 2 ([0.1, 0.2])");
  EXPECT_EQ(error_of([] { data::apply_overrides(data::imagenet_eval_preset(), {.std = std::vector<float>{0.f}}); }),
            "preprocess: expected non-zero finite std, got [0]");
  EXPECT_EQ(error_of([] { data::apply_overrides(data::imagenet_eval_preset(), {.crop_pct = 1.5}); }),
            "preprocess: expected --crop-pct in (0, 1], got 1.5");
  EXPECT_EQ(error_of([] { data::apply_overrides(data::imagenet_eval_preset(), {.interpolation = "lanczos"}); }),
            "resize: unknown filter 'lanczos' (known: nearest, bilinear, bicubic)");
  EXPECT_EQ(error_of([] { data::parse_weight_source("keras"); }),
            "preprocess: unknown weight source 'keras' (known: torchvision, timm, hf)");
  EXPECT_EQ(error_of([] { data::center_crop(Tensor::zeros({4, 4, 3}), 2, 2); }),
            "center_crop: expected a u8 (H, W, C) image, got f32 of shape [4, 4, 3]");
  const std::string missing = temp_dir() + "/missing.png";
  EXPECT_NE(error_of([&] { data::preprocess_file(missing, data::imagenet_eval_preset()); }).find(missing),
            std::string::npos);
}

TEST(Preprocess, ImagenetClassNamesAreTorchvisions) {
  const auto& names = data::imagenet_class_names();
  ASSERT_EQ(names.size(), 1000u);
  auto ref = torch_ref("preprocess.imagenet_names", {}, json::object());
  const Tensor& b = ref.at("names");
  const std::string joined(reinterpret_cast<const char*>(b.data<uint8_t>()), size_t(b.numel()));
  std::string mine;
  for (size_t i = 0; i < names.size(); ++i) mine += (i ? "\n" : "") + names[i];
  EXPECT_EQ(mine, joined);
  EXPECT_EQ(names[0], "tench");
  EXPECT_EQ(names[999], "toilet tissue");
}

// ---------------------------------------------------------------- the CLI: predict and bench

namespace {

std::string cli_path() {
  if (const char* e = std::getenv("ATTN_CLI")) return e;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (auto dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
    const auto p = dir / "attn";
    if (std::filesystem::is_regular_file(p) && ::access(p.c_str(), X_OK) == 0) return p.string();
    if (std::filesystem::exists(dir / "CMakeCache.txt")) break;   // the build folder's root
  }
  return "";
}

test::CliRun run_cli(const std::vector<std::string>& args) {
  return test::run_cli(cli_path(), temp_dir() + "/stderr.txt", args);
}

#define REQUIRE_CLI()                                                                  \
  if (cli_path().empty()) GTEST_SKIP() << "the attn binary is not built (ATTN_BUILD_CLI=OFF?)"

// As tests/models/name_maps_test.cpp: DeiT-Ti's width with 2 blocks on 32x32 images, and a small
// torchvision ViT, with seeded random weights from tests/golden/gen/pretrained.py.
json deit_args(const std::string& layout) {
  return {{"seed", 1}, {"layout", layout}, {"image_size", 32}, {"patch_size", 8}, {"in_channels", 3},
          {"num_classes", 10}, {"dim", 192}, {"depth", 2}, {"heads", 3}, {"mlp_dim", 768},
          {"eps", layout == "hf" ? 1e-12 : 1e-6}, {"distilled", true}};
}
const json kDeitModel = {{"image_size", 32}, {"patch_size", 8}, {"depth", 2}, {"num_classes", 10}};
const json kTvArgs = {{"seed", 0}, {"image_size", 32}, {"patch_size", 8}, {"num_layers", 2}, {"num_heads", 4},
                      {"hidden_dim", 64}, {"mlp_dim", 128}, {"num_classes", 10}};
const json kTvModel = {{"image_size", 32}, {"patch_size", 8}, {"in_channels", 3}, {"num_classes", 10},
                       {"dim", 64}, {"depth", 2}, {"heads", 4}, {"mlp_ratio", 2.0}};

}  // namespace

TEST(PredictCli, ForeignWeightsInEachLayoutMatchTorch) {
  REQUIRE_CLI();
  const std::string a = png_file("a.png", pixels(40, 52, 3, 1)).first;
  const std::string b = png_file("b.png", pixels(47, 37, 3, 2)).first;
  const std::string bad = temp_dir() + "/bad.png";
  const std::string junk = "\x89PNG\r\n\x1a\n not really a png";
  write_bytes(bad, junk);

  struct Layout {
    std::string name, model;
    json ref_args, overrides;
    std::string ref_func;
  };
  const std::vector<Layout> layouts = {
      {"timm", "deit_tiny_distilled_patch16_224", deit_args("timm"), kDeitModel, "pretrained.deit"},
      {"hf", "deit_tiny_distilled_patch16_224", deit_args("hf"), kDeitModel, "pretrained.deit"},
      {"torchvision", "vit", kTvArgs, kTvModel, "pretrained.torchvision_vit"},
  };
  for (const Layout& l : layouts) {
    SCOPED_TRACE(l.name);
    // The pixels the model should see: this layout's preset (checked against torchvision above).
    const data::Preprocess pre = data::preset_for(l.model, data::parse_weight_source(l.name), 32);
    const Tensor x = stack({data::preprocess_file(a, pre), data::preprocess_file(b, pre)}, 0);
    auto ref = torch_ref(l.ref_func, {{"x", x}}, l.ref_args);
    const std::string dir = temp_dir() + "/" + l.name;
    const std::string weights = dir + "/model.safetensors";
    write_bytes(weights, ref.at("file").data<uint8_t>(), size_t(ref.at("file").numel()));
    if (l.name == "hf") write_bytes(dir + "/config.json", ref.at("config").data<uint8_t>(), size_t(ref.at("config").numel()));

    const test::CliRun r = run_cli({"predict", "--weights", weights, "--model", l.model, "--model-config", l.overrides.dump(),
                           "--topk", "10", "--batch", "2", "--json", "--threads", "1", a, bad, b});
    EXPECT_EQ(r.code, 1) << r.err;   // one image could not be read
    EXPECT_NE(r.err.find("1 of 3 images could not be read"), std::string::npos) << r.err;
    json j;
    ASSERT_NO_THROW(j = json::parse(r.out)) << r.out << r.err;
    EXPECT_EQ(j["source"], l.name);
    EXPECT_EQ(j["preprocess"], pre.describe());
    ASSERT_EQ(j["results"].size(), 3u);
    EXPECT_EQ(j["results"][1]["image"], bad);
    EXPECT_NE(j["results"][1]["error"].get<std::string>().find(bad), std::string::npos) << j["results"][1];
    const std::vector<double> want = ref.at("logits").to_vector<double>();   // (2, 10)
    double max_logit = 0;
    for (double v : want) max_logit = std::max(max_logit, std::abs(v));
    for (int img = 0; img < 2; ++img) {
      const json& res = j["results"][img == 0 ? 0 : 2];
      ASSERT_EQ(res["top"].size(), 10u) << res;
      for (const json& t : res["top"]) {
        const size_t cls = t["class"].get<size_t>();
        EXPECT_NEAR(t["logit"].get<double>(), want[size_t(img) * 10 + cls], 1e-4 * std::max(1.0, max_logit))
            << "image " << img << " class " << cls;
        const std::string name = t["name"];
        EXPECT_EQ(name, (l.name == "hf" ? "class_" : "class ") + std::to_string(cls));   // hf: config's id2label
      }
    }
  }
  // The plain text form: the error line names the file, the other images are still printed.
  const test::CliRun r = run_cli({"predict", "--weights", temp_dir() + "/timm/model.safetensors", "--model",
                         "deit_tiny_distilled_patch16_224", "--model-config", kDeitModel.dump(), "--topk", "2", a,
                         bad, b});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("attn: error: image: cannot decode '" + bad + "'"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find(a + "\n  1. "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(b + "\n  1. "), std::string::npos) << r.out;
}

TEST(PredictCli, ThousandClassModelsPrintImagenetNames) {
  REQUIRE_CLI();
  const std::string a = png_file("a.png", pixels(40, 52, 3, 1)).first;
  json args = kTvArgs, model = kTvModel;
  args["num_classes"] = model["num_classes"] = 1000;
  const data::Preprocess pre = data::preset_for("vit", data::WeightSource::torchvision, 32);
  auto ref = torch_ref("pretrained.torchvision_vit", {{"x", data::preprocess_file(a, pre).unsqueeze(0)}}, args);
  const std::string weights = temp_dir() + "/tv1000/model.safetensors";
  write_bytes(weights, ref.at("file").data<uint8_t>(), size_t(ref.at("file").numel()));
  const test::CliRun r = run_cli({"predict", "--weights", weights, "--model", "vit", "--model-config", model.dump(),
                            "--format", "torchvision", "--topk", "3", "--json", a});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  const std::vector<double> want = ref.at("logits").to_vector<double>();
  const size_t best = size_t(std::max_element(want.begin(), want.end()) - want.begin());
  const json& top = j["results"][0]["top"];
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0]["class"].get<size_t>(), best);
  for (const json& t : top) EXPECT_EQ(t["name"], data::imagenet_class_names()[t["class"].get<size_t>()]) << t;
}

TEST(PredictCli, FlagErrors) {
  REQUIRE_CLI();
  const std::string a = png_file("a.png", pixels(40, 52, 3, 1)).first;
  test::CliRun r = run_cli({"predict", "--weights", a, a});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("predict: --weights needs --model NAME"), std::string::npos) << r.err;
  r = run_cli({"predict", "--weights", a, "--model", "vit_tiny_patch16_224", "--dtype", "f16", a});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("predict: expected --dtype f32, bf16 or int8, got 'f16'"), std::string::npos) << r.err;
}

TEST(BenchCli, TinyModelTwoIterations) {
  REQUIRE_CLI();
  const test::CliRun r = run_cli({"bench", "--model", "vit_fmnist", "--batch", "2", "--iters", "2", "--warmup", "1",
                         "--threads", "1", "--json", "--gemm-seconds", "0.05", "--gemm-size", "256"});
  ASSERT_EQ(r.code, 0) << r.err;
  json j;
  ASSERT_NO_THROW(j = json::parse(r.out)) << r.out;
  EXPECT_EQ(j["model"], "vit_fmnist");
  EXPECT_EQ(j["batch"], 2);
  EXPECT_EQ(j["iters"], 2);
  EXPECT_EQ(j["threads"], 1);
  const double median = j["latency_ms"]["median"], p90 = j["latency_ms"]["p90"];
  EXPECT_GT(median, 0);
  EXPECT_GE(p90, j["latency_ms"]["min"].get<double>());
  EXPECT_NEAR(j["images_per_s"].get<double>(), 2 / (median / 1e3), 1e-6 * j["images_per_s"].get<double>());
  EXPECT_GT(j["gmacs_per_image"].get<double>(), 0);
  EXPECT_GT(j["gflops"].get<double>(), 0);
  EXPECT_GT(j["gemm_ceiling_gflops"].get<double>(), 0);
  EXPECT_NEAR(j["gemm_fraction"].get<double>(), j["gflops"].get<double>() / j["gemm_ceiling_gflops"].get<double>(),
              1e-9);
  EXPECT_GT(j["peak_rss_load_mb"].get<double>(), 0);
  // The steady state's peak (counted afresh after the load) still has the model's tensors resident.
  // (Not >= the load peak: packing the weights at load holds one weight's copy for a moment.)
  EXPECT_GE(j["peak_rss_steady_mb"].get<double>(), j["tensor_bytes_model_mb"].get<double>());
  if (detected_isa() == Isa::avx512 && !std::getenv("ONEDNN_MAX_CPU_ISA"))   // oneDNN's brgemm layouts
    EXPECT_GT(j["packed_linear_weights"].get<int64_t>(), 0);

  const test::CliRun t = run_cli({"bench", "--model", "vit_fmnist", "--iters", "2", "--warmup", "0", "--threads", "1",
                         "--gemm-seconds", "0"});
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("latency     median "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("memory      peak RSS after load "), std::string::npos) << t.out;
  // bf16: every Linear weight in bf16 (the emulated GEMM where the CPU has no native one).
  const test::CliRun bf = run_cli({"bench", "--model", "vit_fmnist", "--dtype", "bf16", "--iters", "1", "--warmup", "0",
                          "--threads", "1", "--gemm-seconds", "0", "--json"});
  ASSERT_EQ(bf.code, 0) << bf.err;
  json jb;
  ASSERT_NO_THROW(jb = json::parse(bf.out)) << bf.out;
  EXPECT_EQ(jb["dtype"], "bf16");
  EXPECT_EQ(jb["gemm_path"], bf16_gemm_name(bf16_gemm_mode()));
  // vit_fmnist: 2,656,128 of its 2,684,554 parameters are Linear weights, so the weights shrink by
  // 2 bytes each of those.
  EXPECT_NEAR(j["weights_mb"].get<double>() - jb["weights_mb"].get<double>(), 2.0 * 2656128 / 1e6, 1e-6);
  const test::CliRun bad = run_cli({"bench", "--model", "vit_fmnist", "--dtype", "f16"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("bench: expected --dtype f32, bf16 or int8, got 'f16'"), std::string::npos) << bad.err;
}

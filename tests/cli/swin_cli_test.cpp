// Swin Transformers through the CLI: `attn train` of swin_fmnist_distilled (augmentation, an EMA,
// soft distillation from a teacher checkpoint into the distillation head) and of swin_fmnist on an
// image folder, each lowering its training loss; predict / eval / bench / info / convert on Swin
// models; and `attn explain`, whose window attention for a query token is zero outside the query's
// (shifted) window. The models are swin_fmnist's geometry (patch 2, window 7: a 14 x 14 map of 2 x 2
// windows shifted by 3 on odd blocks) at width 16, so that every run takes seconds.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/attn.h"
#include "attn/io/safetensors.h"
#include "attn/viz/explain_swin.h"
#include "attn_cli.h"
#include "files.h"
#include "torch_ref.h"

using namespace attn;
using nlohmann::json;
using test::run_attn;
namespace fs = std::filesystem;

namespace {

const json kTiny = {{"embed_dim", 16}, {"depths", {2, 2}}, {"heads", {1, 2}}};

std::string fresh(const std::string& name) { return test::fresh_tmp_dir("attn_swin_cli_test", name); }

std::vector<json> log_records(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

// The first and last logged training loss of a run: the last is lower.
void expect_loss_decreased(const std::string& run) {
  const auto log = log_records(run + "/log.jsonl");
  ASSERT_GE(log.size(), 2u) << run;
  EXPECT_LT(log.back().at("train_loss").get<double>(), log.front().at("train_loss").get<double>())
      << log.front().dump() << "\n" << log.back().dump();
}

// Fashion-MNIST test image i as a PNG.
std::string fmnist_png(const std::string& dir, int64_t i) {
  static const data::FashionMnist test_set = data::FashionMnist::load(data::FashionMnist::kDefaultDir, data::Split::test);
  const std::string path = dir + "/fmnist_" + std::to_string(i) + ".png";
  data::write_png(path, test_set.images().select(0, i).permute({1, 2, 0}).contiguous());
  return path;
}

// One training run shared by the tests below: swin_fmnist_distilled (tiny) with augmentation, an EMA
// and soft distillation from an MLP teacher checkpoint.
struct Trained {
  std::string dir, ckpt;
  json metrics;
  ~Trained() {   // at exit: kept for a look when a test failed
    if (!dir.empty() && ::testing::UnitTest::GetInstance()->Passed()) fs::remove_all(dir);
  }
};

const Trained& trained() {
  static const Trained t = [] {
    Trained r;
    r.dir = fresh("train");
    const std::string teacher = r.dir + "/teacher.safetensors";
    manual_seed(3);
    auto m = models::create_model("mlp", json::object());
    train::save_checkpoint(teacher, *m, nullptr, {{"config", m->config()}});
    const test::CliRun run = run_attn(r.dir, {"train", "--model", "swin_fmnist_distilled", "--model-config", kTiny.dump(),
                                              "--epochs", "3", "--batch", "64", "--limit-train", "640", "--limit-eval",
                                              "200", "--lr", "2e-3", "--augment", "--ema-decay", "0.9", "--teacher",
                                              teacher, "--distill", "soft", "--tau", "2", "--threads", "2", "--out",
                                              r.dir + "/run"});
    EXPECT_EQ(run.code, 0) << run.err;
    r.ckpt = r.dir + "/run/checkpoint.safetensors";
    std::ifstream in(r.dir + "/run/metrics.json");
    if (in) r.metrics = json::parse(in);
    return r;
  }();
  return t;
}

}  // namespace

TEST(SwinCli, TrainsWithAugmentationEmaAndADistillationHead) {
  const Trained& t = trained();
  ASSERT_TRUE(fs::exists(t.ckpt));
  expect_loss_decreased(t.dir + "/run");
  const json& m = t.metrics;
  EXPECT_EQ(m.at("steps"), 3 * 10);
  for (const char* k : {"test_accuracy", "test_accuracy_cls", "test_accuracy_dist", "test_accuracy_ema"})
    EXPECT_TRUE(m.contains(k)) << k << " missing from " << m.dump();
  EXPECT_EQ(m.at("distill").at("type"), "soft");
  EXPECT_EQ(m.at("recipe").at("augment"), true);
  const json cfg = io::read_checkpoint_metadata(t.ckpt).at("config");
  EXPECT_EQ(cfg.at("model"), "swin_fmnist_distilled");
  EXPECT_EQ(cfg.at("distilled"), true);
  EXPECT_EQ(cfg.at("embed_dim"), 16);
}

TEST(SwinCli, TrainsOnAnImageFolder) {
  // Three classes: a bright square in the top-left, top-right or bottom half, on noise.
  const std::string d = fresh("folder");
  Generator g(5);
  const std::vector<std::string> classes = {"bottom", "left", "right"};
  for (const char* split : {"train", "test"})
    for (int k = 0; k < 3; ++k)
      for (int i = 0; i < (std::string(split) == "train" ? 40 : 10); ++i) {
        Tensor img = Tensor::empty({28, 28, 1}, DType::u8);
        uint8_t* p = img.data<uint8_t>();
        for (int64_t y = 0; y < 28; ++y)
          for (int64_t x = 0; x < 28; ++x) {
            const bool on = k == 0 ? y >= 14 : (y < 14 && (k == 1 ? x < 14 : x >= 14));
            p[y * 28 + x] = uint8_t((on ? 160 : 20) + int(g.randint(60)));
          }
        const std::string path = d + "/" + split + "/" + classes[size_t(k)] + "/" + std::to_string(i) + ".png";
        fs::create_directories(fs::path(path).parent_path());
        data::write_png(path, img);
      }
  const test::CliRun r = run_attn(d, {"train", "--model", "swin_fmnist", "--model-config", kTiny.dump(), "--data", d,
                                      "--epochs", "3", "--batch", "16", "--lr", "2e-3", "--threads", "2", "--out",
                                      d + "/run"});
  ASSERT_EQ(r.code, 0) << r.err;
  expect_loss_decreased(d + "/run");
  const json meta = io::read_checkpoint_metadata(d + "/run/checkpoint.safetensors");
  EXPECT_EQ(meta.at("config").at("num_classes"), 3);
  EXPECT_EQ(meta.at("train_state").at("class_names").get<std::vector<std::string>>(), classes);
  fs::remove_all(d);
}

TEST(SwinCli, PredictAndEvalACheckpoint) {
  const Trained& t = trained();
  ASSERT_TRUE(fs::exists(t.ckpt));
  const std::string a = fmnist_png(t.dir, 0), b = fmnist_png(t.dir, 1);
  const test::CliRun p = run_attn(t.dir, {"predict", t.ckpt, a, b, "--topk", "3", "--json", "--threads", "1"});
  ASSERT_EQ(p.code, 0) << p.err;
  const json pj = json::parse(p.out);
  ASSERT_EQ(pj.at("results").size(), 2u);
  // The top class is the library's on the same input (the checkpoint's own preprocessing).
  const models::Pretrained cl = models::load_pretrained(models::PretrainedSource{.path = t.ckpt});
  for (size_t k = 0; k < 2; ++k) {
    const viz::PreparedImage img = viz::prepare_image(k == 0 ? a : b, cl.preprocess);
    NoGradGuard ng;
    const int64_t want = argmax(cl.model->forward(img.input), -1).data<int64_t>()[0];
    EXPECT_EQ(pj["results"][k]["top"][0]["class"], want);
    EXPECT_EQ(pj["results"][k]["top"][0]["name"], data::FashionMnist::class_names()[size_t(want)]);
  }
  // eval on the 200 test images the run evaluated: the run's figures, for the weights and the EMA's.
  for (const bool ema : {false, true}) {
    std::vector<std::string> args = {"eval", t.ckpt, "--limit", "200", "--threads", "1", "--json"};
    if (ema) args.push_back("--ema");
    const test::CliRun e = run_attn(t.dir, args);
    ASSERT_EQ(e.code, 0) << e.err;
    EXPECT_EQ(json::parse(e.out).at("accuracy"), t.metrics.at(ema ? "test_accuracy_ema" : "test_accuracy"));
  }
}

// info for every Swin in the registry; bench (one timed pass) for V1's and V2's smallest (at a small
// image size), swin_fmnist's two and a trained checkpoint.
TEST(SwinCli, InfoAndBenchEverySwin) {
  const std::string dir = fresh("bench");
  int count = 0;
  for (const std::string& name : models::model_names(models::kImageClassification)) {
    if (!name.starts_with("swin")) continue;
    ++count;
    const test::CliRun i = run_attn(dir, {"info", name});
    ASSERT_EQ(i.code, 0) << name << ": " << i.err;
    EXPECT_NE(i.out.find("total"), std::string::npos) << i.out;
    EXPECT_NE(i.out.find("stage1"), std::string::npos) << i.out;
    if (name != "swin_t" && name != "swin_v2_t" && !name.starts_with("swin_fmnist")) continue;
    const json small = name.starts_with("swin_fmnist") ? json::object() : json{{"image_size", 64}};
    const test::CliRun b = run_attn(dir, {"bench", "--model", name, "--model-config", small.dump(), "--iters", "1",
                                          "--warmup", "0", "--gemm-seconds", "0.05", "--gemm-size", "256", "--json",
                                          "--threads", "2"});
    ASSERT_EQ(b.code, 0) << name << ": " << b.err;
    EXPECT_GT(json::parse(b.out).at("gmacs_per_image").get<double>(), 0) << b.out;
  }
  EXPECT_GE(count, 9);
  // --profile: each op's exclusive time per pass; the rows, with the time outside any op, are the pass.
  const test::CliRun pr = run_attn(dir, {"bench", "--model", "swin_fmnist", "--iters", "2", "--warmup", "1",
                                         "--gemm-seconds", "0", "--json", "--profile", "--threads", "2"});
  ASSERT_EQ(pr.code, 0) << pr.err;
  const json prof = json::parse(pr.out).at("profile");
  EXPECT_GT(prof.at("pass_ms").get<double>(), 0) << pr.out;
  std::map<std::string, json> ops;
  double share = 0;
  for (const json& r : prof.at("ops")) {
    ops[r.at("op").get<std::string>()] = r;
    share += r.at("share").get<double>();
    EXPECT_GE(r.at("ms").get<double>(), -1e-3) << r.dump();
  }
  EXPECT_NEAR(share, 1.0, 1e-6) << pr.out;
  for (const char* op : {"gemm (oneDNN)", "linear", "window attention", "layer_norm", "(outside any op)"})
    EXPECT_TRUE(ops.count(op)) << op << " missing from " << prof.dump();
  // swin_fmnist: 8 blocks of four Linears (qkv, proj, fc1, fc2), patch merging's and the head: every
  // Linear runs one GEMM.
  if (ops.count("linear") && ops.count("gemm (oneDNN)")) {
    EXPECT_GE(ops["linear"].at("calls").get<double>(), 34.0);
    EXPECT_GE(ops["gemm (oneDNN)"].at("calls").get<double>(), ops["linear"].at("calls").get<double>());
  }
  const Trained& t = trained();
  const test::CliRun b = run_attn(t.dir, {"bench", "--model", "swin_fmnist_distilled", "--weights", t.ckpt, "--iters",
                                          "1", "--warmup", "0", "--gemm-seconds", "0.05", "--gemm-size", "256",
                                          "--json", "--threads", "1"});
  ASSERT_EQ(b.code, 0) << b.err;
  fs::remove_all(dir);
}

// torchvision-layout weights (attn's Swin names are torchvision's) -> attn convert -> a checkpoint
// holding the same tensors, which predicts (RGB: torchvision's preset normalises three channels).
TEST(SwinCli, ConvertTorchvisionLayoutWeights) {
  const std::string dir = fresh("convert");
  manual_seed(11);
  json rgb = kTiny;
  rgb["in_channels"] = 3;
  auto m = models::create_model("swin_fmnist", rgb);
  const std::string weights = dir + "/swin.safetensors", out = dir + "/converted.safetensors";
  io::save_safetensors(weights, m->state_dict());
  const test::CliRun c = run_attn(dir, {"convert", weights, "--model", "swin_fmnist", "--model-config", rgb.dump(),
                                        "--format", "torchvision", "--out", out});
  ASSERT_EQ(c.code, 0) << c.err;
  auto back = models::load_classifier_checkpoint(out);
  const io::TensorList want = m->state_dict(), got = back->state_dict();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first);
    EXPECT_TRUE(test::near(got[i].second, want[i].second, 0, 0)) << got[i].first;
  }
  const test::CliRun p = run_attn(dir, {"predict", out, fmnist_png(dir, 2), "--json", "--threads", "1"});
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(json::parse(p.out).at("results").size(), 1u);
  fs::remove_all(dir);
}

namespace {

// `attn explain ... --json` of one block: a PNG of three panels, and the query's attention nonzero
// only inside the query's window of the block's (shifted) grid, where it sums to 1 (no padding).
void check_explain(const std::vector<std::string>& source, const std::string& dir, const std::string& image,
                   int64_t stage, int64_t block, int64_t want_shift, int64_t want_side, int64_t panel_side,
                   int64_t qr = 4, int64_t qc = 9) {
  const std::string png = dir + "/map_" + std::to_string(stage) + "_" + std::to_string(block) + ".png";
  std::vector<std::string> args = {"explain"};
  args.insert(args.end(), source.begin(), source.end());
  for (const std::string& a : {image, std::string("--stage"), std::to_string(stage), std::string("--block"),
                               std::to_string(block), std::string("--query-row"), std::to_string(qr),
                               std::string("--query-col"), std::to_string(qc), std::string("--json"),
                               std::string("--out"), png, std::string("--threads"), std::string("2")})
    args.push_back(a);
  const test::CliRun r = run_attn(dir, args);
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  const int64_t H = j.at("map")[0], W = j.at("map")[1], ws = j.at("window");
  EXPECT_EQ(H, want_side);
  EXPECT_EQ(W, want_side);
  EXPECT_EQ(j.at("shift")[0], want_shift);
  const Tensor panel = data::read_image(png);
  EXPECT_EQ(panel.size(0), panel_side);
  EXPECT_EQ(panel.size(1), 3 * panel_side);
  const auto q = j.at("query_attention").get<std::vector<float>>();
  const auto recv = j.at("received").get<std::vector<float>>();
  ASSERT_EQ(int64_t(q.size()), H * W);
  const int64_t sh = j.at("shift")[0], sw = j.at("shift")[1];
  EXPECT_EQ(j.at("query"), json({qr, qc}));
  double inside = 0;
  int64_t nonzero_inside = 0;
  for (int64_t r0 = 0; r0 < H; ++r0)
    for (int64_t c0 = 0; c0 < W; ++c0) {
      // The shifted grid independently of the library: window index floor((p - shift) / window).
      auto win = [](int64_t p, int64_t w, int64_t s) { return int64_t(std::floor(double(p - s) / double(w))); };
      const bool same = win(r0, ws, sh) == win(qr, ws, sh) && win(c0, ws, sw) == win(qc, ws, sw);
      const float v = q[size_t(r0 * W + c0)];
      if (same) inside += v, nonzero_inside += v > 0;
      else EXPECT_LT(v, 1e-30f) << "attention across a window border at (" << r0 << ", " << c0 << ")";
      EXPECT_GT(recv[size_t(r0 * W + c0)], 0.0f);
    }
  EXPECT_NEAR(inside, 1.0, 1e-4);
  EXPECT_GT(nonzero_inside, 1);
}

}  // namespace

TEST(SwinCli, ExplainDrawsOneBlocksShiftedWindows) {
  const Trained& t = trained();
  ASSERT_TRUE(fs::exists(t.ckpt));
  const std::string img = fmnist_png(t.dir, 3);
  // swin_fmnist: stage 0's 14 x 14 map, unshifted block 0 and shifted block 1 (4 x 4 pixel cells at
  // 28 x 28 -> 224 panels); stage 1's 7 x 7 map is one window, so its odd block drops the shift.
  check_explain({t.ckpt}, t.dir, img, 0, 0, 0, 14, 224);
  check_explain({t.ckpt}, t.dir, img, 0, 1, 3, 14, 224);
  check_explain({t.ckpt}, t.dir, img, 1, 1, 0, 7, 224, 2, 5);
  // swin_t (random weights in torchvision's layout, its eval crop of 224): stage 0's 56 x 56 map.
  const std::string dir = fresh("explain_swin_t");
  manual_seed(2);
  auto m = models::create_model("swin_t");
  const std::string weights = dir + "/swin_t.safetensors";
  io::save_safetensors(weights, m->state_dict());
  check_explain({"--weights", weights, "--model", "swin_t", "--format", "torchvision"}, dir, img, 0, 1, 3, 56, 224);
  // A stage or block the model does not have is named.
  const test::CliRun bad = run_attn(dir, {"explain", t.ckpt, img, "--stage", "2", "--out", dir + "/x.png"});
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("swin: expected a stage in [0, 2) and a block of it, got stage 2 block 1"), std::string::npos)
      << bad.err;
  fs::remove_all(dir);
}

// The library side: asking for the attention weights changes no output, and they are probabilities
// whose entries across the shift mask's regions vanish.
TEST(SwinCli, WindowAttentionWeightsLeaveTheOutputUnchanged) {
  manual_seed(4);
  nn::ShiftedWindowAttention a({.dim = 16, .num_heads = 2, .window_h = 7, .window_w = 7, .shift_h = 3, .shift_w = 3});
  const Tensor x = Tensor::randn({2, 14, 14, 16});
  NoGradGuard ng;
  const Tensor plain = a.forward(x);
  Tensor w;
  const Tensor kept = a.forward(x, true, &w);
  EXPECT_TENSOR_NEAR(kept, plain, 1e-6, 1e-5);
  ASSERT_EQ(w.shape(), Shape({8, 2, 49, 49}));
  EXPECT_EQ(a.effective_shift(14, 14), std::make_pair(int64_t(3), int64_t(3)));
  EXPECT_EQ(a.effective_shift(7, 14), std::make_pair(int64_t(0), int64_t(3)));   // the window covers the height
  EXPECT_EQ(a.effective_shift(14, 14, false), std::make_pair(int64_t(0), int64_t(0)));
  const Tensor probs = w.reshape({2, 4, 2, 49, 49});
  EXPECT_TENSOR_NEAR(sum(probs, {-1}), Tensor::ones({2, 4, 2, 49}), 1e-5, 1e-5);
  // Window 0 of the rolled map holds map rows / columns 3..9: one region, nothing masked; window 3
  // (the wrapped corner) mixes four regions.
  const Tensor mask = nn::swin_shift_mask(14, 14, 7, 7, 3, 3);   // (4, 49, 49): 0 or -100
  const auto pv = probs.contiguous().to_vector<float>();
  const auto mv = mask.to_vector<float>();
  int64_t masked = 0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t w = 0; w < 4; ++w)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t i = 0; i < 49 * 49; ++i)
          if (mv[size_t(w * 49 * 49 + i)] < 0) {
            ++masked;
            EXPECT_LT(pv[size_t(((b * 4 + w) * 2 + h) * 49 * 49 + i)], 1e-30f);
          }
  EXPECT_GT(masked, 0);
  EXPECT_EQ(viz::window_of(2, 7, 3), -1);
  EXPECT_EQ(viz::window_of(3, 7, 3), 0);
  EXPECT_EQ(viz::window_of(10, 7, 3), 1);
  EXPECT_EQ(viz::window_of(6, 7, 0), 0);
}

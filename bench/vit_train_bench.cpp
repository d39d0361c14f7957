// The vit_fmnist training step (patch 4, D 192, depth 6, heads 3, MLP 768, drop-path 0.1 as
// configured, label smoothing 0.1, AdamW with timm's parameter groups) at batch 128, f32, on an
// in-memory batch; and its inference (eval mode, no grad) at batch 256. attn against PyTorch 1.13
// running a torch model of the same architecture (bench/peers/vit_train.py) in the same run.
//
// Inference: attn runs the batch in slices (VisionTransformer::inference_chunk); PyTorch is timed whole and
// in slices of 16 and 32 images, and its best is compared.
// --steps 0 skips the training step (for profiling the inference alone).
// --model vit_fmnist_small measures the 2-hour-budget ViT (D 128, heads 4, MLP 256) instead.
// --model swin_fmnist measures the Fashion-MNIST Swin (patch 2, window 7, C 48, depths 2 / 6) against
// torchvision's SwinTransformer of the same sizes (bench/peers/swin_train.py); its JSON line is
// "bench": "swin_train". (--infer-reps 0 skips inference, as --steps 0 skips training.)
//
// --rounds N times training and inference N times, alternating attn and PyTorch, and reports the
// medians of the per-round ratios.
//
//   build/bench/vit_train_bench [--threads 2] [--steps 10] [--infer-reps 10] [--no-peer] [--model NAME]
//                               [--rounds 1]
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/attn.h"
#include "attn/models/vit.h"
#include "attn/ops/loss.h"
#include "attn/optim/adam.h"
#include "bench_util.h"

using namespace attn;

int main(int argc, char** argv) {
  int threads = 2, steps = 10, infer_reps = 10, rounds = 1;
  bool peer = true;
  std::string model_name = "vit_fmnist";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) steps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--infer-reps") && i + 1 < argc) infer_reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-peer")) peer = false;
    else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--model") && i + 1 < argc) model_name = argv[++i];
  }
  set_num_threads(threads);
  manual_seed(0);
  if (model_name != "vit_fmnist" && model_name != "vit_fmnist_small" && model_name != "swin_fmnist") {
    std::fprintf(stderr, "vit_train_bench: expected --model vit_fmnist, vit_fmnist_small or swin_fmnist, got '%s'\n",
                 model_name.c_str());
    return 2;
  }
  const bool swin = model_name == "swin_fmnist";
  auto model = models::create_model(model_name);
  model->train();
  optim::AdamW opt(optim::param_groups_weight_decay(*model, 0.05), {.lr = 1e-3, .weight_decay = 0.05});
  Generator g(1);
  const int64_t B = 128, BI = 256;
  Tensor x = randn({B, 1, 28, 28}, g);
  std::vector<int64_t> ys(B);
  for (auto& y : ys) y = g.randint(10);
  Tensor y = Tensor::from_vector(ys, {B});
  auto step = [&] {
    Tensor loss = cross_entropy(model->forward(x), y, {.label_smoothing = 0.1});
    loss.backward();
    opt.step();
    opt.zero_grad();
  };
  // --steps 0: inference only (profiling). Training is timed in every round (train mode), inference after it.
  auto attn_train = [&] {
    model->train();
    const double t = steps > 0 ? bench::time_ms(step, steps, 2) : NAN;
    model->eval();
    return t;
  };
  Tensor xi = randn({BI, 1, 28, 28}, g);
  auto attn_infer = [&] {
    return bench::time_ms([&] {
      NoGradGuard ng;
      model->forward(xi);
    }, infer_reps, 2);
  };

  // Rounds of (attn training + inference, then PyTorch training + inference): this machine has slow
  // phases lasting seconds to minutes (memory-side: the FMA probe stays the same), and a ratio is only
  // fair within one. Each round's ratios are taken, and their medians reported.
  std::vector<double> attn_tr, torch_tr, train_ratios;
  int torch_chunk = 0;
  nlohmann::json torch_by_chunk = nlohmann::json::object(), rounds_json = nlohmann::json::array();
  std::vector<double> attn_inf, torch_inf, ratios;
  const std::string script = std::string(ATTN_SOURCE_DIR) + (swin ? "/bench/peers/swin_train.py" : "/bench/peers/vit_train.py");
  for (int r = 0; r < rounds; ++r) {
    const double at = attn_train();
    const double a = infer_reps > 0 ? attn_infer() : NAN;
    double t = NAN, tt = NAN;
    if (peer) {
      std::string out = bench::last_line(bench::run_capture(
          "OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 " + script + " --threads " + std::to_string(threads) + " --steps " +
          std::to_string(steps) + " --infer-reps " + std::to_string(infer_reps) + " --model " + model_name +
          " --infer-chunks 0,16,32"));
      try {
        auto j = nlohmann::json::parse(out);
        if (!j.at("ms").is_null()) tt = j.at("ms").get<double>();
        if (!j.at("infer_ms").is_null()) t = j.at("infer_ms").get<double>();
        if (r == 0) {
          torch_chunk = j.value("infer_chunk", 0);
          if (j.contains("infer_ms_by_chunk")) torch_by_chunk = j.at("infer_ms_by_chunk");
        }
        rounds_json.push_back({{"attn_ms", at}, {"torch_ms", tt}, {"attn_infer_ms", a}, {"torch_infer_ms", t},
                               {"torch_infer_chunk", j.value("infer_chunk", 0)}});
      } catch (...) {
        std::fprintf(stderr, "peer failed: %s\n", out.c_str());
      }
    }
    attn_inf.push_back(a);
    torch_inf.push_back(t);
    ratios.push_back(t / a);
    attn_tr.push_back(at);
    torch_tr.push_back(tt);
    train_ratios.push_back(tt / at);
    if (rounds > 1)
      std::printf("  round %d: training attn %.1f ms, PyTorch %.1f ms, %.2fx; inference attn %.1f ms, PyTorch %.1f ms, %.2fx\n",
                  r + 1, at, tt, tt / at, a, t, t / a);
  }
  auto median = [](std::vector<double> v) {   // of the finite entries; NaN when there are none
    v.erase(std::remove_if(v.begin(), v.end(), [](double d) { return !std::isfinite(d); }), v.end());
    if (v.empty()) return double(NAN);
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  };
  const double infer_ms = median(attn_inf), torch_infer_ms = median(torch_inf), infer_ratio = median(ratios);
  const double ms = median(attn_tr), torch_ms = median(torch_tr), train_ratio = median(train_ratios);
  std::printf("%s (%s, drop-path 0.1), f32, %d threads, median\n", model_name.c_str(),
              models::model_entry(model_name).description.c_str(), threads);
  std::printf("  training step, batch %lld, AdamW (%d steps)\n", (long long)B, steps);
  std::printf("    attn     %9.1f ms  %8.0f img/s\n", ms, B / (ms * 1e-3));
  std::printf("    PyTorch  %9.1f ms  %8.0f img/s  (OMP_WAIT_POLICY=PASSIVE)\n", torch_ms, B / (torch_ms * 1e-3));
  std::printf("    attn / PyTorch images/s = %.2fx%s\n", train_ratio,
              rounds > 1 ? " (median of the rounds' ratios; times are medians too)" : "");
  std::printf("  inference, batch %lld (%d reps)\n", (long long)BI, infer_reps);
  const auto* vit = dynamic_cast<const models::VisionTransformer*>(model.get());
  const long chunk = vit ? long(vit->inference_chunk()) : 0;
  std::printf("    attn     %9.1f ms  %8.0f img/s  (slices of %ld images)\n", infer_ms, BI / (infer_ms * 1e-3), chunk);
  std::printf("    PyTorch  %9.1f ms  %8.0f img/s  (best of whole batch / slices of 16 / 32: %s; %s)\n", torch_infer_ms,
              BI / (torch_infer_ms * 1e-3), torch_chunk ? ("slices of " + std::to_string(torch_chunk)).c_str() : "whole",
              torch_by_chunk.dump().c_str());
  std::printf("    attn / PyTorch images/s = %.2fx%s\n", infer_ratio,
              rounds > 1 ? " (median of the rounds' ratios; times are medians too)" : "");
  std::cout << nlohmann::json({{"bench", swin ? "swin_train" : "vit_train"}, {"model", model_name}, {"attn_ms", ms}, {"torch_ms", torch_ms},
                               {"attn_infer_ms", infer_ms}, {"attn_infer_chunk", chunk},
                               {"torch_infer_ms", torch_infer_ms}, {"torch_infer_chunk", torch_chunk},
                               {"torch_infer_ms_by_chunk", torch_by_chunk},
                               {"train_speedup", train_ratio}, {"infer_speedup", infer_ratio},
                               {"rounds", rounds_json}})
                   .dump()
            << std::endl;
}

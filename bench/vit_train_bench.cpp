// The vit_fmnist training step (patch 4, D 192, depth 6, heads 3, MLP 768, drop-path 0.1 as
// configured, label smoothing 0.1, AdamW with timm's parameter groups) at batch 128, f32 or bf16 mixed
// precision, on an in-memory batch; and its inference (eval mode, no grad, f32) at batch 256. attn
// against PyTorch 1.13 running a torch model of the same architecture (bench/peers/vit_train.py) in the
// same run.
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
// --precision bf16: the training step under bf16 mixed precision on both sides (attn: forward, loss and
// backward under AutocastBf16Guard, the optimizer's step outside it, as train::Run's step; PyTorch:
// forward and loss under torch.autocast("cpu", dtype=torch.bfloat16)), and attn's f32 step timed in
// every round as well, after its bf16 one. attn_ms and torch_ms are then the bf16 steps; attn_f32_ms
// is attn's f32 step and speedup_over_f32 the median of the rounds' f32 / bf16 ratios. The targets: the
// bf16 step >= 1.5x PyTorch's bf16 autocast step and >= 1.6x attn's own f32 step. Inference stays f32.
// It needs a CPU with a native bf16 matmul; elsewhere the program says so and measures f32 only.
//
// The training step's GEMMs alone (recorded from one step, then timed back to back on oneDNN, in the
// step's precision; step_gemm_ms) are measured once after the rounds: the floor under any step that runs
// these products on this CPU, and attn's step over it (step_overhead).
//
//   build/bench/vit_train_bench [--threads 2] [--steps 10] [--infer-reps 10] [--no-peer] [--model NAME]
//                               [--rounds 1] [--precision f32|bf16]
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
#include "attn/ops/matmul.h"
#include "attn/optim/adam.h"
#include "bench_util.h"

using namespace attn;

namespace {

// One run of the peer: its median training step and best inference time (NaN where it timed none),
// the slicing of that best and every slicing's time; ok is false where its last line was no JSON.
struct PeerRun {
  double ms = NAN, infer_ms = NAN;
  int infer_chunk = 0;
  nlohmann::json by_chunk;
  bool ok = false;
};

PeerRun run_peer(const std::string& cmd) {
  PeerRun p;
  const std::string out = bench::last_line(bench::run_capture(cmd));
  try {
    const auto j = nlohmann::json::parse(out);
    if (!j.at("ms").is_null()) p.ms = j.at("ms").get<double>();
    if (!j.at("infer_ms").is_null()) p.infer_ms = j.at("infer_ms").get<double>();
    p.infer_chunk = j.value("infer_chunk", 0);
    if (j.contains("infer_ms_by_chunk")) p.by_chunk = j.at("infer_ms_by_chunk");
    p.ok = true;
  } catch (...) {
    std::fprintf(stderr, "peer failed: %s\n", out.c_str());
  }
  return p;
}

struct Options {
  int threads = 2, steps = 10, infer_reps = 10, rounds = 1;
  bool peer = true;
  std::string model = "vit_fmnist", precision = "f32";
};

// The command line; false (after saying why) where it names an unknown model or precision. --precision
// bf16 on a CPU without a native bf16 matmul is said to be not measurable here, and f32 is measured.
bool parse_options(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) o.threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) o.steps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--infer-reps") && i + 1 < argc) o.infer_reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-peer")) o.peer = false;
    else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) o.rounds = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--model") && i + 1 < argc) o.model = argv[++i];
    else if (!std::strcmp(argv[i], "--precision") && i + 1 < argc) o.precision = argv[++i];
  }
  if (o.model != "vit_fmnist" && o.model != "vit_fmnist_small" && o.model != "swin_fmnist") {
    std::fprintf(stderr, "vit_train_bench: expected --model vit_fmnist, vit_fmnist_small or swin_fmnist, got '%s'\n",
                 o.model.c_str());
    return false;
  }
  if (!bench::resolve_precision(o.precision)) {
    std::fprintf(stderr, "vit_train_bench: expected --precision f32 or bf16, got '%s'\n", o.precision.c_str());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_options(argc, argv, o)) return 2;
  const int threads = o.threads, steps = o.steps, infer_reps = o.infer_reps, rounds = o.rounds;
  const bool peer = o.peer;
  const std::string model_name = o.model, precision = o.precision;
  set_num_threads(threads);
  manual_seed(0);
  const bool bf16 = precision == "bf16", swin = model_name == "swin_fmnist";
  auto model = models::create_model(model_name);
  model->train();
  optim::AdamW opt(optim::param_groups_weight_decay(*model, 0.05), {.lr = 1e-3, .weight_decay = 0.05});
  Generator g(1);
  const int64_t B = 128, BI = 256;
  Tensor x = randn({B, 1, 28, 28}, g);
  std::vector<int64_t> ys(B);
  for (auto& y : ys) y = g.randint(10);
  Tensor y = Tensor::from_vector(ys, {B});
  // Forward, loss and backward under bf16 mixed precision where `mixed`; the optimizer's step in f32.
  auto forward_backward = [&](bool mixed) {
    const AutocastBf16Guard mp(mixed);
    Tensor loss = cross_entropy(model->forward(x), y, {.label_smoothing = 0.1});
    loss.backward();
  };
  auto step = [&](bool mixed) {
    forward_backward(mixed);
    opt.step();
    opt.zero_grad();
  };
  // --steps 0: inference only (profiling). Training is timed in every round (train mode), inference after it.
  auto attn_train = [&](bool mixed) {
    model->train();
    const double t = steps > 0 ? bench::time_ms([&] { step(mixed); }, steps, 2) : NAN;
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
  std::vector<double> attn_tr, torch_tr, train_ratios, attn_f32_tr, f32_ratios;
  int torch_chunk = 0;
  nlohmann::json torch_by_chunk = nlohmann::json::object(), rounds_json = nlohmann::json::array();
  std::vector<double> attn_inf, torch_inf, ratios;
  const std::string script = std::string(ATTN_SOURCE_DIR) + (swin ? "/bench/peers/swin_train.py" : "/bench/peers/vit_train.py");
  for (int r = 0; r < rounds; ++r) {
    const double at = attn_train(bf16);
    const double af = bf16 ? attn_train(false) : NAN;   // attn's f32 step, in the same round
    const double a = infer_reps > 0 ? attn_infer() : NAN;
    double t = NAN, tt = NAN;
    if (peer) {
      const PeerRun p = run_peer("OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 " + script + " --threads " +
                                 std::to_string(threads) + " --steps " + std::to_string(steps) + " --infer-reps " +
                                 std::to_string(infer_reps) + " --model " + model_name + " --infer-chunks 0,16,32" +
                                 (bf16 ? " --precision bf16" : ""));
      tt = p.ms;
      t = p.infer_ms;
      if (p.ok && r == 0) {
        torch_chunk = p.infer_chunk;
        if (!p.by_chunk.is_null()) torch_by_chunk = p.by_chunk;
      }
      if (p.ok) {
        rounds_json.push_back({{"attn_ms", at}, {"torch_ms", tt}, {"attn_infer_ms", a}, {"torch_infer_ms", t},
                               {"torch_infer_chunk", p.infer_chunk}});
        if (bf16) rounds_json.back()["attn_f32_ms"] = af;
      }
    }
    attn_inf.push_back(a);
    torch_inf.push_back(t);
    ratios.push_back(t / a);
    attn_tr.push_back(at);
    torch_tr.push_back(tt);
    train_ratios.push_back(tt / at);
    attn_f32_tr.push_back(af);
    f32_ratios.push_back(af / at);
    if (rounds > 1 && bf16)
      std::printf("  round %d: training attn bf16 %.1f ms, f32 %.1f ms (%.2fx), PyTorch bf16 %.1f ms, %.2fx; "
                  "inference attn %.1f ms, PyTorch %.1f ms, %.2fx\n", r + 1, at, af, af / at, tt, tt / at, a, t, t / a);
    else if (rounds > 1)
      std::printf("  round %d: training attn %.1f ms, PyTorch %.1f ms, %.2fx; inference attn %.1f ms, PyTorch %.1f ms, %.2fx\n",
                  r + 1, at, tt, tt / at, a, t, t / a);
  }
  // The step's own GEMMs, timed alone: the floor under the step.
  double gemm_ms = NAN;
  if (steps > 0) {
    model->train();
    std::vector<GemmCall> calls;
    {
      GemmRecorder rec;
      forward_backward(bf16);
      calls = rec.calls();
    }
    opt.zero_grad();
    gemm_ms = 1e3 * time_gemm_calls(calls, 2.0);
    model->eval();
  }
  const double infer_ms = bench::median(attn_inf), torch_infer_ms = bench::median(torch_inf);
  const double infer_ratio = bench::median(ratios);
  const double ms = bench::median(attn_tr), torch_ms = bench::median(torch_tr);
  const double train_ratio = bench::median(train_ratios);
  std::printf("%s (%s, drop-path 0.1), %s, %d threads, median\n", model_name.c_str(),
              models::model_entry(model_name).description.c_str(),
              bf16 ? "training bf16 mixed precision (PyTorch: CPU autocast), inference f32" : "f32", threads);
  std::printf("  training step, batch %lld, AdamW (%d steps)\n", (long long)B, steps);
  std::printf("    %-9s%9.1f ms  %8.0f img/s\n", bf16 ? "attn bf16" : "attn", ms, B / (ms * 1e-3));
  std::printf("    PyTorch  %9.1f ms  %8.0f img/s  (OMP_WAIT_POLICY=PASSIVE%s)\n", torch_ms, B / (torch_ms * 1e-3),
              bf16 ? "; bf16 autocast" : "");
  std::printf("    attn / PyTorch images/s = %.2fx%s\n", train_ratio,
              rounds > 1 ? " (median of the rounds' ratios; times are medians too)" : "");
  std::printf("    the step's GEMMs alone on oneDNN: %.1f ms; attn's step over them %.2fx\n", gemm_ms, ms / gemm_ms);
  nlohmann::json j{{"bench", swin ? "swin_train" : "vit_train"}, {"model", model_name}, {"precision", precision}};
  if (bf16)
    bench::report_bf16(j, B, "img", bench::median(attn_f32_tr), bench::median(f32_ratios), train_ratio, rounds > 1);
  std::printf("  inference, batch %lld (%d reps)\n", (long long)BI, infer_reps);
  const auto* vit = dynamic_cast<const models::VisionTransformer*>(model.get());
  const long chunk = vit ? long(vit->inference_chunk()) : 0;
  std::printf("    attn     %9.1f ms  %8.0f img/s  (slices of %ld images)\n", infer_ms, BI / (infer_ms * 1e-3), chunk);
  std::printf("    PyTorch  %9.1f ms  %8.0f img/s  (best of whole batch / slices of 16 / 32: %s; %s)\n", torch_infer_ms,
              BI / (torch_infer_ms * 1e-3), torch_chunk ? ("slices of " + std::to_string(torch_chunk)).c_str() : "whole",
              torch_by_chunk.dump().c_str());
  std::printf("    attn / PyTorch images/s = %.2fx%s\n", infer_ratio,
              rounds > 1 ? " (median of the rounds' ratios; times are medians too)" : "");
  j.update(nlohmann::json{{"attn_ms", ms}, {"torch_ms", torch_ms}, {"attn_infer_ms", infer_ms},
                           {"attn_infer_chunk", chunk}, {"torch_infer_ms", torch_infer_ms},
                           {"torch_infer_chunk", torch_chunk}, {"torch_infer_ms_by_chunk", torch_by_chunk},
                           {"train_speedup", train_ratio}, {"infer_speedup", infer_ratio}, {"rounds", rounds_json}});
  if (std::isfinite(gemm_ms)) {
    j["step_gemm_ms"] = gemm_ms;
    j["step_overhead"] = ms / gemm_ms;
  }
  std::cout << j.dump() << std::endl;
}

// One bert-mini pre-training step (BertForPreTraining: 4 layers, 256 hidden, 4 heads, FFN 1024,
// dropout 0.1, the decoder tied to the word embeddings), batch 32 x 128 tokens, 19 masked positions per
// sequence, MLM + NSP cross-entropy (train::pretraining_loss), AdamW (weight decay 0.01, not on norms
// and biases), f32 or bf16 mixed precision. attn against PyTorch 1.13 running Hugging Face's module
// tree of the same model (bench/peers/bert_train.py), which computes the MLM logits at every position
// as transformers does; attn runs the MLM head at the masked positions only (as Google's TF BERT
// gathers them). --all-rows also times attn with the head at every position (the same work as the
// peer's).
//
// --rounds N alternates attn and PyTorch N times and reports the medians of the per-round ratios.
//
// --breakdown prints attn's forward + loss, backward and optimizer times apart (medians), and the per-op
// profile of those steps (attn/core/profile.h: ops, GEMMs and each backward node, exclusive times).
//
// --precision bf16: the step under bf16 mixed precision on both sides (attn: forward, loss and backward
// under AutocastBf16Guard, AdamW outside it, as train::Run's step; PyTorch: forward and losses under
// torch.autocast("cpu", dtype=torch.bfloat16)), --all-rows and --breakdown too, and attn's f32 step
// timed in every round as well, after its bf16 one. attn_ms and torch_ms are then the bf16 steps;
// attn_f32_ms is attn's f32 step and speedup_over_f32 the median of the rounds' f32 / bf16 ratios. The
// targets: the bf16 step >= 1.5x PyTorch's bf16 autocast step and >= 1.6x attn's own f32 step. It needs
// a CPU with a native bf16 matmul; elsewhere the program says so and measures f32 only.
//
//   build/bench/bert_train_bench [--threads 2] [--steps 10] [--rounds 1] [--no-peer] [--all-rows] [--breakdown]
//                                [--precision f32|bf16]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/attn.h"
#include "attn/core/profile.h"
#include "attn/data/pretraining.h"
#include "attn/models/bert.h"
#include "attn/ops/loss.h"
#include "attn/optim/adam.h"
#include "attn/train/tasks/pretrain.h"
#include "bench_util.h"

using namespace attn;

namespace {

// 32 instances of 128 tokens, [CLS] A [SEP] B [SEP], masked by Google's rule (19 positions each).
data::PretrainingBatch make_batch(int64_t B, int32_t T) {
  Generator g(1);
  std::vector<data::PretrainingInstance> inst(static_cast<size_t>(B));
  std::vector<int64_t> which;
  for (int64_t b = 0; b < B; ++b) {
    data::PretrainingInstance& in = inst[size_t(b)];
    in.tokens.push_back(101);
    for (int32_t t = 1; t < T - 1; ++t) in.tokens.push_back(t == T / 2 ? 102 : int32_t(1000 + g.randint(29000)));
    in.tokens.push_back(102);
    in.a_end = T / 2 + 1;
    in.is_random_next = g.uniform() < 0.5;
    which.push_back(b);
  }
  const data::MaskVocab v{.ids = {101, 102, 103}, .vocab_size = 30522, .continuation = {}};
  return data::make_pretraining_batch(inst, which, v, {}, 3, 0);
}

// --breakdown: attn's forward + loss, backward and AdamW times apart (medians of `steps`, after one
// warm-up step), forward and backward under bf16 mixed precision where `mixed`.
void print_breakdown(models::BertPreTrainedModel& model, const data::PretrainingBatch& batch, optim::AdamW& opt,
                     int steps, bool mixed) {
  std::vector<double> fwd, bwd, upd;
  for (int i = 0; i < steps + 1; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto t1 = t0, t2 = t0;
    {
      const AutocastBf16Guard mp(mixed);
      train::PretrainingLoss l = train::pretraining_loss(model, batch);
      t1 = std::chrono::steady_clock::now();
      l.loss.backward();
      t2 = std::chrono::steady_clock::now();
    }
    opt.step();
    opt.zero_grad();
    const auto t3 = std::chrono::steady_clock::now();
    if (i == 0) {   // warm-up
      profile::start();
      continue;
    }
    fwd.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    bwd.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    upd.push_back(std::chrono::duration<double, std::milli>(t3 - t2).count());
  }
  const std::vector<profile::OpTime> ops = profile::stop();
  std::printf("  attn breakdown (medians%s): forward + loss %.1f ms, backward %.1f ms, AdamW %.1f ms\n",
              mixed ? ", bf16 mixed precision" : "", bench::median(fwd), bench::median(bwd), bench::median(upd));
  double total = 0;
  for (const auto& op : ops) total += op.seconds;
  for (const auto& op : ops)
    if (op.seconds >= 0.005 * total)
      std::printf("    %-40s %5lld calls/step %8.2f ms/step %5.1f%%\n", op.name, (long long)(op.calls / steps),
                  1e3 * op.seconds / steps, 100 * op.seconds / total);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, steps = 10, rounds = 1;
  bool peer = true, all_rows = false, breakdown = false;
  std::string precision = "f32";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) steps = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--no-peer")) peer = false;
    else if (!std::strcmp(argv[i], "--all-rows")) all_rows = true;
    else if (!std::strcmp(argv[i], "--breakdown")) breakdown = true;
    else if (!std::strcmp(argv[i], "--precision") && i + 1 < argc) precision = argv[++i];
  }
  if (!bench::resolve_precision(precision)) {
    std::fprintf(stderr, "bert_train_bench: expected --precision f32 or bf16, got '%s'\n", precision.c_str());
    return 2;
  }
  const bool bf16 = precision == "bf16";
  set_num_threads(threads);
  manual_seed(0);
  auto model = models::create_bert("bert-mini");
  model->train();
  optim::AdamW opt(optim::param_groups_weight_decay(*model, 0.01), {.lr = 1e-4, .eps = 1e-6, .weight_decay = 0.01});
  const int64_t B = 32, T = 128;
  const data::PretrainingBatch batch = make_batch(B, int32_t(T));
  // Forward, loss and backward under bf16 mixed precision where `mixed`; AdamW in f32.
  const auto step = [&](bool mixed) {
    {
      const AutocastBf16Guard mp(mixed);
      train::PretrainingLoss l = train::pretraining_loss(*model, batch);
      l.loss.backward();
    }
    opt.step();
    opt.zero_grad();
  };
  // The same step with the MLM head at every position (labels -100 elsewhere), as transformers does.
  std::vector<int64_t> labels(size_t(B * T), -100);
  {
    const auto rows = batch.mlm_rows.to_vector<int64_t>(), want = batch.mlm_labels.to_vector<int64_t>();
    for (size_t i = 0; i < rows.size(); ++i) labels[size_t(rows[i])] = want[i];
  }
  const Tensor full_labels = Tensor::from_vector(labels, {B * T});
  const auto step_all_rows = [&] {
    {
      const AutocastBf16Guard mp(bf16);
      const models::BertOutput o =
          model->forward({batch.inputs.input_ids, batch.inputs.token_type_ids, batch.inputs.attention_mask});
      const Tensor mlm =
          cross_entropy(o.prediction_logits.reshape({B * T, -1}), full_labels, {.ignore_index = -100});
      add(mlm, cross_entropy(o.seq_relationship_logits, batch.nsp_labels)).backward();
    }
    opt.step();
    opt.zero_grad();
  };
  if (breakdown) print_breakdown(*model, batch, opt, steps, bf16);
  const std::string script = std::string(ATTN_SOURCE_DIR) + "/bench/peers/bert_train.py";
  std::vector<double> attn_ms, all_ms, torch_ms, ratios, f32_ms, f32_ratios;
  for (int r = 0; r < rounds; ++r) {
    const double a = bench::time_ms([&] { step(bf16); }, steps, 2);
    const double af = bf16 ? bench::time_ms([&] { step(false); }, steps, 2) : NAN;   // attn's f32 step, same round
    const double full = all_rows ? bench::time_ms(step_all_rows, steps, 1) : NAN;
    double t = NAN;
    if (peer) {
      const std::string out = bench::last_line(bench::run_capture(
          "OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 " + script + " --threads " + std::to_string(threads) +
          " --steps " + std::to_string(steps) + (bf16 ? " --precision bf16" : "")));
      try {
        const auto j = nlohmann::json::parse(out);
        if (!j.at("ms").is_null()) t = j.at("ms").get<double>();
      } catch (...) {
        std::fprintf(stderr, "peer failed: %s\n", out.c_str());
      }
    }
    attn_ms.push_back(a);
    all_ms.push_back(full);
    torch_ms.push_back(t);
    ratios.push_back(t / a);
    f32_ms.push_back(af);
    f32_ratios.push_back(af / a);
    if (rounds > 1 && bf16)
      std::printf("  round %d: attn bf16 %.1f ms, f32 %.1f ms (%.2fx), PyTorch bf16 %.1f ms, %.2fx\n", r + 1, a, af,
                  af / a, t, t / a);
    else if (rounds > 1)
      std::printf("  round %d: attn %.1f ms, PyTorch %.1f ms, %.2fx\n", r + 1, a, t, t / a);
  }
  const double a = bench::median(attn_ms), full = bench::median(all_ms), t = bench::median(torch_ms);
  const double ratio = bench::median(ratios);
  std::printf("bert-mini pre-training step (MLM + NSP, AdamW), batch %lld x %lld tokens, %lld masked, %s, %d threads\n",
              (long long)B, (long long)T, (long long)batch.num_masked,
              bf16 ? "bf16 mixed precision (PyTorch: CPU autocast)" : "f32", threads);
  const char* attn_label = bf16 ? "attn bf16" : "attn";
  std::printf("    %-9s%9.1f ms  %8.1f seq/s  (MLM head at the masked positions)\n", attn_label, a, B / (a * 1e-3));
  if (all_rows)
    std::printf("    %-9s%9.1f ms  %8.1f seq/s  (MLM head at every position)\n", attn_label, full, B / (full * 1e-3));
  std::printf("    PyTorch  %9.1f ms  %8.1f seq/s  (transformers' layout: MLM head at every position%s)\n", t,
              B / (t * 1e-3), bf16 ? "; bf16 autocast" : "");
  std::printf("    attn / PyTorch sequences/s = %.2fx%s\n", ratio, rounds > 1 ? " (median of the rounds' ratios)" : "");
  nlohmann::json j = {{"bench", "bert_train"}, {"model", "bert-mini"}, {"batch", B}, {"seq", T},
                      {"attn_ms", a}, {"torch_ms", t}, {"train_speedup", ratio}, {"precision", precision}};
  if (bf16)
    bench::report_bf16(j, B, "seq", bench::median(f32_ms), bench::median(f32_ratios), ratio, rounds > 1);
  if (all_rows) j["attn_all_rows_ms"] = full;
  std::cout << j.dump() << std::endl;
}

// A BERT fine-tuning step: bert-base-uncased as BertForSequenceClassification (2 labels, dropout 0.1 as
// configured), batch 8 x 128 random token ids with token types and full attention masks,
// cross-entropy, AdamW (lr 2e-5, weight decay 0.01 off norms and biases), f32, train mode; attn
// against PyTorch 1.13 running the Hugging Face-layout module tree of tests/golden/gen/bert.py
// (bench/peers/bert_finetune.py) on the same shapes in the same run. --rounds N alternates attn and
// PyTorch N times and reports the medians of the per-round ratios. The peer runs under
// OMP_WAIT_POLICY=PASSIVE; on a machine shared with other work run attn so too (spinning threads that
// lose their core cost it several times over).
//
//   build/bench/bert_finetune_bench [--threads 2] [--steps 5] [--rounds 1] [--model bert-base-uncased]
//                                   [--batch 8] [--seq-len 128] [--no-peer]
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/attn.h"
#include "attn/models/bert.h"
#include "attn/ops/loss.h"
#include "attn/optim/adam.h"
#include "bench_util.h"

using namespace attn;

namespace {

double median_of(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double d) { return !std::isfinite(d); }), v.end());
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, steps = 5, rounds = 1;
  int64_t B = 8, T = 128;
  bool peer = true;
  std::string model_name = "bert-base-uncased";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) steps = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--model") && i + 1 < argc) model_name = argv[++i];
    else if (!std::strcmp(argv[i], "--batch") && i + 1 < argc) B = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--seq-len") && i + 1 < argc) T = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-peer")) peer = false;
  }
  set_num_threads(threads);
  manual_seed(0);
  auto model = models::create_bert(model_name, {{"architecture", "BertForSequenceClassification"}, {"num_labels", 2}});
  model->train();
  optim::AdamW opt(optim::param_groups_weight_decay(*model, 0.01), {.lr = 2e-5, .weight_decay = 0.01});
  Generator g(1);
  std::vector<int64_t> ids(static_cast<size_t>(B * T)), types(static_cast<size_t>(B * T)), labels(static_cast<size_t>(B));
  for (int64_t i = 0; i < B * T; ++i) {
    ids[size_t(i)] = 1000 + g.randint(model->cfg().vocab_size - 1000);
    types[size_t(i)] = i % T >= T / 2 ? 1 : 0;
  }
  for (auto& y : labels) y = g.randint(2);
  const models::BertInputs in{Tensor::from_vector(ids, {B, T}), Tensor::from_vector(types, {B, T}),
                              Tensor::ones({B, T}, DType::i64)};
  const Tensor y = Tensor::from_vector(labels, {B});
  auto step = [&] {
    Tensor loss = cross_entropy(model->forward(in).logits, y);
    loss.backward();
    opt.step();
    opt.zero_grad();
  };
  const std::string script = std::string(ATTN_SOURCE_DIR) + "/bench/peers/bert_finetune.py";
  std::vector<double> attn_ms, torch_ms, ratios;
  for (int r = 0; r < rounds; ++r) {
    const double a = bench::time_ms(step, steps, 1);
    double t = NAN;
    if (peer) {
      const std::string out = bench::last_line(bench::run_capture(
          "OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 " + script + " --threads " + std::to_string(threads) + " --steps " +
          std::to_string(steps) + " --model " + model_name + " --batch " + std::to_string(B) + " --seq-len " +
          std::to_string(T)));
      try {
        t = nlohmann::json::parse(out).at("ms").get<double>();
      } catch (...) {
        std::fprintf(stderr, "peer failed: %s\n", out.c_str());
      }
    }
    attn_ms.push_back(a);
    torch_ms.push_back(t);
    ratios.push_back(t / a);
    if (rounds > 1) std::printf("  round %d: attn %.1f ms, PyTorch %.1f ms, %.2fx\n", r + 1, a, t, t / a);
  }
  const double a = median_of(attn_ms), t = median_of(torch_ms), q = median_of(ratios);
  std::printf("%s fine-tuning step (BertForSequenceClassification, dropout 0.1, AdamW), batch %lld x %lld, f32, "
              "%d threads, median of %d steps\n", model_name.c_str(), (long long)B, (long long)T, threads, steps);
  std::printf("    attn     %9.1f ms  %8.1f sequences/s\n", a, double(B) / (a * 1e-3));
  std::printf("    PyTorch  %9.1f ms  %8.1f sequences/s  (OMP_WAIT_POLICY=PASSIVE)\n", t, double(B) / (t * 1e-3));
  std::printf("    PyTorch / attn time = %.2fx%s\n", q, rounds > 1 ? " (median of the rounds' ratios)" : "");
  std::cout << nlohmann::json({{"bench", "bert_finetune"}, {"model", model_name}, {"batch", B}, {"seq_len", T},
                               {"threads", threads}, {"attn_ms", a}, {"torch_ms", t}, {"speedup", q}})
                   .dump()
            << std::endl;
}

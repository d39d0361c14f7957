// A 784-512-512-10 MLP training step (forward, cross-entropy, backward, AdamW) at batch 128, f32,
// in-memory batches: attn against PyTorch 1.13.1 doing the same work in the same run.
//
//   build/dev/bench/mlp_train_bench [--threads 2] [--steps 200]
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "attn/attn.h"
#include "attn/models/mlp.h"
#include "attn/ops/loss.h"
#include "attn/optim/adam.h"
#include "bench_util.h"

using namespace attn;

int main(int argc, char** argv) {
  int threads = 2, steps = 200;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[++i]);
  }
  set_num_threads(threads);
  manual_seed(0);
  models::MlpClassifier model({});
  optim::AdamW opt(optim::param_groups_weight_decay(model, 0.05), {.lr = 1e-3, .weight_decay = 0.05});
  Generator g(1);
  const int64_t B = 128;
  Tensor x = rand({B, 1, 28, 28}, g);
  std::vector<int64_t> ys(B);
  for (auto& y : ys) y = g.randint(10);
  Tensor y = Tensor::from_vector(ys, {B});
  auto step = [&] {
    Tensor loss = cross_entropy(model.forward(x), y);
    loss.backward();
    opt.step();
    opt.zero_grad();
  };
  const double ms = bench::time_ms(step, steps, 10);
  const std::string peer = std::string(ATTN_SOURCE_DIR) + "/bench/peers/mlp_train.py";
  double torch_ms = NAN;
  std::string setting;
  for (const char* env : {"OMP_WAIT_POLICY=PASSIVE ", ""}) {
    std::string out = bench::last_line(bench::run_capture(std::string(env) + "/usr/bin/python3 " + peer + " --threads " +
                                                          std::to_string(threads) + " --steps " + std::to_string(steps)));
    try {
      double t = nlohmann::json::parse(out).at("ms").get<double>();
      if (!(t >= torch_ms)) { torch_ms = t; setting = *env ? "OMP_WAIT_POLICY=PASSIVE" : "default"; }
    } catch (...) {}
  }
  std::printf("MLP 784-512-512-10 training step, batch %lld, AdamW, f32, %d threads, median of %d\n", (long long)B,
              threads, steps);
  std::printf("  attn     %8.3f ms  %8.0f img/s\n", ms, B / (ms * 1e-3));
  std::printf("  PyTorch  %8.3f ms  %8.0f img/s  (best setting: %s)\n", torch_ms, B / (torch_ms * 1e-3), setting.c_str());
  std::printf("  attn / PyTorch images/s = %.2fx\n", torch_ms / ms);
  std::cout << nlohmann::json({{"bench", "mlp_train"}, {"attn_ms", ms}, {"torch_ms", torch_ms},
                               {"torch_setting", setting}, {"speedup", torch_ms / ms}}).dump()
            << std::endl;
}

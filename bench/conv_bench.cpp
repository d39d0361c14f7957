// A training step (forward + backward) of a small ResNet-ish stack on a batch of 128 1x28x28
// images, f32, 2 threads, against the same stack in PyTorch 1.13 measured in the same run
// (bench/peers/conv.py), plus per-op timings of the 32 -> 32 3x3 conv, batch norm and max pool.
//
//   stack: [conv3x3 (1->32) BN ReLU] [conv3x3 32->32 BN ReLU] x2  maxpool2  [conv3x3 32->32 BN ReLU]
//          global avg pool  linear 32->10  loss = sum(logits * r) / N
//
//   build/bench/conv_bench [--threads 2] [--reps 10] [--batch 128]
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/attn.h"
#include "attn/ops/batch_norm.h"
#include "attn/ops/conv.h"
#include "attn/ops/pool.h"
#include "bench_util.h"

#ifndef ATTN_SOURCE_DIR
#define ATTN_SOURCE_DIR "."
#endif

using namespace attn;

namespace {

struct Block {
  Tensor w, gamma, beta, rm, rv;
};

Block make_block(int64_t cin, int64_t cout, Generator& g) {
  Block b;
  b.w = (randn({cout, cin, 3, 3}, g) * std::sqrt(2.0 / double(cin * 9))).requires_grad_();
  b.gamma = Tensor::ones({cout}).requires_grad_();
  b.beta = Tensor::zeros({cout}).requires_grad_();
  b.rm = Tensor::zeros({cout});
  b.rv = Tensor::ones({cout});
  return b;
}

Tensor apply(const Block& b, const Tensor& x) {
  return relu(batch_norm(conv2d(x, b.w, Tensor(), {1, 1}, {1, 1}), b.rm, b.rv, b.gamma, b.beta, true));
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 10;
  int64_t N = 128;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--batch")) N = std::atoll(argv[++i]);
  }
  set_num_threads(threads);
  Generator g(0);
  std::vector<Block> blocks{make_block(1, 32, g), make_block(32, 32, g), make_block(32, 32, g), make_block(32, 32, g)};
  Tensor fc_w = (randn({10, 32}, g) * 0.1).requires_grad_(), fc_b = Tensor::zeros({10}).requires_grad_();
  Tensor x = randn({N, 1, 28, 28}, g), r = randn({N, 10}, g);

  auto step = [&] {
    for (auto& b : blocks) { b.w.zero_grad(); b.gamma.zero_grad(); b.beta.zero_grad(); }
    fc_w.zero_grad(); fc_b.zero_grad();
    Tensor h = apply(blocks[0], x);
    h = apply(blocks[1], h);
    h = apply(blocks[2], h);
    h = max_pool2d(h, {2, 2});
    h = apply(blocks[3], h);
    h = adaptive_avg_pool2d(h, {1, 1}).reshape({N, 32});
    Tensor loss = sum(linear(h, fc_w, fc_b) * r) / double(N);
    loss.backward();
  };
  const double t_step = bench::time_ms(step, reps, 2);

  // Per-op: the 32 -> 32 conv at 28x28, batch norm (train) and max pool, forward and forward+backward.
  Tensor a = randn({N, 32, 28, 28}, g), w = randn({32, 32, 3, 3}, g) * 0.06;
  Tensor rm = Tensor::zeros({32}), rv = Tensor::ones({32}), gamma = Tensor::ones({32}), beta = Tensor::zeros({32});
  double t_conv_f, t_conv_fb, t_bn_f, t_bn_fb, t_pool_f, t_pool_fb;
  {
    NoGradGuard ng;
    t_conv_f = bench::time_ms([&] { conv2d(a, w, Tensor(), {1, 1}, {1, 1}); }, reps);
    t_bn_f = bench::time_ms([&] { batch_norm(a, rm, rv, gamma, beta, true); }, reps);
    t_pool_f = bench::time_ms([&] { max_pool2d(a, {2, 2}); }, reps);
  }
  Tensor ar = a.clone().requires_grad_(), wr = w.clone().requires_grad_();
  Tensor gr = gamma.clone().requires_grad_(), br = beta.clone().requires_grad_();
  Tensor ones = Tensor::ones({N, 32, 28, 28}), ones_p = Tensor::ones({N, 32, 14, 14});
  t_conv_fb = bench::time_ms([&] { conv2d(ar, wr, Tensor(), {1, 1}, {1, 1}).backward(ones); }, reps);
  t_bn_fb = bench::time_ms([&] { batch_norm(ar, rm, rv, gr, br, true).backward(ones); }, reps);
  t_pool_fb = bench::time_ms([&] { max_pool2d(ar, {2, 2}).backward(ones_p); }, reps);

  const std::string peer = std::string(ATTN_SOURCE_DIR) + "/bench/peers/conv.py";
  std::string out = bench::last_line(bench::run_capture("OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 " + peer +
                                                        " --threads " + std::to_string(threads) + " --reps " +
                                                        std::to_string(reps) + " --batch " + std::to_string(N)));
  nlohmann::json tj;
  try { tj = nlohmann::json::parse(out); } catch (...) { tj = nlohmann::json::object(); }
  auto tv = [&](const char* k) { return tj.contains(k) ? tj[k].get<double>() : NAN; };

  std::printf("small ResNet training step, batch %lld of 1x28x28, f32, %d threads, median of %d (ms)\n",
              (long long)N, threads, reps);
  std::printf("  %-34s %9s %9s %8s\n", "", "attn", "PyTorch", "speedup");
  auto row = [&](const char* name, double ours, double theirs) {
    std::printf("  %-34s %9.2f %9.2f %7.2fx\n", name, ours, theirs, theirs / ours);
  };
  row("train step (fwd + bwd)", t_step, tv("step_ms"));
  row("conv3x3 32->32 28x28 fwd", t_conv_f, tv("conv_f_ms"));
  row("conv3x3 32->32 28x28 fwd+bwd", t_conv_fb, tv("conv_fb_ms"));
  row("batch_norm train fwd", t_bn_f, tv("bn_f_ms"));
  row("batch_norm train fwd+bwd", t_bn_fb, tv("bn_fb_ms"));
  row("max_pool2d 2x2 fwd", t_pool_f, tv("pool_f_ms"));
  row("max_pool2d 2x2 fwd+bwd", t_pool_fb, tv("pool_fb_ms"));
  nlohmann::json j = {{"bench", "conv"}, {"batch", N}, {"threads", threads}, {"attn_step_ms", t_step},
                      {"torch_step_ms", tv("step_ms")}, {"attn_conv_f_ms", t_conv_f}, {"attn_conv_fb_ms", t_conv_fb},
                      {"attn_bn_f_ms", t_bn_f}, {"attn_bn_fb_ms", t_bn_fb}, {"attn_pool_f_ms", t_pool_f},
                      {"attn_pool_fb_ms", t_pool_fb}, {"torch", tj}};
  std::cout << j.dump() << std::endl;
  return 0;
}

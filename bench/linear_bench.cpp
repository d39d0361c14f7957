// linear forward at ViT-B's MLP shape, (197 x 768) . (768 x 3072) + bias, f32, 2 threads:
// attn::linear against a bare oneDNN matmul with pre-packed weights (the ceiling for this shape)
// and against PyTorch's F.linear measured in the same run.
//
// --shape M,K,N measures another shape (e.g. the vit_fmnist GEMMs at batch 256: 12800,192,576).
//
// --train times, instead, the three products of a training step's linear layer, as attn's linear
// node runs them (forward x·Wᵀ + b, dx = dy·W, dW = dyᵀ·x, transposed operands as views), against
// PyTorch's same three: by default at the four linear shapes of vit_fmnist at batch 128 (M = 6,400
// tokens; qkv, proj, fc1, fc2), or at --shape. Its last line, "all", is the FLOP-weighted ratio:
// the training-step speed-up that the GEMMs alone allow.
//
//   build/dev/bench/linear_bench [--threads 2] [--reps 50] [--shape M,K,N] [--train]
#include <array>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.hpp>

#include "attn/attn.h"
#include "bench_util.h"

using namespace attn;

namespace {
int train_products(const std::vector<std::array<long, 3>>& shapes, int threads, int reps) {
  const std::string peer = std::string(ATTN_SOURCE_DIR) + "/bench/peers/linear.py";
  std::printf("linear layer's training products, f32, %d threads, median of %d; PyTorch with OMP_WAIT_POLICY=PASSIVE\n",
              threads, reps);
  std::printf("  %-18s %-8s %10s %10s %9s %9s %7s\n", "M x K -> N", "product", "attn ms", "torch ms", "attn GF/s",
              "torch GF/s", "ratio");
  nlohmann::json rows = nlohmann::json::array();
  double sum_attn = 0, sum_torch = 0;
  for (const auto& [M, K, N] : shapes) {
    Generator g(0);
    Tensor x = randn({M, K}, g), w = randn({N, K}, g), b = randn({N}, g), dy = randn({M, N}, g);
    NoGradGuard ng;
    const double ta[3] = {bench::time_ms([&] { Tensor y = linear(x, w, b); }, reps),
                          bench::time_ms([&] { Tensor dx = matmul(dy, w); }, reps),
                          bench::time_ms([&] { Tensor dw = matmul(dy.transpose(0, 1), x); }, reps)};
    std::string out = bench::last_line(bench::run_capture(
        "OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 " + peer + " --train --threads " + std::to_string(threads) +
        " --reps " + std::to_string(reps) + " --shape " + std::to_string(M) + "," + std::to_string(K) + "," +
        std::to_string(N)));
    double tt[3] = {NAN, NAN, NAN};
    try {
      const auto j = nlohmann::json::parse(out);
      tt[0] = j.at("fwd_ms").get<double>(), tt[1] = j.at("dx_ms").get<double>(), tt[2] = j.at("dw_ms").get<double>();
    } catch (...) {}
    const double gf = 2.0 * M * K * N / 1e6;   // MFLOP, so GFLOP/s = gf / ms
    const char* names[3] = {"x·Wᵀ+b", "dy·W", "dyᵀ·x"};
    char shape[48];
    std::snprintf(shape, sizeof shape, "%ld x %ld -> %ld", M, K, N);
    for (int p = 0; p < 3; ++p) {
      std::printf("  %-18s %-8s %10.3f %10.3f %9.1f %9.1f %6.2fx\n", p == 0 ? shape : "", names[p], ta[p], tt[p],
                  gf / ta[p], gf / tt[p], tt[p] / ta[p]);
      sum_attn += ta[p], sum_torch += tt[p];
    }
    rows.push_back({{"shape", {M, K, N}}, {"attn_ms", {ta[0], ta[1], ta[2]}}, {"torch_ms", {tt[0], tt[1], tt[2]}}});
  }
  std::printf("  all: attn %.2f ms, PyTorch %.2f ms, %.2fx\n", sum_attn, sum_torch, sum_torch / sum_attn);
  nlohmann::json j = {{"bench", "linear_train"}, {"rows", rows}, {"attn_ms", sum_attn}, {"torch_ms", sum_torch},
                      {"speedup", sum_torch / sum_attn}};
  std::cout << j.dump() << std::endl;
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 50;
  long M = 197, K = 768, N = 3072;
  bool train = false, shape_given = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--train")) { train = true; continue; }
    if (i + 1 >= argc) break;
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--shape")) {
      if (std::sscanf(argv[++i], "%ld,%ld,%ld", &M, &K, &N) != 3 || M <= 0 || K <= 0 || N <= 0) {
        std::fprintf(stderr, "linear_bench: expected --shape M,K,N with positive sizes, got '%s'\n", argv[i]);
        return 2;
      }
      shape_given = true;
    }
  }
  set_num_threads(threads);
  if (train) {
    std::vector<std::array<long, 3>> shapes;
    if (shape_given) shapes.push_back({M, K, N});
    else shapes = {{6400, 192, 576}, {6400, 192, 192}, {6400, 192, 768}, {6400, 768, 192}};
    return train_products(shapes, threads, reps);
  }
  const double flop = 2.0 * M * K * N;
  Generator g(0);
  Tensor x = randn({M, K}, g), w = randn({N, K}, g), b = randn({N}, g);
  NoGradGuard ng;
  const double t_attn = bench::time_ms([&] { Tensor y = linear(x, w, b); }, reps);
  // attn's inference path: the same weights in an nn::Linear packed once (nn::pack_linear_weights, as
  // predict / eval / bench do), so that no call re-packs them.
  nn::Linear lin(K, N);
  lin.weight.copy_(w);
  lin.bias.copy_(b);
  const bool packed = nn::pack_linear_weights(lin) == 1;
  const double t_packed = bench::time_ms([&] { Tensor y = lin.forward(x); }, reps);

  // Bare oneDNN: weights reordered once into the primitive's preferred layout.
  using namespace dnnl;
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  memory::desc src_md({M, K}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc w_any({K, N}, memory::data_type::f32, memory::format_tag::any);
  memory::desc w_plain({K, N}, memory::data_type::f32, memory::format_tag::ba);  // w (N, K) as (K, N)
  memory::desc b_md({1, N}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc dst_md({M, N}, memory::data_type::f32, memory::format_tag::ab);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, w_any, b_md, dst_md), eng);
  memory w_src(w_plain, eng, w.raw_data()), w_packed(pd.weights_desc(), eng);
  reorder(w_src, w_packed).execute(s, w_src, w_packed);
  Tensor y = Tensor::empty({M, N});
  memory m_src(src_md, eng, x.raw_data()), m_b(b_md, eng, b.raw_data()), m_dst(dst_md, eng, y.raw_data());
  dnnl::matmul prim(pd);
  const double t_dnnl = bench::time_ms([&] {
    prim.execute(s, {{DNNL_ARG_SRC, m_src}, {DNNL_ARG_WEIGHTS, w_packed}, {DNNL_ARG_BIAS, m_b}, {DNNL_ARG_DST, m_dst}});
    s.wait();
  }, reps);

  // PyTorch, best setting for fp32 (OMP_WAIT_POLICY=PASSIVE), same threads.
  const std::string peer = std::string(ATTN_SOURCE_DIR) + "/bench/peers/linear.py";
  std::string out = bench::last_line(bench::run_capture("OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 " + peer +
                                                        " --threads " + std::to_string(threads) + " --reps " +
                                                        std::to_string(reps) + " --shape " + std::to_string(M) +
                                                        "," + std::to_string(K) + "," + std::to_string(N)));
  double t_torch = NAN;
  try { t_torch = nlohmann::json::parse(out).at("ms").get<double>(); } catch (...) {}

  auto gf = [&](double ms) { return flop / (ms * 1e-3) / 1e9; };
  std::printf("linear (%ldx%ld)·(%ldx%ld)+bias f32, %d threads, median of %d\n", M, K, K, N, threads, reps);
  std::printf("  attn::linear            %8.3f ms  %7.1f GFLOP/s  (plain (N, K) weight: training's path)\n", t_attn,
              gf(t_attn));
  std::printf("  attn::linear, packed    %8.3f ms  %7.1f GFLOP/s  (%s)\n", t_packed, gf(t_packed),
              packed ? "weight packed by nn::pack_linear_weights: inference's path" : "oneDNN kept the plain layout");
  std::printf("  oneDNN pre-packed       %8.3f ms  %7.1f GFLOP/s\n", t_dnnl, gf(t_dnnl));
  std::printf("  PyTorch F.linear        %8.3f ms  %7.1f GFLOP/s\n", t_torch, gf(t_torch));
  std::printf("  attn / oneDNN = %.3f plain, %.3f packed   attn vs PyTorch = %.2fx plain, %.2fx packed\n",
              t_dnnl / t_attn, t_dnnl / t_packed, t_torch / t_attn, t_torch / t_packed);
  std::printf("  target (>= 370 GFLOP/s and >= 95%% of oneDNN pre-packed), packed: %s; plain: %s\n",
              gf(t_packed) >= 370 && t_dnnl / t_packed >= 0.95 ? "met" : "not met",
              gf(t_attn) >= 370 && t_dnnl / t_attn >= 0.95 ? "met" : "not met");
  nlohmann::json j = {{"bench", "linear"}, {"shape", {M, K, N}}, {"attn_ms", t_attn}, {"attn_packed_ms", t_packed},
                      {"onednn_packed_ms", t_dnnl}, {"torch_ms", t_torch}, {"attn_gflops", gf(t_attn)},
                      {"attn_packed_gflops", gf(t_packed)}, {"fraction_of_onednn", t_dnnl / t_attn},
                      {"packed_fraction_of_onednn", t_dnnl / t_packed}};
  std::cout << j.dump() << std::endl;
  return 0;
}

// Scaled dot-product attention at ViT-B's head shape (B = 1, NH = 12, HS = 64, f32): attn's fused
// kernel and naive path against PyTorch 1.13's softmax(q kᵀ/√d) v (bench/peers/attention.py, run
// in the same run with OMP_WAIT_POLICY=PASSIVE and without, best of the two), at the same threads.
//   forward at T = 197, 1024, 4096; forward + backward at T = 1024;
//   peak extra memory of one forward at T = 4096 (attn: Storage bytes, attn/core/memory.h;
//   torch: growth of the process's max RSS).
// --crossover sweeps T and HS for fused vs naive (the data behind the automatic choice in
// src/ops/attention.cpp). On a loaded machine: --min reports the fastest repeat instead of the
// median, --fused-only skips the naive path, and the "fused cpu" column (process CPU time of one
// call, all threads; with OMP_WAIT_POLICY=PASSIVE waiting threads add little) is what the kernel
// costs whatever else runs.
// --shape B,NH,T,HS times only attn at that shape (fused and naive forward, fused forward +
// backward), e.g. 256,4,50,32 for vit_fmnist_small's attention at batch 256; for profiling.
// --rounds N (default 3) measures attn's fused kernel and PyTorch N times, alternating, and reports
// each round's ratios and their median: this machine has slow phases lasting seconds (attn's T=4096
// forward at 350 or 480 ms, the same binary minutes apart), and a ratio is only fair when both sides
// run in the same phase. The naive path and the memory figures are measured once.
//
//   build/bench/attention_bench [--threads 2] [--reps 10] [--rounds 3] [--no-torch] [--crossover] [--min]
//                               [--fused-only] [--shape B,NH,T,HS]
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/attn.h"
#include "attn/core/memory.h"
#include "attn/ops/attention.h"
#include "bench_util.h"

#ifndef ATTN_SOURCE_DIR
#define ATTN_SOURCE_DIR "."
#endif

using namespace attn;

namespace {

int g_reps = 10;
bool g_min = false;
double g_last_cpu_ms = NAN;   // fastest repeat's process CPU time, of the last time_adaptive

double process_cpu_ms() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) * 1e-6;
}

// Median (or with --min the fastest) over repeats, fewer when one run is slow (about 3 s of
// repeats per measurement). Also records the smallest CPU time of a repeat in g_last_cpu_ms.
double time_adaptive(const std::function<void()>& fn) {
  auto a = std::chrono::steady_clock::now();
  fn();
  const double first = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
  const int reps = std::max(1, std::min(g_reps, int(3000.0 / std::max(first, 1e-3))));
  std::vector<double> wall;
  g_last_cpu_ms = INFINITY;
  for (int r = 0; r < reps; ++r) {
    const double c0 = process_cpu_ms();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    wall.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    g_last_cpu_ms = std::min(g_last_cpu_ms, process_cpu_ms() - c0);
  }
  std::sort(wall.begin(), wall.end());
  return g_min ? wall.front() : wall[wall.size() / 2];
}

double fwd_ms(int64_t B, int64_t NH, int64_t T, int64_t HS, SdpaImpl impl, bool causal = false) {
  Generator g(1);
  Tensor q = randn({B, NH, T, HS}, g), k = randn({B, NH, T, HS}, g), v = randn({B, NH, T, HS}, g);
  SdpaOptions o;
  o.impl = impl;
  o.causal = causal;
  NoGradGuard ng;
  return time_adaptive([&] { Tensor y = scaled_dot_product_attention(q, k, v, Tensor(), o).out; });
}

double fwdbwd_ms(int64_t B, int64_t NH, int64_t T, int64_t HS, SdpaImpl impl, bool causal = false) {
  Generator g(2);
  Tensor q = randn({B, NH, T, HS}, g).requires_grad_(), k = randn({B, NH, T, HS}, g).requires_grad_();
  Tensor v = randn({B, NH, T, HS}, g).requires_grad_(), gout = randn({B, NH, T, HS}, g);
  SdpaOptions o;
  o.impl = impl;
  o.causal = causal;
  return time_adaptive([&] {
    q.zero_grad(); k.zero_grad(); v.zero_grad();
    scaled_dot_product_attention(q, k, v, Tensor(), o).out.backward(gout);
  });
}

int64_t peak_extra_bytes(int64_t T, SdpaImpl impl) {
  Generator g(3);
  Tensor q = randn({1, 12, T, 64}, g), k = randn({1, 12, T, 64}, g), v = randn({1, 12, T, 64}, g);
  SdpaOptions o;
  o.impl = impl;
  NoGradGuard ng;
  const int64_t live = memory_stats().live_bytes;
  reset_peak_memory();
  { Tensor y = scaled_dot_product_attention(q, k, v, Tensor(), o).out; }
  return memory_stats().peak_bytes - live;
}

nlohmann::json run_peer(const std::string& args, bool passive) {
  const std::string peer = std::string(ATTN_SOURCE_DIR) + "/bench/peers/attention.py";
  const std::string env = passive ? "OMP_WAIT_POLICY=PASSIVE " : "";
  const std::string out = bench::last_line(bench::run_capture(env + "/usr/bin/python3 " + peer + " " + args));
  try { return nlohmann::json::parse(out); } catch (...) { return nlohmann::json(); }
}

void crossover(int threads) {
  std::printf("fused vs naive, B=1 NH=12, %d threads (ms; ratio = naive / fused)\n", threads);
  std::printf("  %5s %4s %10s %10s %6s %12s %12s %6s\n", "T", "HS", "fwd fused", "fwd naive", "ratio", "f+b fused",
              "f+b naive", "ratio");
  for (int64_t HS : {32, 64, 128})
    for (int64_t T : {8, 16, 32, 64, 128, 197, 256, 512}) {
      const double ff = fwd_ms(1, 12, T, HS, SdpaImpl::fused), fn = fwd_ms(1, 12, T, HS, SdpaImpl::naive);
      const double bf = fwdbwd_ms(1, 12, T, HS, SdpaImpl::fused), bn = fwdbwd_ms(1, 12, T, HS, SdpaImpl::naive);
      std::printf("  %5ld %4ld %10.3f %10.3f %6.2f %12.3f %12.3f %6.2f\n", long(T), long(HS), ff, fn, fn / ff, bf,
                  bn, bn / bf);
    }
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  int rounds = 3;
  bool torch = true, cross = false, naive_on = true;
  int64_t shape[4] = {0, 0, 0, 0};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) g_reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--no-torch")) torch = false;
    else if (!std::strcmp(argv[i], "--crossover")) cross = true;
    else if (!std::strcmp(argv[i], "--min")) g_min = true;
    else if (!std::strcmp(argv[i], "--fused-only")) naive_on = false;
    else if (!std::strcmp(argv[i], "--shape") && i + 1 < argc) {
      long v[4];
      if (std::sscanf(argv[++i], "%ld,%ld,%ld,%ld", &v[0], &v[1], &v[2], &v[3]) != 4 || v[0] < 1 || v[1] < 1 ||
          v[2] < 1 || v[3] < 1) {
        std::fprintf(stderr, "attention_bench: --shape expects B,NH,T,HS (positive integers), got '%s'\n", argv[i]);
        return 2;
      }
      for (int d = 0; d < 4; ++d) shape[d] = v[d];
    }
  }
  set_num_threads(threads);
  if (shape[0]) {
    const int64_t B = shape[0], NH = shape[1], T = shape[2], HS = shape[3];
    const double flop = 4.0 * double(B * NH) * double(T) * double(T) * double(HS);   // QKᵀ and PV
    std::printf("attention B=%ld NH=%ld T=%ld HS=%ld f32, %d threads, isa %s\n", long(B), long(NH), long(T), long(HS),
                threads, isa_name(active_isa()));
    const double ff = fwd_ms(B, NH, T, HS, SdpaImpl::fused), fcpu = g_last_cpu_ms;
    std::printf("  fused forward   %9.3f ms (cpu %9.3f ms)  %6.1f GFLOP/s\n", ff, fcpu, flop / ff * 1e-6);
    if (naive_on) {
      const double fn = fwd_ms(B, NH, T, HS, SdpaImpl::naive);
      std::printf("  naive forward   %9.3f ms  %6.1f GFLOP/s\n", fn, flop / fn * 1e-6);
    }
    const double fb = fwdbwd_ms(B, NH, T, HS, SdpaImpl::fused);
    std::printf("  fused fwd+bwd   %9.3f ms  %6.1f GFLOP/s\n", fb, 3.5 * flop / fb * 1e-6);
    return 0;
  }
  std::printf("attention B=1 NH=12 HS=64 f32, %d threads, isa %s\n", threads, isa_name(active_isa()));
  if (cross) {
    crossover(threads);
    return 0;
  }

  const std::vector<std::string> keys = {"fwd197", "fwd1024", "fwd4096", "fwdbwd1024"};
  auto measure_fused = [&](std::map<std::string, double>& f, std::map<std::string, double>& cpu) {
    for (int64_t T : {197, 1024, 4096}) {
      const std::string key = "fwd" + std::to_string(T);
      f[key] = fwd_ms(1, 12, T, 64, SdpaImpl::fused);
      cpu[key] = g_last_cpu_ms;
    }
    f["fwdbwd1024"] = fwdbwd_ms(1, 12, 1024, 64, SdpaImpl::fused);
    cpu["fwdbwd1024"] = g_last_cpu_ms;
  };
  // PyTorch at its better wait policy, per size.
  auto measure_torch = [&]() {
    std::map<std::string, double> th;
    const std::string targs = "--threads " + std::to_string(threads) + " --reps " + std::to_string(g_reps);
    for (bool passive : {true, false}) {
      nlohmann::json j = run_peer(targs + " --mode time", passive);
      if (j.is_null()) continue;
      auto take = [&](const std::string& key, double ms) {
        if (!th.count(key) || ms < th[key]) th[key] = ms;
      };
      for (auto& [T, ms] : j.at("fwd").items()) take("fwd" + T, ms.get<double>());
      for (auto& [T, ms] : j.at("fwdbwd").items()) take("fwdbwd" + T, ms.get<double>());
    }
    return th;
  };
  auto median = [](std::vector<double> v) {
    v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
    if (v.empty()) return double(NAN);
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  };

  std::map<std::string, std::vector<double>> fused_r, cpu_r, torch_r, ratio_r;
  nlohmann::json rounds_json = nlohmann::json::array();
  for (int r = 0; r < rounds; ++r) {
    std::map<std::string, double> f, cpu, th;
    measure_fused(f, cpu);
    if (torch) th = measure_torch();
    nlohmann::json rj;
    std::printf("  round %d:", r + 1);
    for (const auto& key : keys) {
      const double t = th.count(key) ? th[key] : NAN;
      fused_r[key].push_back(f[key]);
      cpu_r[key].push_back(cpu[key]);
      torch_r[key].push_back(t);
      ratio_r[key].push_back(t / f[key]);
      std::printf("  %s %.2f/%.2f ms %.2fx", key.c_str(), f[key], t, t / f[key]);
      rj[key] = {{"fused_ms", f[key]}, {"fused_cpu_ms", cpu[key]},
                 {"torch_ms", std::isnan(t) ? nlohmann::json() : nlohmann::json(t)}};
    }
    std::printf("\n");
    std::fflush(stdout);
    rounds_json.push_back(rj);
  }
  std::map<std::string, double> fused, fused_cpu, naive, th, ratio;
  for (const auto& key : keys) {
    fused[key] = median(fused_r[key]);
    fused_cpu[key] = median(cpu_r[key]);
    th[key] = median(torch_r[key]);
    ratio[key] = median(ratio_r[key]);
  }
  for (int64_t T : {197, 1024, 4096})
    naive["fwd" + std::to_string(T)] = naive_on ? fwd_ms(1, 12, T, 64, SdpaImpl::naive) : NAN;
  naive["fwdbwd1024"] = naive_on ? fwdbwd_ms(1, 12, 1024, 64, SdpaImpl::naive) : NAN;
  const int64_t mem_fused = peak_extra_bytes(4096, SdpaImpl::fused);
  const int64_t mem_naive = naive_on ? peak_extra_bytes(4096, SdpaImpl::naive) : 0;
  double mem_torch = NAN;
  if (torch) {
    nlohmann::json m = run_peer("--threads " + std::to_string(threads) + " --mode mem --T 4096", true);
    if (!m.is_null()) mem_torch = m.at("peak_extra_bytes").get<double>();
  }
  std::printf("median of %d round(s); torch/fused is the median of the rounds' ratios\n", rounds);
  std::printf("  %-16s %11s %11s %11s %11s %12s %12s\n", "", "attn fused", "fused cpu", "attn naive", "torch",
              "torch/fused", "naive/fused");
  nlohmann::json out = {{"bench", "attention"}, {"threads", threads}, {"isa", isa_name(active_isa())}};
  for (const auto& key : keys) {
    const double f = fused[key], n = naive[key], t = th[key];
    std::printf("  %-16s %8.2f ms %8.2f ms %8.2f ms %8.2f ms %11.2fx %11.2fx\n", key.c_str(), f, fused_cpu[key], n, t,
                ratio[key], n / f);
    auto num = [](double x) { return std::isnan(x) ? nlohmann::json() : nlohmann::json(x); };
    out[key] = {{"fused_ms", f},     {"fused_cpu_ms", fused_cpu[key]}, {"naive_ms", num(n)},
                {"torch_ms", num(t)}, {"torch_over_fused", num(ratio[key])}};
  }
  out["rounds"] = rounds_json;
  std::printf("  peak extra memory, one forward at T=4096: fused %.2f MiB, naive %.1f MiB, torch %.1f MiB "
              "(max RSS growth)\n",
              double(mem_fused) / 1048576.0, double(mem_naive) / 1048576.0, mem_torch / 1048576.0);
  out["mem4096"] = {{"fused_bytes", mem_fused}, {"naive_bytes", mem_naive},
                    {"torch_bytes", std::isnan(mem_torch) ? nlohmann::json() : nlohmann::json(mem_torch)}};
  std::cout << out.dump() << std::endl;
  return 0;
}

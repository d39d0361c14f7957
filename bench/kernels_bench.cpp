// Row kernels against PyTorch 1.13.1, f32, 2 threads: layer norm, softmax, GELU forward and
// backward, fused bias + GELU against PyTorch's unfused add + gelu, fused residual add + layer
// norm against add then layer norm, at (8 x 197 x 768) and (128 x 50 x 192), with a plain
// memcpy of the same tensor as the bandwidth yardstick; and cross-entropy with label smoothing 0.1
// at the translation model's logits (4096 positions x 8000 classes; report only, no target).
// Median of --reps runs each.
//
//   build-NAME/bench/kernels_bench [--threads 2] [--reps 30] [--no-peer] [--cpu-time] [--min]
//
// --min reports the fastest run instead of the median (both sides): on a shared machine the
// median of a 2-thread run can be a scheduler stall (a thread waiting for a core).
// --cpu-time reports process CPU time instead of wall time (both sides): on a machine shared
// with other jobs it measures the work itself, not the waits for a core (meaningful at
// --threads 1; with 2 threads it adds up both threads, spinning included).
//
// Backward rows time the op's own backward (Node::backward on a saved graph; in PyTorch,
// torch.autograd.grad with retain_graph), not leaf accumulation. The PyTorch peer
// (bench/peers/kernels.py) runs twice, with OMP_WAIT_POLICY=PASSIVE and without; the better
// time per row is reported. "speedup" is torch ms / attn ms; "%memcpy" is the op's minimum
// memory traffic over its time, as a fraction of the memcpy bandwidth.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "attn/attn.h"
#include "attn/ops/fused.h"
#include "attn/ops/loss.h"
#include "attn/ops/norm.h"
#include "attn/ops/softmax.h"
#include "bench_util.h"

using namespace attn;

namespace {

struct Row {
  std::string key;     // "op|shape", as the peer names it
  std::string op, shape, target;
  double attn_ms = 0;
  double traffic = 0;  // tensors of the input's size read + written (memcpy: 2)
  double goal = 0;     // required speedup over torch (0: none)
};

bool g_cpu_time = false;
bool g_min = false;

double now_ms() {
  if (g_cpu_time) {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median of `reps` timed runs after 3 warm-up runs.
double median_ms(const std::function<void()>& fn, int reps) {
  for (int i = 0; i < 3; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const double a = now_ms();
    fn();
    t.push_back(now_ms() - a);
  }
  std::sort(t.begin(), t.end());
  return g_min ? t.front() : t[t.size() / 2];
}

std::string shape_name(const Shape& s) {
  std::string r;
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "x" : "") + std::to_string(s[i]);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 30;
  bool peer = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-peer")) peer = false;
    else if (!std::strcmp(argv[i], "--cpu-time")) g_cpu_time = true;
    else if (!std::strcmp(argv[i], "--min")) g_min = true;
  }
  set_num_threads(threads);
  std::printf("attn kernels bench: %d threads, ISA %s, %s of %d runs, %s\n", threads, isa_name(active_isa()),
              g_min ? "fastest" : "median", reps, g_cpu_time ? "process CPU time" : "wall time");

  std::vector<Row> rows;
  std::map<std::string, double> memcpy_ms, memcpy_gbs;
  Generator g(0);
  // Times fn and appends its row for shape sn.
  auto add_row = [&](const std::string& sn, const std::string& op, double traffic, double goal,
                     const std::string& target, const std::function<void()>& fn) {
    Row row;
    row.key = op + "|" + sn;
    row.op = op;
    row.shape = sn;
    row.traffic = traffic;
    row.goal = goal;
    row.target = target;
    row.attn_ms = median_ms(fn, reps);
    rows.push_back(row);
  };
  // Bandwidth yardstick of shape sn: memcpy of x, split across the threads.
  auto add_memcpy = [&](const std::string& sn, const Tensor& x) {
    Tensor dst = Tensor::empty(x.shape());
    const char* src_p = static_cast<const char*>(x.raw_data());
    char* dst_p = static_cast<char*>(dst.raw_data());
    const int64_t nbytes = x.numel() * 4;
    add_row(sn, "memcpy", 2, 0, "", [&] {
      parallel_for(0, nbytes, 1 << 16, [&](int64_t b0, int64_t b1) { std::memcpy(dst_p + b0, src_p + b0, size_t(b1 - b0)); });
    });
    memcpy_ms[sn] = rows.back().attn_ms;
    memcpy_gbs[sn] = 2.0 * double(nbytes) / (rows.back().attn_ms * 1e6);
  };
  for (const Shape& S : {Shape{8, 197, 768}, Shape{128, 50, 192}}) {
    const std::string sn = shape_name(S);
    const int64_t C = S.back();
    const Tensor x = randn(S, g), r = randn(S, g), dy = randn(S, g);
    const Tensor w = randn({C}, g), b = randn({C}, g);
    auto add = [&](const std::string& op, double traffic, double goal, const std::string& target,
                   const std::function<void()>& fn) { add_row(sn, op, traffic, goal, target, fn); };
    NoGradGuard ng;
    add_memcpy(sn, x);

    add("layer_norm.fwd", 2, 1.2, ">=1.2x or 80% memcpy", [&] { Tensor y = layer_norm(x, w, b); });
    add("softmax.fwd", 2, 1.2, ">=1.2x or 80% memcpy", [&] { Tensor y = softmax(x, -1); });
    add("log_softmax.fwd", 2, 1.2, ">=1.2x or 80% memcpy", [&] { Tensor y = log_softmax(x, -1); });
    add("gelu.fwd", 2, 1.2, ">=1.2x or 80% memcpy", [&] { Tensor y = gelu(x); });
    add("gelu_tanh.fwd", 2, 1.2, ">=1.2x or 80% memcpy", [&] { Tensor y = gelu(x, GeluApprox::tanh); });
    add("bias_gelu.fwd", 2, 2.0, ">=2x torch unfused", [&] { Tensor y = bias_gelu(x, b); });
    add("add+gelu.fwd", 3, 0, "(attn unfused)", [&] { Tensor y = gelu(x + b); });
    add("add_layer_norm.fwd", 4, 2.0, ">=2x torch unfused", [&] { auto p = add_layer_norm(x, r, w, b); });
    add("add+layer_norm.fwd", 5, 0, "(attn unfused)", [&] { Tensor y = layer_norm(x + r, w, b); });

    // Backward: the op's own backward on a saved graph.
    auto graph = [&](const std::function<Tensor(const Tensor&)>& f) {
      set_grad_enabled(true);
      Tensor xx = x.detach().requires_grad_();
      Tensor y = f(xx);
      set_grad_enabled(false);
      return y.grad_fn();
    };
    {
      set_grad_enabled(true);
      Tensor xx = x.detach().requires_grad_(), ww = w.detach().requires_grad_(), bb = b.detach().requires_grad_();
      Tensor y = layer_norm(xx, ww, bb);
      set_grad_enabled(false);
      auto node = y.grad_fn();
      add("layer_norm.bwd", 3, 1.5, ">=1.5x", [&] { auto d = node->backward(dy); });
    }
    {
      auto node = graph([](const Tensor& t) { return softmax(t, -1); });
      add("softmax.bwd", 3, 1.5, ">=1.5x", [&] { auto d = node->backward(dy); });
    }
    {
      auto node = graph([](const Tensor& t) { return log_softmax(t, -1); });
      add("log_softmax.bwd", 3, 1.5, ">=1.5x", [&] { auto d = node->backward(dy); });
    }
    {
      auto node = graph([](const Tensor& t) { return gelu(t); });
      add("gelu.bwd", 3, 1.5, ">=1.5x", [&] { auto d = node->backward(dy); });
    }
    {
      auto node = graph([](const Tensor& t) { return gelu(t, GeluApprox::tanh); });
      add("gelu_tanh.bwd", 3, 1.5, ">=1.5x", [&] { auto d = node->backward(dy); });
    }
    {
      set_grad_enabled(true);
      Tensor xx = x.detach().requires_grad_(), bb = b.detach().requires_grad_();
      Tensor y = bias_gelu(xx, bb);
      set_grad_enabled(false);
      auto node = y.grad_fn();
      add("bias_gelu.bwd", 3, 2.0, ">=2x torch unfused", [&] { auto d = node->backward(dy); });
    }
  }

  {
    // Cross-entropy at the translation bench's logits: a 4096-token batch over an 8000-piece vocabulary.
    const Shape S{4096, 8000};
    const std::string sn = shape_name(S);
    const Tensor x = randn(S, g);
    const Tensor t = Tensor::from_vector<int64_t>([&] {
      std::vector<int64_t> v(4096);
      for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t((i * 7919) % 8000);
      return v;
    }(), {4096});
    add_memcpy(sn, x);
    CrossEntropyOptions o;
    o.label_smoothing = 0.1;
    NoGradGuard ng;
    add_row(sn, "cross_entropy.fwd", 1, 0, "(report)", [&] { Tensor y = cross_entropy(x, t, o); });
    set_grad_enabled(true);
    Tensor xx = x.detach().requires_grad_();
    Tensor y = cross_entropy(xx, t, o);
    set_grad_enabled(false);
    auto node = y.grad_fn();
    const Tensor one = Tensor::scalar(1.0, DType::f32);
    add_row(sn, "cross_entropy.bwd", 2, 0, "(report)", [&] { auto d = node->backward(one); });
  }

  // The PyTorch peer, with and without OMP_WAIT_POLICY=PASSIVE; the better time per row.
  std::map<std::string, double> torch_ms;
  if (peer) {
    const std::string script = std::string(ATTN_SOURCE_DIR) + "/bench/peers/kernels.py";
    const std::string args = " --threads " + std::to_string(threads) + " --reps " + std::to_string(reps) +
                             (g_cpu_time ? " --cpu-time" : "") + (g_min ? " --min" : "");
    for (const char* env : {"env OMP_WAIT_POLICY=PASSIVE ", "env -u OMP_WAIT_POLICY "}) {
      const std::string out = bench::run_capture(std::string(env) + "/usr/bin/python3 " + script + args);
      try {
        const auto j = nlohmann::json::parse(bench::last_line(out));
        for (auto it = j.begin(); it != j.end(); ++it) {
          const double v = it.value().get<double>();
          auto [pos, fresh] = torch_ms.emplace(it.key(), v);
          if (!fresh) pos->second = std::min(pos->second, v);
        }
      } catch (const std::exception& e) {
        std::printf("peer (%s) failed: %s\n%s\n", env, e.what(), out.c_str());
      }
    }
  }

  std::printf("\n%-20s %-12s %9s %9s %8s %8s  %s\n", "op", "shape", "attn ms", "torch ms", "speedup", "%memcpy",
              "target");
  nlohmann::json summary = {{"bench", "kernels"}, {"threads", threads}, {"rows", nlohmann::json::array()}};
  bool all_met = peer;
  for (const Row& row : rows) {
    const auto t = torch_ms.find(row.key);
    const double mc = memcpy_ms[row.shape];
    const double bw = row.traffic / 2.0 * mc / row.attn_ms * 100.0;
    char torch_col[32] = "-", ratio_col[32] = "-";
    if (t != torch_ms.end()) {
      std::snprintf(torch_col, sizeof torch_col, "%.3f", t->second);
      std::snprintf(ratio_col, sizeof ratio_col, "%.2fx", t->second / row.attn_ms);
    }
    std::string verdict;
    nlohmann::json jr = {{"op", row.op}, {"shape", row.shape}, {"attn_ms", row.attn_ms}, {"memcpy_fraction", bw / 100.0}};
    if (t != torch_ms.end()) jr["torch_ms"] = t->second;
    if (row.goal > 0 && t != torch_ms.end()) {
      const bool ok = t->second / row.attn_ms >= row.goal || (row.goal < 1.5 && bw >= 80.0);
      verdict = ok ? "  ok" : "  MISSED";
      jr["goal"] = row.goal;
      jr["met"] = ok;
      all_met = all_met && ok;
    }
    summary["rows"].push_back(jr);
    std::printf("%-20s %-12s %9.3f %9s %8s %7.0f%%  %s%s\n", row.op.c_str(), row.shape.c_str(), row.attn_ms, torch_col,
                ratio_col, bw, row.target.c_str(), verdict.c_str());
  }
  std::printf("\nmemcpy bandwidth (read + write):");
  for (const auto& [sn, gbs] : memcpy_gbs) std::printf("  %s %.1f GB/s", sn.c_str(), gbs);
  std::printf("\n");
  // The summary line bench/run_all.sh collects (last line of the output).
  summary["met"] = all_met;
  std::printf("%s\n", summary.dump().c_str());
  return 0;
}

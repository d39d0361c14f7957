// Small helpers shared by the benchmark programs: timing (median of repeats), running the PyTorch
// peer script in the same run, and printing rows.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/ops/matmul.h"

namespace attn::bench {

// Wall time in milliseconds of `fn` over `reps` runs after `warmup` runs: the median and the fastest.
struct Timing {
  double median = NAN, min = NAN;
};

inline Timing time_stats(const std::function<void()>& fn, int reps = 30, int warmup = 3) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  t.reserve(size_t(reps));
  for (int i = 0; i < reps; ++i) {
    auto a = std::chrono::steady_clock::now();
    fn();
    auto b = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::milli>(b - a).count());
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front()};
}

// Median wall time in milliseconds of `fn` over `reps` runs after `warmup` runs.
inline double time_ms(const std::function<void()>& fn, int reps = 30, int warmup = 3) {
  return time_stats(fn, reps, warmup).median;
}

// Runs a command and returns its stdout (the peers print JSON on their last line).
inline std::string run_capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

inline std::string last_line(const std::string& s) {
  size_t end = s.find_last_not_of("\n");
  if (end == std::string::npos) return "";
  size_t start = s.find_last_of('\n', end);
  return s.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
}

// A training bench's --precision: false where it is neither f32 nor bf16 (the caller says so). bf16 on a
// CPU without a native bf16 matmul becomes f32, with a line that says it is not measurable here.
inline bool resolve_precision(std::string& precision) {
  if (precision != "f32" && precision != "bf16") return false;
  if (precision == "bf16" && !bf16_gemm_native_available()) {
    std::printf("--precision bf16: not measurable here (this CPU has no native bf16 matmul); measuring f32\n");
    precision = "f32";
  }
  return true;
}

// The median of the finite entries of v; NaN when there are none.
inline double median(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double d) { return !std::isfinite(d); }), v.end());
  if (v.empty()) return double(NAN);
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// "met" / "not met" for a speed-up against its target; "not measured" where there is none.
inline const char* target_state(double ratio, double target) {
  return !std::isfinite(ratio) ? "not measured" : ratio >= target ? "met" : "not met";
}

// A training bench's --precision bf16 lines: attn's f32 step beside the bf16 one (`items` per step, named
// `unit`), the bf16 step's speed-ups over it and over PyTorch's bf16 autocast step, and the two targets
// (>= 1.5x PyTorch, >= 1.6x attn f32); printed, and added to the JSON line `j`.
inline void report_bf16(nlohmann::json& j, int64_t items, const char* unit, double f32_ms, double over_f32,
                        double over_torch, bool rounds) {
  std::printf("    attn f32 %9.1f ms  %8.1f %s/s  (the same step in f32)\n", f32_ms, double(items) / (f32_ms * 1e-3),
              unit);
  std::printf("    attn bf16 / attn f32 %s/s = %.2fx%s\n", unit, over_f32,
              rounds ? " (median of the rounds' ratios)" : "");
  std::printf("  target training step >= 1.5x PyTorch bf16 autocast: %s (%.2fx)\n", target_state(over_torch, 1.5),
              over_torch);
  std::printf("  target training step >= 1.6x attn f32: %s (%.2fx)\n", target_state(over_f32, 1.6), over_f32);
  j["attn_f32_ms"] = f32_ms;
  j["speedup_over_f32"] = over_f32;
  j["target_over_torch"] = target_state(over_torch, 1.5);
  j["target_over_f32"] = target_state(over_f32, 1.6);
}

}  // namespace attn::bench

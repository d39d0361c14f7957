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

}  // namespace attn::bench

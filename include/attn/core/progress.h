// A one-line progress bar with rate and ETA, redrawn in place on a terminal and printed every
// few seconds as plain lines otherwise (logs, CI).
//
//   attn::ProgressBar bar("epoch 1/5", steps, "img");
//   for (...) { ...; bar.update(step + 1, batch, {{"loss", loss}, {"acc", acc}}); }
//   bar.finish();
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace attn {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, std::string unit = "it");
  // `done` steps finished so far; `items` processed in this step (for the rate); extra fields shown.
  void update(int64_t done, int64_t items, const std::vector<std::pair<std::string, double>>& fields = {});
  void finish();
  double elapsed_seconds() const;
  double rate() const;   // items per second since the start

 private:
  void draw(bool final_line);
  std::string label_, unit_;
  int64_t total_, done_ = 0, items_ = 0;
  std::vector<std::pair<std::string, double>> fields_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  bool tty_;
  bool finished_ = false;
};

std::string format_duration(double seconds);   // "1:05:09", "4:02"
std::string format_fixed(double v, int decimals = 4);   // "0.4938"

}  // namespace attn

#include "attn/core/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace attn {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const int64_t t = int64_t(s + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(t / 3600), (long long)(t / 60 % 60), (long long)(t % 60));
  else std::snprintf(buf, sizeof buf, "%lld:%02lld", (long long)(t / 60), (long long)(t % 60));
  return buf;
}

ProgressBar::ProgressBar(std::string label, int64_t total, std::string unit)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total),
      start_(std::chrono::steady_clock::now()), last_draw_(start_), tty_(isatty(fileno(stderr))) {}

double ProgressBar::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

double ProgressBar::rate() const {
  const double e = elapsed_seconds();
  return e > 0 ? double(items_) / e : 0.0;
}

void ProgressBar::update(int64_t done, int64_t items, const std::vector<std::pair<std::string, double>>& fields) {
  done_ = done;
  items_ += items;
  fields_ = fields;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_draw_).count();
  if ((tty_ && since >= 0.1) || (!tty_ && since >= 10.0) || done_ == total_) {
    last_draw_ = now;
    draw(false);
  }
}

void ProgressBar::draw(bool final_line) {
  const double e = elapsed_seconds();
  const double frac = total_ > 0 ? double(done_) / double(total_) : 1.0;
  const double eta = done_ > 0 ? e * double(total_ - done_) / double(done_) : NAN;
  constexpr int W = 24;
  const int fill = int(frac * W + 1e-9);
  std::string bar(size_t(fill), '#');
  bar.append(size_t(W - fill), '.');
  std::string f;
  char buf[64];
  for (const auto& [k, v] : fields_) {
    std::snprintf(buf, sizeof buf, " %s %.4g", k.c_str(), v);
    f += buf;
  }
  std::fprintf(stderr, "%s%s [%s] %lld/%lld%s | %.1f %s/s | %s elapsed, ETA %s%s", tty_ ? "\r\033[K" : "",
               label_.c_str(), bar.c_str(), (long long)done_, (long long)total_, f.c_str(), rate(), unit_.c_str(),
               format_duration(e).c_str(), final_line ? "0:00" : format_duration(eta).c_str(),
               tty_ && !final_line ? "" : "\n");
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  if (tty_ || done_ != total_) draw(true);
}

std::string format_fixed(double v, int decimals) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

}  // namespace attn

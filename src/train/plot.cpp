#include "attn/train/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "attn/io/safetensors.h"

namespace attn::train {

namespace {
struct Range { double lo = INFINITY, hi = -INFINITY; };
void widen(Range& r, double v) { if (std::isfinite(v)) { r.lo = std::min(r.lo, v); r.hi = std::max(r.hi, v); } }
void settle(Range& r) {
  if (!(r.lo <= r.hi)) { r.lo = 0; r.hi = 1; }
  if (r.hi - r.lo < 1e-12) { r.lo -= 0.5; r.hi += 0.5; }
}
std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;"; else if (c == '>') o += "&gt;"; else if (c == '&') o += "&amp;"; else o += c;
  }
  return o;
}
std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}
}  // namespace

void write_svg_plot(const std::string& path, const std::string& title, const std::string& xlabel,
                    const std::vector<Series>& series) {
  const double W = 760, H = 420, L = 70, R = 70, T = 40, B = 50;
  Range rx, ry, ry2;
  bool has_right = false;
  for (const auto& s : series) {
    for (double v : s.x) widen(rx, v);
    for (double v : s.y) widen(s.right_axis ? ry2 : ry, v);
    has_right |= s.right_axis;
  }
  settle(rx); settle(ry); settle(ry2);
  auto X = [&](double v) { return L + (v - rx.lo) / (rx.hi - rx.lo) * (W - L - R); };
  auto Y = [&](const Range& r, double v) { return H - B - (v - r.lo) / (r.hi - r.lo) * (H - T - B); };
  static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
    << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n";
  o << "<text x='" << W / 2 << "' y='22' text-anchor='middle' font-size='15'>" << esc(title) << "</text>\n";
  o << "<rect x='" << L << "' y='" << T << "' width='" << W - L - R << "' height='" << H - T - B
    << "' fill='none' stroke='#444'/>\n";
  for (int i = 0; i <= 5; ++i) {
    const double fx = rx.lo + (rx.hi - rx.lo) * i / 5, fy = ry.lo + (ry.hi - ry.lo) * i / 5;
    o << "<line x1='" << X(fx) << "' y1='" << T << "' x2='" << X(fx) << "' y2='" << H - B << "' stroke='#eee'/>\n";
    o << "<text x='" << X(fx) << "' y='" << H - B + 16 << "' text-anchor='middle'>" << num(fx) << "</text>\n";
    o << "<text x='" << L - 6 << "' y='" << Y(ry, fy) + 4 << "' text-anchor='end'>" << num(fy) << "</text>\n";
    if (has_right) {
      const double f2 = ry2.lo + (ry2.hi - ry2.lo) * i / 5;
      o << "<text x='" << W - R + 6 << "' y='" << Y(ry2, f2) + 4 << "'>" << num(f2) << "</text>\n";
    }
  }
  o << "<text x='" << (L + W - R) / 2 << "' y='" << H - 12 << "' text-anchor='middle'>" << esc(xlabel) << "</text>\n";
  for (size_t k = 0; k < series.size(); ++k) {
    const auto& s = series[k];
    const Range& r = s.right_axis ? ry2 : ry;
    o << "<polyline fill='none' stroke='" << colors[k % 6] << "' stroke-width='1.8' points='";
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i)
      if (std::isfinite(s.y[i])) o << X(s.x[i]) << ',' << Y(r, s.y[i]) << ' ';
    o << "'/>\n";
    o << "<text x='" << L + 10 << "' y='" << T + 16 + 15 * double(k) << "' fill='" << colors[k % 6] << "'>"
      << esc(s.name) << (s.right_axis ? " (right axis)" : "") << "</text>\n";
  }
  o << "</svg>\n";
  io::write_file_atomic(path, o.str());
}

}  // namespace attn::train

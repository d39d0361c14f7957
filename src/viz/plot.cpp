#include "attn/viz/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <utility>

#include "attn/core/error.h"
#include "attn/io/safetensors.h"

namespace attn::viz {

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

// A tick step: mant × 10^exp with mant in {1, 2, 5}.
struct TickStep {
  int mant = 1, exp = 0;
  double value() const { return exp >= 0 ? mant * std::pow(10.0, exp) : mant / std::pow(10.0, -exp); }
  // i steps, as the double nearest to the decimal value (0.55, not 11 × 0.05 = 0.55000000000000004).
  double at(double i) const { return exp >= 0 ? i * mant * std::pow(10.0, exp) : i * mant / std::pow(10.0, -exp); }
};

// The first and last multiples of s inside [lo, hi] (a little slack for rounding at the ends).
std::pair<double, double> tick_span(double lo, double hi, const TickStep& s) {
  const double v = s.value(), slack = 1e-9;
  return {std::ceil(lo / v - slack), std::floor(hi / v + slack)};
}

TickStep tick_step(double lo, double hi, int max_ticks) {
  TickStep s;
  s.exp = int(std::floor(std::log10((hi - lo) / max_ticks))) - 1;
  for (int tries = 0; tries < 12; ++tries) {
    for (int m : {1, 2, 5}) {
      s.mant = m;
      const auto [first, last] = tick_span(lo, hi, s);
      if (last - first + 1 <= max_ticks) return s;
    }
    ++s.exp;
  }
  return s;
}
}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int max_ticks) {
  ATTN_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi && max_ticks >= 2,
             "nice_ticks: expected finite lo <= hi and max_ticks >= 2, got lo ", lo, ", hi ", hi, ", max_ticks ",
             max_ticks);
  if (lo == hi) return {lo};
  const TickStep s = tick_step(lo, hi, max_ticks);
  const auto [first, last] = tick_span(lo, hi, s);
  std::vector<double> t;
  for (double i = first; i <= last; ++i) t.push_back(s.at(i) == 0 ? 0.0 : s.at(i));   // no -0
  return t;
}

std::string tick_label(double v, double step) {
  int decimals = 0;   // the fewest that write every multiple of step exactly
  while (decimals < 12 && std::abs(step * std::pow(10.0, decimals) - std::round(step * std::pow(10.0, decimals))) >
                              1e-6 * step * std::pow(10.0, decimals))
    ++decimals;
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  std::string out = b;
  if (out.find_first_not_of("-0.") == std::string::npos && out[0] == '-') out.erase(0, 1);   // "-0.00" -> "0.00"
  return out;
}

namespace {
// The ticks of one axis and their labels.
struct TickAxis {
  std::vector<double> at;
  std::vector<std::string> label;
};
TickAxis axis_of(const Range& r) {
  TickAxis a;
  a.at = nice_ticks(r.lo, r.hi, 8);
  const double step = a.at.size() > 1 ? a.at[1] - a.at[0] : 1.0;
  for (double v : a.at) a.label.push_back(tick_label(v, step));
  return a;
}

// A colour per series, cycling.
const char* series_colour(size_t k) {
  static const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};
  return colours[k % 6];
}

// The legend: one row under the title, a swatch (line or dot) before each name.
void legend(std::ostringstream& o, const std::vector<Series>& series, double x, double y) {
  for (size_t k = 0; k < series.size(); ++k) {
    const auto& s = series[k];
    const std::string name = s.name + (s.right_axis ? " (right axis)" : "");
    if (s.markers)
      o << "<circle cx='" << x + 9 << "' cy='" << y - 4 << "' r='3.5' fill='" << series_colour(k) << "'/>\n";
    else
      o << "<line x1='" << x << "' y1='" << y - 4 << "' x2='" << x + 18 << "' y2='" << y - 4 << "' stroke='"
        << series_colour(k) << "' stroke-width='2.5'/>\n";
    o << "<text x='" << x + 24 << "' y='" << y << "'>" << esc(name) << "</text>\n";
    x += 24 + 7.0 * double(name.size()) + 22;   // ~7 px a character at 12 px
  }
}
}  // namespace

void write_svg_plot(const std::string& path, const std::string& title, const std::string& xlabel,
                    const std::vector<Series>& series) {
  const double W = 760, H = 430, L = 70, R = 70, T = 58, B = 50;
  Range rx, ry, ry2;
  bool has_right = false;
  for (const auto& s : series) {
    for (double v : s.x) widen(rx, v);
    for (double v : s.y) widen(s.right_axis ? ry2 : ry, v);
    has_right |= s.right_axis;
  }
  settle(rx); settle(ry); settle(ry2);
  for (Range* r : {&ry, &ry2}) {   // 4% air above and below the curves
    const double pad = 0.04 * (r->hi - r->lo);
    r->lo -= pad, r->hi += pad;
  }
  auto X = [&](double v) { return L + (v - rx.lo) / (rx.hi - rx.lo) * (W - L - R); };
  auto Y = [&](const Range& r, double v) { return H - B - (v - r.lo) / (r.hi - r.lo) * (H - T - B); };
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
    << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n";
  o << "<text x='" << W / 2 << "' y='22' text-anchor='middle' font-size='15'>" << esc(title) << "</text>\n";
  legend(o, series, L, 44);
  // Grid lines and tick labels at round values: x below, y at the left, the right axis at the right.
  const TickAxis ax = axis_of(rx), ay = axis_of(ry);
  for (size_t i = 0; i < ax.at.size(); ++i) {
    const double x = X(ax.at[i]);
    o << "<line x1='" << x << "' y1='" << T << "' x2='" << x << "' y2='" << H - B + 4 << "' stroke='#e4e4e4'/>\n";
    o << "<text x='" << x << "' y='" << H - B + 18 << "' text-anchor='middle'>" << ax.label[i] << "</text>\n";
  }
  for (size_t i = 0; i < ay.at.size(); ++i) {
    const double y = Y(ry, ay.at[i]);
    o << "<line x1='" << L - 4 << "' y1='" << y << "' x2='" << W - R << "' y2='" << y << "' stroke='#e4e4e4'/>\n";
    o << "<text x='" << L - 7 << "' y='" << y + 4 << "' text-anchor='end'>" << ay.label[i] << "</text>\n";
  }
  if (has_right) {
    const TickAxis a2 = axis_of(ry2);
    for (size_t i = 0; i < a2.at.size(); ++i) {
      const double y = Y(ry2, a2.at[i]);
      o << "<line x1='" << W - R << "' y1='" << y << "' x2='" << W - R + 4 << "' y2='" << y << "' stroke='#444'/>\n";
      o << "<text x='" << W - R + 7 << "' y='" << y + 4 << "'>" << a2.label[i] << "</text>\n";
    }
  }
  o << "<rect x='" << L << "' y='" << T << "' width='" << W - L - R << "' height='" << H - T - B
    << "' fill='none' stroke='#444'/>\n";
  o << "<text x='" << (L + W - R) / 2 << "' y='" << H - 12 << "' text-anchor='middle'>" << esc(xlabel) << "</text>\n";
  for (size_t k = 0; k < series.size(); ++k) {
    const auto& s = series[k];
    const Range& r = s.right_axis ? ry2 : ry;
    if (s.markers) {
      for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i)
        if (std::isfinite(s.y[i]))
          o << "<circle cx='" << X(s.x[i]) << "' cy='" << Y(r, s.y[i]) << "' r='3.5' fill='" << series_colour(k)
            << "' fill-opacity='0.8'/>\n";
    } else {
      o << "<polyline fill='none' stroke='" << series_colour(k) << "' stroke-width='1.8' points='";
      for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i)
        if (std::isfinite(s.y[i])) o << X(s.x[i]) << ',' << Y(r, s.y[i]) << ' ';
      o << "'/>\n";
    }
  }
  o << "</svg>\n";
  io::write_file_atomic(path, o.str());
}

std::vector<int64_t> confusion_matrix(const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions,
                                      int64_t num_classes) {
  ATTN_CHECK(num_classes > 0, "confusion_matrix: expected at least one class, got ", num_classes);
  ATTN_CHECK(labels.size() == predictions.size(), "confusion_matrix: expected as many predictions as labels, got ",
             predictions.size(), " and ", labels.size());
  std::vector<int64_t> m(size_t(num_classes * num_classes), 0);
  for (size_t i = 0; i < labels.size(); ++i) {
    ATTN_CHECK(labels[i] >= 0 && labels[i] < num_classes && predictions[i] >= 0 && predictions[i] < num_classes,
               "confusion_matrix: example ", i, " has label ", labels[i], " and prediction ", predictions[i],
               ", expected both in [0, ", num_classes, ")");
    ++m[size_t(labels[i] * num_classes + predictions[i])];
  }
  return m;
}

void write_confusion_svg(const std::string& path, const std::string& title, const std::vector<std::string>& class_names,
                         const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions) {
  const int64_t C = int64_t(class_names.size());
  ATTN_CHECK(C >= 1 && C <= 100, "write_confusion_svg: expected 1 to 100 classes, got ", C);
  const std::vector<int64_t> m = confusion_matrix(labels, predictions, C);
  size_t longest = 1;
  for (const auto& n : class_names) longest = std::max(longest, n.size());
  const double cell = C <= 12 ? 44 : C <= 30 ? 26 : 14, font = C <= 12 ? 12 : C <= 30 ? 9 : 6;
  const double label_w = std::min(220.0, 7.0 * double(longest) * font / 12 + 12);
  const double L = label_w + 24, T = 48 + label_w, R = 90, B = 30;
  const double W = L + cell * double(C) + R, H = T + cell * double(C) + B;
  int64_t correct = 0;
  for (int64_t k = 0; k < C; ++k) correct += m[size_t(k * C + k)];
  const double n = double(labels.size());
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
    << "' font-family='sans-serif' font-size='" << font << "'>\n<rect width='100%' height='100%' fill='white'/>\n";
  o << "<text x='" << W / 2 << "' y='20' text-anchor='middle' font-size='14'>" << esc(title) << ": accuracy "
    << num(n > 0 ? 100.0 * double(correct) / n : 0.0) << "% of " << labels.size() << "</text>\n";
  o << "<text x='" << L + cell * double(C) / 2 << "' y='36' text-anchor='middle' font-size='12'>predicted</text>\n";
  o << "<text x='12' y='" << T + cell * double(C) / 2 << "' text-anchor='middle' font-size='12' transform='rotate(-90 12 "
    << T + cell * double(C) / 2 << ")'>true class</text>\n";
  for (int64_t k = 0; k < C; ++k) {
    const double c = double(k) * cell + cell / 2;
    o << "<text x='" << L - 6 << "' y='" << T + c + font / 3 << "' text-anchor='end'>" << esc(class_names[size_t(k)])
      << "</text>\n";
    o << "<text x='" << L + c + font / 3 << "' y='" << T - 6 << "' transform='rotate(-90 " << L + c + font / 3 << " "
      << T - 6 << ")'>" << esc(class_names[size_t(k)]) << "</text>\n";
  }
  for (int64_t t = 0; t < C; ++t) {
    int64_t row = 0;
    for (int64_t p = 0; p < C; ++p) row += m[size_t(t * C + p)];
    for (int64_t p = 0; p < C; ++p) {
      const int64_t v = m[size_t(t * C + p)];
      const double share = row > 0 ? double(v) / double(row) : 0.0;
      // white -> blue on the diagonal, white -> red off it
      const int a = int(std::lround(255 * (1 - share)));
      char fill[16];
      if (t == p)
        std::snprintf(fill, sizeof fill, "#%02x%02xff", a, a);
      else
        std::snprintf(fill, sizeof fill, "#ff%02x%02x", a, a);
      const double x = L + double(p) * cell, y = T + double(t) * cell;
      o << "<rect x='" << x << "' y='" << y << "' width='" << cell << "' height='" << cell << "' fill='" << fill
        << "' stroke='#ddd'/>\n";
      if (v > 0)
        o << "<text x='" << x + cell / 2 << "' y='" << y + cell / 2 + font / 3 << "' text-anchor='middle' fill='"
          << (share > 0.6 ? "white" : "black") << "'>" << v << "</text>\n";
    }
    o << "<text x='" << L + cell * double(C) + 6 << "' y='" << T + double(t) * cell + cell / 2 + font / 3 << "'>"
      << (row > 0 ? num(100.0 * double(m[size_t(t * C + t)]) / double(row)) + "%" : std::string("-")) << "</text>\n";
  }
  o << "<text x='" << L + cell * double(C) + 6 << "' y='" << T - 6 << "'>recall</text>\n";
  o << "</svg>\n";
  io::write_file_atomic(path, o.str());
}

}  // namespace attn::viz

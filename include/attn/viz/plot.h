// Training curves as an SVG line chart, and a classifier's confusion matrix as an SVG heat map (no
// dependency: SVG is text, and the class names stay readable at any zoom).
//
//   viz::Series loss{"train loss", xs, ys};
//   viz::write_svg_plot("curve.svg", "Fashion-MNIST, MLP", "epoch", {loss, val_acc});
//   viz::write_confusion_svg("confusion.svg", "test split", class_names, r.labels, r.predictions);
//   viz::nice_ticks(0.4938, 0.6795);   // {0.5, 0.55, 0.6, 0.65}: where the axis is labelled
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace attn::viz {

struct Series {
  std::string name;
  std::vector<double> x, y;
  bool right_axis = false;   // plotted against a second y axis (e.g. accuracy next to loss)
  bool markers = false;      // a dot at each point instead of a line
};

// Axes are labelled at round values (nice_ticks), with as many decimals as their step needs.
// Written atomically. Throws attn::Error if it cannot write.
void write_svg_plot(const std::string& path, const std::string& title, const std::string& xlabel,
                    const std::vector<Series>& series);

// Round tick values inside [lo, hi]: the multiples of a step of 1, 2 or 5 × 10^k, the smallest such
// step that gives at most max_ticks of them (so 0..1 gives 0, 0.2, ..., 1). lo == hi gives {lo}.
// Throws attn::Error unless lo and hi are finite with lo <= hi and max_ticks >= 2.
std::vector<double> nice_ticks(double lo, double hi, int max_ticks = 8);
// v written with the decimals a tick step needs: tick_label(0.5, 0.05) == "0.50", (3, 1) == "3".
std::string tick_label(double v, double step);

// counts[t * C + p]: how many examples of true class t were predicted as p (C = class_names.size()).
// Throws attn::Error when the lists differ in length or a label or prediction is outside [0, C).
std::vector<int64_t> confusion_matrix(const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions,
                                      int64_t num_classes);

// Rows = true class, columns = predicted; each cell shows its count, shaded by its share of the row
// (so a row's diagonal cell is that class's recall), the recall of each row at its right and the
// overall accuracy in the title. Up to 100 classes. Written atomically.
void write_confusion_svg(const std::string& path, const std::string& title, const std::vector<std::string>& class_names,
                         const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions);

}  // namespace attn::viz

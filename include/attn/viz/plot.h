// Training curves as an SVG line chart, and a classifier's confusion matrix as an SVG heat map (no
// dependency: SVG is text, and the class names stay readable at any zoom).
//
//   train::Series loss{"train loss", xs, ys};
//   train::write_svg_plot("curve.svg", "Fashion-MNIST, MLP", "epoch", {loss, val_acc});
//   train::write_confusion_svg("confusion.svg", "test split", class_names, r.labels, r.predictions);
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace attn::train {

struct Series {
  std::string name;
  std::vector<double> x, y;
  bool right_axis = false;   // plotted against a second y axis (e.g. accuracy next to loss)
  bool markers = false;      // a dot at each point instead of a line
};

// Written atomically. Throws attn::Error if it cannot write.
void write_svg_plot(const std::string& path, const std::string& title, const std::string& xlabel,
                    const std::vector<Series>& series);

// counts[t * C + p]: how many examples of true class t were predicted as p (C = class_names.size()).
// Throws attn::Error when the lists differ in length or a label or prediction is outside [0, C).
std::vector<int64_t> confusion_matrix(const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions,
                                      int64_t num_classes);

// Rows = true class, columns = predicted; each cell shows its count, shaded by its share of the row
// (so a row's diagonal cell is that class's recall), the recall of each row at its right and the
// overall accuracy in the title. Up to 100 classes. Written atomically.
void write_confusion_svg(const std::string& path, const std::string& title, const std::vector<std::string>& class_names,
                         const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions);

}  // namespace attn::train

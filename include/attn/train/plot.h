// Training curves as an SVG line chart (no dependency: SVG is text).
//
//   train::Series loss{"train loss", xs, ys};
//   train::write_svg_plot("curve.svg", "Fashion-MNIST, MLP", "epoch", {loss, val_acc});
#pragma once
#include <string>
#include <vector>

namespace attn::train {

struct Series {
  std::string name;
  std::vector<double> x, y;
  bool right_axis = false;   // plotted against a second y axis (e.g. accuracy next to loss)
};

// Written atomically. Throws attn::Error if it cannot write.
void write_svg_plot(const std::string& path, const std::string& title, const std::string& xlabel,
                    const std::vector<Series>& series);

}  // namespace attn::train

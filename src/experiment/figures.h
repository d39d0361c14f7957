// The file names of a track's figures, shared by the runner (which draws them under out/NAME/BUDGET/) and
// the docs writer (which copies them beside docs/experiments.md). Internal to src/experiment.
#pragma once
#include <array>
#include <string>

namespace attn::experiment {

// Every track has "curves" (its metric's curve per variant); a track with the attention-distance probe
// also has "distance" (each layer's mean distance over training).
inline constexpr std::array<const char*, 2> kFigureKinds = {"curves", "distance"};

// Under out/NAME/BUDGET/: "curves-fmnist.svg", "distance-fmnist.svg".
inline std::string figure_file(const std::string& kind, const std::string& track) {
  return kind + "-" + track + ".svg";
}

// Beside the docs page, under experiments/: "qk-sharing-fmnist.svg" (the curves keep the shorter name),
// "attention-distance-distance-fmnist.svg".
inline std::string docs_figure_file(const std::string& experiment, const std::string& kind,
                                    const std::string& track) {
  return experiment + (kind == "curves" ? "" : "-" + kind) + "-" + track + ".svg";
}

}  // namespace attn::experiment

// What the runner, the report and the docs writer agree on about a run's directory and its settings.
// Internal to src/experiment.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace attn::experiment {

// The settings that may name another run of the experiment, {"run": "TRACK/VARIANT"}, instead of a path:
// the runner resolves them to that run's checkpoint, and the docs writer keeps no copy of a run named so
// (its runs would need the checkpoint, which is not kept).
inline constexpr std::array<const char*, 2> kRunReferenceKeys = {"init", "teacher"};

// The small files of a finished run under out/NAME/BUDGET/TRACK/VARIANT/sSEED/ that are enough to read it
// back without training: its settings, final metrics, log (the curves) and the probe's measurements.
inline constexpr std::array<const char*, 4> kKeptRunFiles = {"run.json", "metrics.json", "log.jsonl", "probe.json"};

// What run.json holds: the settings a run was trained with and its seed. The runner refuses a directory whose
// run.json differs; the docs writer counts only the kept runs whose run.json is this.
inline nlohmann::json run_record(const nlohmann::json& settings, uint64_t seed) {
  return {{"settings", settings}, {"seed", seed}};
}

// A seed's directory under TRACK/VARIANT/.
inline std::string seed_dir(int seed) { return "s" + std::to_string(seed); }

}  // namespace attn::experiment

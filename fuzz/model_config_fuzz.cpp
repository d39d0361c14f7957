// libFuzzer target for the JSON model configs: models::create(name, config) for every family, as the
// CLI's --model-config and a checkpoint's metadata "config" reach it.
//
//   scripts/fuzz.sh model_config_fuzz    # or: build-fuzz/fuzz/model_config_fuzz fuzz/corpus/model_config_fuzz
//
// Input: a JSON object; its "model" names the registry entry (another value, or none, picks one of
// the families below by the input's length), and the object is the config handed to create().
// Seeds: every family's config (written by fuzz/write_seeds.cpp). Models are built with
// nn::init::SkipRandomInit(Fill::none), as a checkpoint loader builds them (pages never touched).
// A config whose numbers pass 512 in magnitude (or whose lists pass 16 entries) is not built: it is a
// request for a large model, which only costs memory and time (fuzz_support.h, small_config).
// An attn::Error is the expected outcome for a config that is wrong. Anything else is a finding: a
// sanitizer report (an overflow in a size computation, say), a crash, a leak, another exception
// (nlohmann::json's type_error for a value of the wrong type included), or a broken property:
//   * a model that is built reports a config (config()) that builds the same model again: the same
//     config, and the same parameter names and shapes.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "attn/core/error.h"
#include "attn/models/registry.h"
#include "attn/nn/init.h"
#include "fuzz_support.h"

namespace {

const char* kFamilies[] = {"mlp", "vit", "vit_hybrid_fmnist", "deit_fmnist_small_distilled", "resnet_fmnist_tiny",
                           "transformer", "rnn-attention"};

std::shared_ptr<attn::models::Model> build(const std::string& name, const nlohmann::json& cfg) {
  attn::nn::init::SkipRandomInit skip(attn::nn::init::SkipRandomInit::Fill::none);
  return attn::models::create(name, cfg);
}

attn::nn::Module::ShapeList shapes(const attn::nn::Module& m) {
  attn::nn::Module::ShapeList out;
  for (const auto& [name, t] : m.state_dict()) out.emplace_back(name, t.shape());
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json cfg = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (cfg.is_discarded() || !attn::fuzz::small_config(cfg, 512)) return 0;
  std::string name = kFamilies[size % (sizeof kFamilies / sizeof kFamilies[0])];
  if (cfg.is_object() && cfg.contains("model") && cfg["model"].is_string()) name = cfg["model"].get<std::string>();
  std::shared_ptr<attn::models::Model> m;
  try {
    m = build(name, cfg);
  } catch (const attn::Error&) {
    return 0;
  }
  if (!m) __builtin_trap();
  const nlohmann::json back = m->config();
  if (!back.is_object() || !back.contains("model") || back["model"] != name) __builtin_trap();
  std::shared_ptr<attn::models::Model> again = build(name, back);
  if (again->config() != back || shapes(*again) != shapes(*m)) __builtin_trap();
  return 0;
}

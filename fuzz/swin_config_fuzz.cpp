// libFuzzer target for Swin's config readers: attn's JSON config (models::swin_config_from_json, as
// --model-config and a checkpoint's "config" reach it) and Hugging Face's config.json for Swin V1 and
// V2 (models::swin_config_from_hf, as `attn convert` / load_pretrained read it), each followed by the
// model built with shapes only (models::create_shapes_only: no tensor memory, as `attn info` builds
// it) and its per-stage MACs.
//
//   scripts/fuzz.sh swin_config_fuzz    # or: build-fuzz/fuzz/swin_config_fuzz fuzz/corpus/swin_config_fuzz
//
// Input: a JSON object; one with a "model_type" key is a config.json, any other an attn config. Seeds:
// fuzz/corpus/swin_config_fuzz/ (the registry's V1 and V2 configs in every convention, config.json of
// both versions, and wrong ones). Unlike model_config_fuzz, no size filter: the readers' own limits
// (models::SwinLimits: stages, blocks, widths, window, image, and the model's elements and MACs) must
// refuse a config that would take more than seconds or gigabytes, before anything is built.
// An attn::Error is the expected outcome for a wrong config. Anything else is a finding: a sanitizer
// report (an overflow in a size or MAC count), a crash, a leak, another exception (nlohmann::json's
// type_error included), a timeout or running out of memory, or a broken property (a trap):
//   * a config that builds reports one (config()) that reads back to the same config and builds a
//     model with the same parameter names and shapes;
//   * the per-stage MACs are non-negative and sum to macs_per_image().
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "attn/core/error.h"
#include "attn/models/name_maps.h"
#include "attn/models/registry.h"
#include "attn/models/swin.h"

namespace {

attn::nn::Module::ShapeList shapes(const attn::nn::Module& m) {
  attn::nn::Module::ShapeList out;
  for (const auto& [name, t] : m.state_dict()) out.emplace_back(name, t.shape());
  return out;
}

void run(const nlohmann::json& j) {
  const bool hf = j.is_object() && j.contains("model_type");
  const attn::models::SwinConfig c = hf ? attn::models::swin_config_from_hf(j) : attn::models::swin_config_from_json(j);
  attn::models::check_swin_config(c);
  const nlohmann::json cfg = attn::models::swin_config_to_json(c);
  auto m = attn::models::create_shapes_only("swin", cfg);
  auto swin = std::dynamic_pointer_cast<attn::models::SwinTransformer>(m);
  if (!swin) __builtin_trap();
  int64_t total = 0;
  for (const auto& [part, macs] : swin->macs_per_stage()) {
    if (macs < 0) __builtin_trap();
    total += macs;
  }
  if (total != swin->macs_per_image()) __builtin_trap();
  nlohmann::json back = m->config();
  back.erase("model");
  if (attn::models::swin_config_to_json(attn::models::swin_config_from_json(back)) != cfg) __builtin_trap();
  auto again = attn::models::create_shapes_only("swin", back);
  if (shapes(*again) != shapes(*m)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  try {
    run(j);
  } catch (const attn::Error&) {
  }
  return 0;
}

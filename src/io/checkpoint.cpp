// The checkpoint file: state dicts and JSON metadata in one safetensors file.
#include "attn/io/checkpoint.h"

#include <optional>

#include "attn/core/error.h"

namespace attn::io {

namespace {
const std::string kOptimPrefix = kCheckpointOptimizerPrefix;
const std::string kEmaPrefix = kCheckpointEmaPrefix;

nlohmann::json metadata_json(const Metadata& md) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [k, v] : md) {
    nlohmann::json parsed = nlohmann::json::parse(v, nullptr, /*allow_exceptions=*/false);
    out[k] = (k != "format" && k != "optimizer" && !parsed.is_discarded()) ? parsed : nlohmann::json(v);
  }
  return out;
}

void check_format(const std::string& path, const Metadata& md) {
  auto it = md.find("format");
  ATTN_CHECK(it != md.end(), "load_checkpoint: '", path, "' is not an attn checkpoint (its metadata has no \"format\")");
  ATTN_CHECK(it->second == kCheckpointFormat, "load_checkpoint: '", path, "' is not an attn checkpoint (format \"",
             it->second, "\", expected \"", kCheckpointFormat, "\")");
}

SafetensorsFile load_file(const std::string& path) {
  try {
    return load_safetensors(path);
  } catch (const Error& e) {
    fail("load_checkpoint: cannot read '", path, "': ", e.what());
  }
}
}  // namespace

void write_checkpoint(const std::string& path, const TensorList& model, const std::optional<OptimizerState>& optimizer,
                      const nlohmann::json& extra, const TensorList& ema) {
  ATTN_CHECK(extra.is_object() || extra.is_null(), "save_checkpoint: expected `extra` to be a JSON object, got ",
             extra.type_name());
  Metadata md;
  md["format"] = kCheckpointFormat;
  md["config"] = "{}";
  md["train_state"] = "{}";
  if (extra.is_object()) {
    for (const auto& [k, v] : extra.items()) {
      ATTN_CHECK(k != "format" && k != "optimizer", "save_checkpoint: metadata key '", k, "' is reserved");
      md[k] = v.is_string() ? v.get<std::string>() : v.dump();
    }
  }
  TensorList tensors = model;
  for (const auto& [name, t] : tensors)
    for (const std::string& prefix : {kOptimPrefix, kEmaPrefix})
      ATTN_CHECK(!name.starts_with(prefix), "save_checkpoint: model key '", name, "' starts with the reserved prefix '",
                 prefix, "'");
  if (optimizer) {
    md["optimizer"] = optimizer->name;
    for (const auto& [name, t] : optimizer->tensors) tensors.emplace_back(kOptimPrefix + name, t);
  }
  for (const auto& [name, t] : ema) tensors.emplace_back(kEmaPrefix + name, t);
  save_safetensors(path, tensors, md);
}

CheckpointFile read_checkpoint(const std::string& path) {
  SafetensorsFile f = load_file(path);
  check_format(path, f.metadata);
  CheckpointFile out;
  TensorList optim;
  for (auto& [name, t] : f.tensors) {
    if (name.starts_with(kOptimPrefix)) optim.emplace_back(name.substr(kOptimPrefix.size()), t);
    else if (name.starts_with(kEmaPrefix)) out.ema.emplace_back(name.substr(kEmaPrefix.size()), t);
    else out.model.emplace_back(name, t);
  }
  if (auto it = f.metadata.find("optimizer"); it != f.metadata.end())
    out.optimizer = OptimizerState{it->second, std::move(optim)};
  out.metadata = metadata_json(f.metadata);
  return out;
}

std::optional<std::string> checkpoint_weight_key(const std::string& key, CheckpointWeights which) {
  if (key.starts_with(kOptimPrefix)) return std::nullopt;
  const bool ema = key.starts_with(kEmaPrefix);
  if (ema != (which == CheckpointWeights::ema)) return std::nullopt;
  return ema ? key.substr(kEmaPrefix.size()) : key;
}

bool checkpoint_has_ema(const SafetensorsReader& file) {
  for (const SafetensorsEntry& e : file.entries())
    if (e.name.starts_with(kEmaPrefix)) return true;
  return false;
}

SafetensorsReader open_checkpoint(const std::string& path) {
  // The header only: reading every tensor to get at the metadata held a whole f32 copy of the model.
  std::optional<SafetensorsReader> file;
  try {
    file.emplace(path);
  } catch (const Error& e) {
    fail("load_checkpoint: cannot read '", path, "': ", e.what());
  }
  check_format(path, file->metadata());
  return std::move(*file);
}

nlohmann::json read_checkpoint_metadata(const std::string& path) { return checkpoint_metadata(open_checkpoint(path)); }

nlohmann::json checkpoint_metadata(const SafetensorsReader& file) {
  check_format(file.path(), file.metadata());
  return metadata_json(file.metadata());
}

}  // namespace attn::io

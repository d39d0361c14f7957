// Checkpoints: module + optimizer state dicts and JSON metadata in one safetensors file.
#include "attn/io/checkpoint.h"

#include <optional>

#include "attn/nn/module.h"
#include "attn/optim/optimizer.h"

namespace attn::io {

namespace {
const std::string kOptimPrefix = "optim.";

nlohmann::json metadata_json(const Metadata& md) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [k, v] : md) {
    nlohmann::json parsed = nlohmann::json::parse(v, nullptr, /*allow_exceptions=*/false);
    out[k] = (k != "format" && !parsed.is_discarded()) ? parsed : nlohmann::json(v);
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

void save_checkpoint(const std::string& path, const nn::Module& module, const optim::Optimizer* optimizer,
                     const nlohmann::json& extra) {
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
  TensorList tensors = module.state_dict();
  for (const auto& [name, t] : tensors)
    ATTN_CHECK(name.rfind(kOptimPrefix, 0) != 0, "save_checkpoint: model key '", name,
               "' starts with the reserved prefix '", kOptimPrefix, "'");
  if (optimizer) {
    md["optimizer"] = optimizer->name();
    for (auto& [name, t] : optimizer->state_dict()) tensors.emplace_back(kOptimPrefix + name, t);
  }
  save_safetensors(path, tensors, md);
}

nlohmann::json read_checkpoint_metadata(const std::string& path) {
  // The header only: reading every tensor to get at the metadata held a whole f32 copy of the model.
  std::optional<SafetensorsReader> file;
  try {
    file.emplace(path);
  } catch (const Error& e) {
    fail("load_checkpoint: cannot read '", path, "': ", e.what());
  }
  return checkpoint_metadata(*file);
}

nlohmann::json checkpoint_metadata(const SafetensorsReader& file) {
  check_format(file.path(), file.metadata());
  return metadata_json(file.metadata());
}

nlohmann::json load_checkpoint(const std::string& path, nn::Module& module, optim::Optimizer* optimizer) {
  SafetensorsFile f = load_file(path);
  check_format(path, f.metadata);
  TensorList model_sd, optim_sd;
  for (auto& [name, t] : f.tensors) {
    if (name.rfind(kOptimPrefix, 0) == 0) optim_sd.emplace_back(name.substr(kOptimPrefix.size()), t);
    else model_sd.emplace_back(name, t);
  }
  const std::string why = module.state_dict_mismatch(model_sd, /*strict=*/true, /*max_listed=*/5);
  if (!why.empty()) fail("load_checkpoint: '", path, "' is for another model: ", why);
  if (optimizer) {
    auto it = f.metadata.find("optimizer");
    ATTN_CHECK(it != f.metadata.end() && !optim_sd.empty(), "load_checkpoint: '", path,
               "' has no optimizer state (saved without an optimizer)");
    ATTN_CHECK(it->second == optimizer->name(), "load_checkpoint: '", path, "' holds ", it->second,
               " state, but the optimizer is ", optimizer->name());
    try {
      optimizer->load_state_dict(optim_sd);   // checks everything before changing anything
    } catch (const Error& e) {
      fail("load_checkpoint: '", path, "': optimizer state does not match: ", e.what());
    }
  }
  module.load_state_dict(model_sd, /*strict=*/true);   // checked above: cannot fail now
  return metadata_json(f.metadata);
}

}  // namespace attn::io

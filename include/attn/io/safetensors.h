// safetensors, as the format defines it: an 8-byte little-endian header length N, N bytes of
// JSON ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}),
// padded with spaces to a multiple of 8, then the raw little-endian data. Offsets are relative to
// the data block, contiguous and non-overlapping.
//
//   io::TensorList w = {{"w", Tensor::randn({4, 4})}};
//   io::save_safetensors("m.safetensors", w, {{"config", cfg.dump()}});   // atomic (tmp + rename)
//   io::SafetensorsFile f = io::load_safetensors("m.safetensors");
//
// F16 tensors are widened to f32 on load (exact); BOOL loads as u8. Any malformed input gives an
// attn::Error naming the file and what was wrong; the parser never reads out of bounds.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "attn/core/tensor.h"

namespace attn::io {

using TensorList = std::vector<std::pair<std::string, Tensor>>;
using Metadata = std::map<std::string, std::string>;

struct SafetensorsFile {
  TensorList tensors;      // in file order (by data offset)
  Metadata metadata;
  const Tensor* find(const std::string& name) const;
};

SafetensorsFile load_safetensors(const std::string& path);
// `what` names the source in error messages (a path, or "<buffer>").
SafetensorsFile parse_safetensors(const uint8_t* data, size_t size, const std::string& what = "<buffer>");
std::string serialize_safetensors(const TensorList& tensors, const Metadata& metadata = {});
// Writes to path + ".tmp", fsyncs, renames over path: a crash leaves the old file or the new one.
void save_safetensors(const std::string& path, const TensorList& tensors, const Metadata& metadata = {});
// Writes bytes atomically (the same tmp + fsync + rename), for other file kinds.
void write_file_atomic(const std::string& path, const std::string& bytes);

}  // namespace attn::io

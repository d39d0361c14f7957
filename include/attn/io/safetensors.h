// safetensors, as the format defines it: an 8-byte little-endian header length N, N bytes of
// JSON ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}),
// padded with spaces to a multiple of 8, then the raw little-endian data. Offsets are relative to
// the data block, contiguous and non-overlapping.
//
//   io::TensorList w = {{"w", Tensor::randn({4, 4})}};
//   io::save_safetensors("m.safetensors", w, {{"config", cfg.dump()}});   // atomic (temporary + rename)
//   io::SafetensorsFile f = io::load_safetensors("m.safetensors");
//
//   io::SafetensorsReader r("m.safetensors");   // the header only; then one tensor at a time
//   for (size_t i = 0; i < r.entries().size(); ++i) use(r.entries()[i].name, r.read(i));
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

// One tensor's header entry. dtype is as loaded (F16 -> f32, BOOL -> u8); [begin, end) is its byte
// range within the data block.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t begin = 0, end = 0;
  bool f16 = false;   // stored as IEEE half, widened on read
};

// A safetensors file opened for streaming: the constructor reads and checks the header only (the
// same checks and messages as load_safetensors); read(i) reads one tensor (pread, straight into its
// storage). A caller that drops each tensor before reading the next holds at most one: the file is
// never held whole (neither in a buffer nor mapped, so its pages never count towards the process's
// resident memory).
class SafetensorsReader {
 public:
  explicit SafetensorsReader(const std::string& path);
  ~SafetensorsReader();
  SafetensorsReader(SafetensorsReader&& o) noexcept;
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(SafetensorsReader&&) = delete;

  const std::string& path() const { return path_; }
  const Metadata& metadata() const { return metadata_; }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }   // by data offset
  const SafetensorsEntry* find(const std::string& name) const;                // null when absent
  Tensor read(size_t i) const;                   // entries()[i]
  Tensor read(const std::string& name) const;    // throws when the file has no such entry

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t data_start_ = 0;
  Metadata metadata_;
  std::vector<SafetensorsEntry> entries_;
};

// Every tensor at once (via SafetensorsReader: the peak is the tensors, not the file plus the tensors).
SafetensorsFile load_safetensors(const std::string& path);
// `what` names the source in error messages (a path, or "<buffer>").
SafetensorsFile parse_safetensors(const uint8_t* data, size_t size, const std::string& what = "<buffer>");
std::string serialize_safetensors(const TensorList& tensors, const Metadata& metadata = {});
// Writes to a new temporary beside path (path + ".tmp." + 6 random characters, unique: concurrent
// writers to one path each rename a whole file of their own), fsyncs it, renames it over path and
// fsyncs the directory: a crash leaves the old file or the new one, a failure (disk full, ...) an
// attn::Error naming path, the old file untouched and no temporary.
void save_safetensors(const std::string& path, const TensorList& tensors, const Metadata& metadata = {});
// Writes bytes atomically (the same temporary + fsync + rename), for other file kinds.
void write_file_atomic(const std::string& path, const std::string& bytes);

// What a temporary's name adds to the path it is for (then 6 characters).
inline constexpr const char* kAtomicTempInfix = ".tmp.";
// The temporaries of `path` that writes interrupted by a kill left behind (full paths, sorted).
std::vector<std::string> unfinished_writes(const std::string& path);
// Removes them. Only where nothing else writes `path` now: a write in progress has one too.
void remove_unfinished_writes(const std::string& path);

}  // namespace attn::io

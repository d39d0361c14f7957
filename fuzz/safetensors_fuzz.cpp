// libFuzzer target for the safetensors reader, in memory (io::parse_safetensors) and from a file
// (io::load_safetensors and io::SafetensorsReader, on the same bytes in a memfd).
//
//   scripts/fuzz.sh safetensors_fuzz     # or: build-fuzz/fuzz/safetensors_fuzz fuzz/corpus/safetensors_fuzz
//
// An attn::Error is the expected outcome for malformed input. Anything else is a finding: a
// sanitizer report, a crash, a leak, another exception, or a broken property:
//   * what parses serializes (serialize_safetensors) and parses back to the same names, dtypes,
//     shapes, bytes and metadata;
//   * the file readers accept exactly what the in-memory parser accepts, and give the same tensors
//     and metadata (SafetensorsReader: the same entries, each read on its own).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "attn/core/error.h"
#include "attn/io/safetensors.h"
#include "fuzz_support.h"

namespace {
bool same_tensor(const attn::Tensor& ta, const attn::Tensor& tb) {
  if (ta.dtype() != tb.dtype() || ta.shape() != tb.shape()) return false;
  const attn::Tensor ca = ta.contiguous(), cb = tb.contiguous();
  const size_t n = size_t(ca.numel()) * ca.element_size();
  return n == 0 || std::memcmp(ca.raw_data(), cb.raw_data(), n) == 0;
}

bool same(const attn::io::SafetensorsFile& a, const attn::io::SafetensorsFile& b) {
  if (a.tensors.size() != b.tensors.size() || a.metadata != b.metadata) return false;
  for (size_t i = 0; i < a.tensors.size(); ++i)
    if (a.tensors[i].first != b.tensors[i].first || !same_tensor(a.tensors[i].second, b.tensors[i].second))
      return false;
  return true;
}

// The file readers on the same bytes: nullopt when they refuse them.
std::optional<attn::io::SafetensorsFile> from_file(const uint8_t* data, size_t size) {
  attn::fuzz::MemFile file(data, size);
  attn::io::SafetensorsFile loaded;
  try {
    loaded = attn::io::load_safetensors(file.path());
  } catch (const attn::Error&) {
    return std::nullopt;
  }
  const attn::io::SafetensorsReader reader(file.path());
  if (reader.metadata() != loaded.metadata || reader.entries().size() != loaded.tensors.size()) __builtin_trap();
  for (size_t i = reader.entries().size(); i-- > 0;) {   // backwards: each read stands alone
    const attn::io::SafetensorsEntry& e = reader.entries()[i];
    if (e.name != loaded.tensors[i].first || !same_tensor(reader.read(e.name), loaded.tensors[i].second))
      __builtin_trap();
  }
  return loaded;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::optional<attn::io::SafetensorsFile> f;
  try {
    f = attn::io::parse_safetensors(data, size, "<fuzz>");
  } catch (const attn::Error&) {
  }
  const std::optional<attn::io::SafetensorsFile> g = from_file(data, size);
  if (f.has_value() != g.has_value()) __builtin_trap();
  if (!f) return 0;
  if (!same(*f, *g)) __builtin_trap();
  const std::string bytes = attn::io::serialize_safetensors(f->tensors, f->metadata);
  attn::io::SafetensorsFile h = attn::io::parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                           bytes.size(), "<fuzz round trip>");
  if (!same(*f, h)) __builtin_trap();
  return 0;
}

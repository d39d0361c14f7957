// libFuzzer target for io::parse_safetensors.
//
//   scripts/fuzz.sh                      # or: build-fuzz/fuzz/safetensors_fuzz fuzz/corpus/safetensors_fuzz
//
// An attn::Error is the expected outcome for malformed input. Anything else is a finding: a
// sanitizer report, a crash, a leak, another exception, or a broken property: what parses
// serializes (serialize_safetensors) and parses back to the same names, dtypes, shapes, bytes
// and metadata.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "attn/core/error.h"
#include "attn/io/safetensors.h"

namespace {
bool same(const attn::io::SafetensorsFile& a, const attn::io::SafetensorsFile& b) {
  if (a.tensors.size() != b.tensors.size() || a.metadata != b.metadata) return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& [na, ta] = a.tensors[i];
    const auto& [nb, tb] = b.tensors[i];
    if (na != nb || ta.dtype() != tb.dtype() || ta.shape() != tb.shape()) return false;
    const attn::Tensor ca = ta.contiguous(), cb = tb.contiguous();
    const size_t n = size_t(ca.numel()) * ca.element_size();
    if (n && std::memcmp(ca.raw_data(), cb.raw_data(), n) != 0) return false;
  }
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  attn::io::SafetensorsFile f;
  try {
    f = attn::io::parse_safetensors(data, size, "<fuzz>");
  } catch (const attn::Error&) {
    return 0;
  }
  const std::string bytes = attn::io::serialize_safetensors(f.tensors, f.metadata);
  attn::io::SafetensorsFile g = attn::io::parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                           bytes.size(), "<fuzz round trip>");
  if (!same(f, g)) __builtin_trap();
  return 0;
}

// libFuzzer target for data::parse_idx (plain and gzip IDX buffers).
//
//   scripts/fuzz.sh                      # or: build-fuzz/fuzz/idx_fuzz fuzz/corpus/idx_fuzz
//
// An attn::Error is the expected outcome for malformed input. Anything else is a finding: a
// sanitizer report, a crash, a leak, another exception, or a broken property:
//   * a parsed tensor has exactly the element count its shape says, and every byte is readable;
//   * a plain (uncompressed) input of type u8/i32/f32/f64 that parses re-serializes to itself.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "attn/core/error.h"
#include "attn/data/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  attn::Tensor t;
  try {
    t = attn::data::parse_idx(data, size, "<fuzz>");
  } catch (const attn::Error&) {
    return 0;
  }
  // Touch every byte (ASan checks the storage is as large as the shape says).
  const auto* p = static_cast<const uint8_t*>(t.raw_data());
  const size_t nbytes = size_t(t.numel()) * t.element_size();
  uint8_t acc = 0;
  for (size_t i = 0; i < nbytes; ++i) acc ^= p[i];
  volatile uint8_t sink = acc;
  (void)sink;

  const bool gz = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
  const uint8_t code = size >= 3 ? data[2] : 0;
  if (!gz && (code == 0x08 || code == 0x0C || code == 0x0D || code == 0x0E)) {
    const std::string again = attn::data::serialize_idx(t);
    if (again.size() != size || std::memcmp(again.data(), data, size) != 0) __builtin_trap();
  }
  return 0;
}

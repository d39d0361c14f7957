// libFuzzer target for the SWORD zText reader (data::SwordModule::from_bytes) and strip_osis.
//
//   scripts/fuzz.sh sword_fuzz           # or: build-fuzz/fuzz/sword_fuzz fuzz/corpus/sword_fuzz
//
// Input layout: u16 LE length of .bzs, u16 LE length of .bzv, the .bzs bytes, the .bzv bytes, and
// the rest is .bzz; this makes the Old Testament of a module (the New Testament is empty).
// An attn::Error is the expected outcome for malformed input. Anything else is a finding: a
// sanitizer report, a crash, a leak, another exception, or a broken property:
//   * every entry the index accepts can be read back and has exactly its recorded length;
//   * strip_osis (of each entry and of the raw input) returns no leading, trailing or doubled
//     spaces, and valid UTF-8 whenever its input is valid UTF-8.
#include <cstddef>
#include <cstdint>
#include <string>

#include "attn/core/error.h"
#include "attn/data/sword.h"
#include "attn/text/utf8.h"

namespace {

void check_stripped(const std::string& in) {
  const std::string out = attn::data::strip_osis(in);
  if (!out.empty() && (out.front() == ' ' || out.back() == ' ')) __builtin_trap();
  if (out.find("  ") != std::string::npos) __builtin_trap();
  if (attn::text::is_valid_utf8(in) && !attn::text::is_valid_utf8(out)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string all(reinterpret_cast<const char*>(data), size);
  check_stripped(all);
  if (size < 4) return 0;
  const size_t nbzs = size_t(data[0]) | size_t(data[1]) << 8, nbzv = size_t(data[2]) | size_t(data[3]) << 8;
  if (4 + nbzs + nbzv > size) return 0;
  attn::data::ZTextTestament ot;
  ot.bzs = all.substr(4, nbzs);
  ot.bzv = all.substr(4 + nbzs, nbzv);
  ot.bzz = all.substr(4 + nbzs + nbzv);
  attn::data::SwordModule m;
  try {
    m = attn::data::SwordModule::from_bytes(std::move(ot), {}, "<fuzz>");
  } catch (const attn::Error&) {
    return 0;
  }
  const int64_t n = m.num_entries(attn::data::Testament::ot);
  if (n != int64_t(nbzv / 10)) __builtin_trap();
  for (int64_t i = 0; i < n; ++i) {
    std::string e;
    try {
      e = m.entry(attn::data::Testament::ot, i);
    } catch (const attn::Error&) {
      continue;   // a corrupt block
    }
    const auto len = uint16_t(uint8_t(all[4 + nbzs + 10 * size_t(i) + 8]) | uint8_t(all[4 + nbzs + 10 * size_t(i) + 9]) << 8);
    if (e.size() != len) __builtin_trap();
    check_stripped(e);
    if (auto ref = attn::data::kjv_verse_at(attn::data::Testament::ot, i)) {
      try {
        if (m.raw_verse(*ref) != e) __builtin_trap();
      } catch (const attn::Error&) {
      }
    }
  }
  try {
    m.verses();
  } catch (const attn::Error&) {
  }
  return 0;
}

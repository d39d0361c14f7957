// libFuzzer target for data::parse_tsv_pairs (translation pairs, "src<TAB>tgt" per line).
//
//   scripts/fuzz.sh tsv_fuzz             # or: build-fuzz/fuzz/tsv_fuzz fuzz/corpus/tsv_fuzz
//
// An attn::Error is the expected outcome for malformed input. Anything else is a finding: a
// sanitizer report, a crash, a leak, another exception, or a broken property:
//   * every side of every pair is valid UTF-8 and holds no tab and no line feed;
//   * pairs that format_tsv_pairs accepts parse back to themselves.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "attn/core/error.h"
#include "attn/data/text_pairs.h"
#include "attn/text/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<attn::data::TextPair> pairs;
  try {
    pairs = attn::data::parse_tsv_pairs(in, "<fuzz>");
  } catch (const attn::Error&) {
    return 0;
  }
  for (const auto& p : pairs) {
    for (const std::string* s : {&p.src, &p.tgt}) {
      if (s->find_first_of("\t\n") != std::string::npos) __builtin_trap();
      if (!attn::text::is_valid_utf8(*s)) __builtin_trap();
    }
  }
  std::string text;
  try {
    text = attn::data::format_tsv_pairs(pairs);
  } catch (const attn::Error&) {
    return 0;   // a side ends in (or holds) a carriage return: not representable
  }
  // A BOM at the start of the first source would be read as a BOM: not representable either.
  if (!pairs.empty() && pairs[0].src.rfind("\xEF\xBB\xBF", 0) == 0) return 0;
  if (attn::data::parse_tsv_pairs(text, "<again>") != pairs) __builtin_trap();
  return 0;
}

// The tables of src/text/unicode_tables.cpp, written by tools/gen_unicode_tables.py from Python
// 3.11's unicodedata (Unicode 14.0.0). Private to src/text/unicode.cpp (and its test).
#pragma once
#include <cstddef>
#include <cstdint>

namespace attn::text::unicode::tables {

struct CategoryRun { char32_t first; uint8_t category; };   // up to the next run's first
struct CccRun { char32_t first; uint8_t ccc; };
struct LowerEntry { char32_t cp, lower0, lower1; };          // lower1 = 0: one code point
struct DecompEntry { char32_t cp; uint32_t offset, length; };   // into kDecompPool
struct CompEntry { char32_t first, second, composite; };      // sorted by (first, second)

extern const char* const kUnicodeVersion;
extern const CategoryRun kCategoryRuns[];
extern const size_t kCategoryRunCount;
extern const CccRun kCccRuns[];
extern const size_t kCccRunCount;
extern const LowerEntry kLower[];          // sorted by cp
extern const size_t kLowerCount;
extern const DecompEntry kDecomp[];        // sorted by cp; Hangul syllables are not in it
extern const size_t kDecompCount;
extern const char32_t kDecompPool[];
extern const CompEntry kComp[];
extern const size_t kCompCount;
extern const char32_t kSpaces[];           // sorted
extern const size_t kSpaceCount;

}  // namespace attn::text::unicode::tables

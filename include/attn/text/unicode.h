// Unicode character data and normalization, exactly as Python 3.11's `unicodedata` and `str` give
// them (Unicode 14.0.0): the BERT tokenizer (text/bert_tokenizer.h) must match Hugging Face's Python
// tokenizer character for character. The tables are generated from Debian 12's /usr/bin/python3 by
// tools/gen_unicode_tables.py (src/text/unicode_tables.cpp); tests/text/unicode_test.cpp checks every
// code point against Python.
//
//   using namespace attn::text::unicode;
//   category(U'é') == Category::Ll;  category_name(category(U'\u0301')) == "Mn";
//   std::u32string d = nfd(U"é");        // U"e\u0301"
//   std::u32string c = nfc(d);           // U"é"
//   std::u32string l = lower(U'\u0130'); // U"i\u0307" (Python's "İ".lower())
//
// Code points are char32_t values in [0, 0x10FFFF]; a larger value reads as unassigned (Cn, class 0,
// no mapping). Surrogates are category Cs, as in Python.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attn::text::unicode {

// The general categories, in this order (the generator relies on it).
enum class Category : uint8_t {
  Lu, Ll, Lt, Lm, Lo, Mn, Mc, Me, Nd, Nl, No, Pc, Pd, Ps, Pe, Pi, Pf, Po, Sm, Sc, Sk, So, Zs, Zl, Zp,
  Cc, Cf, Cs, Co, Cn
};

// "14.0.0": the Unicode version of the tables (Python 3.11's unicodedata.unidata_version).
const char* unicode_version();

Category category(char32_t cp);                  // unicodedata.category
std::string_view category_name(Category c);      // "Lu", "Mn", ...
uint8_t combining_class(char32_t cp);            // unicodedata.combining
// Python's chr(cp).lower(): the full lowercase mapping of one character (one code point, or two for
// U+0130). Python's final-sigma rule needs the neighbouring characters: Σ alone lowers to σ here.
std::u32string lower(char32_t cp);
bool is_space(char32_t cp);                      // chr(cp).isspace(), what str.split() splits on

// unicodedata.normalize("NFD" / "NFC", s).
std::u32string nfd(std::u32string_view s);
std::u32string nfc(std::u32string_view s);

// A code point with the span of the input it came from ([begin, end), e.g. byte offsets). The traced
// forms below give the same code points as nfd / nfc; a decomposed character's parts keep its span,
// and a composed character spans from the smallest begin to the largest end of what it was made of.
struct TracedChar {
  char32_t cp;
  uint32_t begin, end;
};
std::vector<TracedChar> nfd(const std::vector<TracedChar>& s);
std::vector<TracedChar> nfc(const std::vector<TracedChar>& s);

}  // namespace attn::text::unicode

// UTF-8 validation, decoding and splitting into code points (RFC 3629, strict).
//
//   attn::text::check_utf8(line, "train.tsv line 12");   // throws attn::Error naming the offset
//   for (std::string_view cp : attn::text::split_code_points("año")) ...   // "a", "ñ", "o"
//   std::u32string cps = attn::text::decode_utf8(s);
//
// Strict means: no overlong forms (C0 80), no surrogates (ED A0 80 .. ED BF BF), nothing above
// U+10FFFF (F4 90.., F5..FF), no stray continuation bytes, no truncated sequences. U+0000 is a
// valid code point. Errors read
//   "<what>: invalid UTF-8 at byte offset 5: bytes c3 28 (expected a continuation byte 80..bf after c3)".
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attn::text {

// Why a byte string is not UTF-8: the offset of the first bad sequence and a sentence.
struct Utf8Problem {
  size_t offset = 0;
  std::string message;   // "invalid UTF-8 at byte offset 5: bytes c3 28 (expected ...)"
};

// nullopt when `s` is valid UTF-8, else the first problem.
std::optional<Utf8Problem> find_utf8_problem(std::string_view s);
bool is_valid_utf8(std::string_view s);
// Throws attn::Error "<what>: <problem message>" when `s` is not valid UTF-8.
void check_utf8(std::string_view s, std::string_view what = "text");

// Length in bytes of the valid sequence that starts at s[i], or 0 if none does.
size_t utf8_sequence_length(std::string_view s, size_t i);

// Code points of valid UTF-8 (throws like check_utf8 otherwise).
std::u32string decode_utf8(std::string_view s, std::string_view what = "text");
// The bytes of each code point, views into `s` (throws like check_utf8 on invalid input).
std::vector<std::string_view> split_code_points(std::string_view s, std::string_view what = "text");

// Appends the UTF-8 encoding of `cp`; throws for surrogates and cp > 0x10FFFF.
void append_utf8(std::string& out, char32_t cp);
std::string encode_utf8(std::u32string_view cps);

}  // namespace attn::text

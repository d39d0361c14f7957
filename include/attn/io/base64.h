// Base64 (RFC 4648, with padding): binary blobs inside JSON metadata, e.g. a tokenizer inside a
// checkpoint's __metadata__.
//
//   std::string text = io::base64_encode(bytes);
//   std::string back = io::base64_decode(text, "checkpoint tokenizer");   // attn::Error names `what`
#pragma once
#include <string>

namespace attn::io {

std::string base64_encode(const std::string& bytes);
// Throws attn::Error, naming `what`, on a length that is not a multiple of 4, a byte outside the
// alphabet (its offset named), padding anywhere but at the end, or non-zero bits in the padding (so
// each byte string has one encoding). The output is at most 3/4 of the input: nothing else is allocated.
std::string base64_decode(const std::string& text, const std::string& what);

}  // namespace attn::io

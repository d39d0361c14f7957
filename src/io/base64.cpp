#include "attn/io/base64.h"

#include <array>
#include <cstdint>

#include "attn/core/error.h"

namespace attn::io {

namespace {
const char* kB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Each byte's value in the alphabet, -1 for bytes outside it ('=' included).
const std::array<int8_t, 256>& decode_table() {
  static const std::array<int8_t, 256> t = [] {
    std::array<int8_t, 256> a{};
    a.fill(-1);
    for (int i = 0; i < 64; ++i) a[uint8_t(kB64[i])] = int8_t(i);
    return a;
  }();
  return t;
}
}  // namespace

std::string base64_encode(const std::string& in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = uint32_t(uint8_t(in[i])) << 16 | uint32_t(uint8_t(in[i + 1])) << 8 | uint8_t(in[i + 2]);
    for (int k = 3; k >= 0; --k) out.push_back(kB64[(v >> (6 * k)) & 63]);
  }
  if (i < in.size()) {
    uint32_t v = uint32_t(uint8_t(in[i])) << 16;
    if (i + 1 < in.size()) v |= uint32_t(uint8_t(in[i + 1])) << 8;
    out.push_back(kB64[(v >> 18) & 63]);
    out.push_back(kB64[(v >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? kB64[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

std::string base64_decode(const std::string& in, const std::string& what) {
  ATTN_CHECK(in.size() % 4 == 0, what, ": expected base64 (a multiple of 4 characters), found ", in.size(),
             " characters");
  // Padding: "xx==" or "xxx=" in the last group only.
  size_t pad = 0;
  if (!in.empty() && in.back() == '=') pad = in[in.size() - 2] == '=' ? 2 : 1;
  const size_t data = in.size() - pad;
  const auto& table = decode_table();
  uint32_t acc = 0;
  int bits = 0;
  std::string out;
  out.reserve(data / 4 * 3 + 2);   // never more than the input holds
  for (size_t i = 0; i < data; ++i) {
    const int v = table[uint8_t(in[i])];
    if (v < 0) {
      if (in[i] == '=')
        fail(what, ": expected base64, found padding '=' at character ", i, " of ", in.size(),
             " (padding may only end the text)");
      fail(what, ": expected base64, found the byte 0x", std::hex, int(uint8_t(in[i])), std::dec, " at character ",
           i, " of ", in.size());
    }
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(char((acc >> bits) & 0xFF));
    }
  }
  // What the last group leaves over must be zero bits (as base64_encode writes them), so that each
  // byte string has exactly one encoding.
  ATTN_CHECK((acc & ((1u << bits) - 1)) == 0, what, ": expected base64, found non-zero padding bits in the last group");
  return out;
}

}  // namespace attn::io

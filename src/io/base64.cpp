#include "attn/io/base64.h"

#include <cstdint>
#include <cstring>

#include "attn/core/error.h"

namespace attn::io {

namespace {
const char* kB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}

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
  auto val = [&](char c) -> int {
    const char* p = std::strchr(kB64, c);
    ATTN_CHECK(c != '\0' && p, what, ": expected base64, found the byte 0x", std::hex, int(uint8_t(c)));
    return int(p - kB64);
  };
  ATTN_CHECK(in.size() % 4 == 0, what, ": expected base64 (a multiple of 4 characters), found ", in.size());
  std::string out;
  out.reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    const int a = val(in[i]), b = val(in[i + 1]);
    out.push_back(char((a << 2) | (b >> 4)));
    if (in[i + 2] == '=') break;
    const int c = val(in[i + 2]);
    out.push_back(char(((b & 15) << 4) | (c >> 2)));
    if (in[i + 3] == '=') break;
    out.push_back(char(((c & 3) << 6) | val(in[i + 3])));
  }
  return out;
}

}  // namespace attn::io

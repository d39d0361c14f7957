// Strict UTF-8 (RFC 3629 table 3.7 of the Unicode standard: well-formed byte sequences).
#include "attn/text/utf8.h"

#include <cstdio>

#include "attn/core/error.h"

namespace attn::text {

namespace {

std::string hex_bytes(std::string_view s, size_t i, size_t n) {
  std::string out;
  char buf[4];
  for (size_t k = i; k < s.size() && k < i + n; ++k) {
    std::snprintf(buf, sizeof buf, "%02x", unsigned(static_cast<unsigned char>(s[k])));
    if (!out.empty()) out += ' ';
    out += buf;
  }
  return out;
}

// Valid range of the second byte for a lead byte (the first continuation byte is where overlongs,
// surrogates and > U+10FFFF are excluded); every later continuation byte is 80..BF.
struct Lead {
  int length;           // 0 = not a lead byte
  unsigned char lo, hi;  // range of the second byte
};

Lead lead_of(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// True with `len` set for a valid sequence at s[i]; else false with `why` and how many bytes to show.
bool check_at(std::string_view s, size_t i, size_t& len, std::string& why, size_t& shown) {
  const auto b = static_cast<unsigned char>(s[i]);
  const Lead lead = lead_of(b);
  if (lead.length == 0) {
    shown = 1;
    if (b >= 0x80 && b <= 0xBF) why = "a continuation byte with no lead byte";
    else if (b == 0xC0 || b == 0xC1) why = "an overlong 2-byte lead byte (c0/c1 are never valid)";
    else why = "a byte that never occurs in UTF-8 (f5..ff)";
    return false;
  }
  if (lead.length == 1) { len = 1; return true; }
  for (int k = 1; k < lead.length; ++k) {
    if (i + size_t(k) >= s.size()) {
      shown = size_t(k);
      why = detail::cat("truncated sequence: lead byte ", hex_bytes(s, i, 1), " needs ", lead.length,
                        " bytes, found ", k, " before the end");
      return false;
    }
    const auto c = static_cast<unsigned char>(s[i + size_t(k)]);
    const unsigned char lo = k == 1 ? lead.lo : 0x80, hi = k == 1 ? lead.hi : 0xBF;
    if (c < lo || c > hi) {
      shown = size_t(k) + 1;
      char range[16];
      std::snprintf(range, sizeof range, "%02x..%02x", unsigned(lo), unsigned(hi));
      why = detail::cat("expected a continuation byte ", range, " at position ", k + 1, " of a ",
                        lead.length, "-byte sequence",
                        k == 1 && (lo != 0x80 || hi != 0xBF) ? " (overlong, surrogate or above U+10FFFF)" : "");
      return false;
    }
  }
  len = size_t(lead.length);
  return true;
}

}  // namespace

size_t utf8_sequence_length(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  size_t len = 0, shown = 0;
  std::string why;
  return check_at(s, i, len, why, shown) ? len : 0;
}

std::optional<Utf8Problem> find_utf8_problem(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // ASCII fast path.
    if (static_cast<unsigned char>(s[i]) < 0x80) { ++i; continue; }
    size_t len = 0, shown = 0;
    std::string why;
    if (!check_at(s, i, len, why, shown)) {
      return Utf8Problem{i, detail::cat("invalid UTF-8 at byte offset ", i, ": bytes ", hex_bytes(s, i, shown),
                                        " (", why, ")")};
    }
    i += len;
  }
  return std::nullopt;
}

bool is_valid_utf8(std::string_view s) { return !find_utf8_problem(s).has_value(); }

void check_utf8(std::string_view s, std::string_view what) {
  if (auto p = find_utf8_problem(s)) fail(what, ": ", p->message);
}

std::vector<std::string_view> split_code_points(std::string_view s, std::string_view what) {
  check_utf8(s, what);
  std::vector<std::string_view> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const size_t len = utf8_sequence_length(s, i);
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

std::u32string decode_utf8(std::string_view s, std::string_view what) {
  std::u32string out;
  for (std::string_view cp : split_code_points(s, what)) {
    const auto b0 = static_cast<unsigned char>(cp[0]);
    char32_t c;
    if (cp.size() == 1) c = b0;
    else if (cp.size() == 2) c = char32_t(b0 & 0x1F);
    else if (cp.size() == 3) c = char32_t(b0 & 0x0F);
    else c = char32_t(b0 & 0x07);
    for (size_t k = 1; k < cp.size(); ++k) c = (c << 6) | char32_t(static_cast<unsigned char>(cp[k]) & 0x3F);
    out.push_back(c);
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  ATTN_CHECK(cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF),
             "append_utf8: expected a Unicode scalar value (<= U+10FFFF, not a surrogate), got ",
             uint32_t(cp));
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

std::string encode_utf8(std::u32string_view cps) {
  std::string out;
  for (char32_t c : cps) append_utf8(out, c);
  return out;
}

}  // namespace attn::text

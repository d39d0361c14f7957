// Alignment heat maps with an embedded bitmap font (see attn/train/heatmap.h).
#include "attn/viz/heatmap.h"

#include <algorithm>
#include <cmath>

#include "attn/core/error.h"
#include "attn/data/image.h"

namespace attn::viz {
namespace {

// 5x7 glyphs for ASCII 0x20..0x7E, written for attn: 7 rows top to bottom, bit 4 = leftmost column.
constexpr uint8_t kAscii[95][7] = {
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00},  // ' '
    {0x04, 0x04, 0x04, 0x04, 0x04, 0x00, 0x04},  // !
    {0x0A, 0x0A, 0x00, 0x00, 0x00, 0x00, 0x00},  // "
    {0x0A, 0x0A, 0x1F, 0x0A, 0x1F, 0x0A, 0x0A},  // #
    {0x04, 0x0F, 0x14, 0x0E, 0x05, 0x1E, 0x04},  // $
    {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03},  // %
    {0x0C, 0x12, 0x14, 0x08, 0x15, 0x12, 0x0D},  // &
    {0x04, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00},  // '
    {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02},  // (
    {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08},  // )
    {0x00, 0x04, 0x15, 0x0E, 0x15, 0x04, 0x00},  // *
    {0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00},  // +
    {0x00, 0x00, 0x00, 0x00, 0x0C, 0x04, 0x08},  // ,
    {0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00},  // -
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C},  // .
    {0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00},  // /
    {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E},  // 0
    {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E},  // 1
    {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F},  // 2
    {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E},  // 3
    {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02},  // 4
    {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E},  // 5
    {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E},  // 6
    {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08},  // 7
    {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E},  // 8
    {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C},  // 9
    {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00},  // :
    {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x04, 0x08},  // ;
    {0x02, 0x04, 0x08, 0x10, 0x08, 0x04, 0x02},  // <
    {0x00, 0x00, 0x1F, 0x00, 0x1F, 0x00, 0x00},  // =
    {0x08, 0x04, 0x02, 0x01, 0x02, 0x04, 0x08},  // >
    {0x0E, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04},  // ?
    {0x0E, 0x11, 0x01, 0x0D, 0x15, 0x15, 0x0E},  // @
    {0x0E, 0x11, 0x11, 0x11, 0x1F, 0x11, 0x11},  // A
    {0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E},  // B
    {0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E},  // C
    {0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C},  // D
    {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F},  // E
    {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10},  // F
    {0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F},  // G
    {0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11},  // H
    {0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E},  // I
    {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C},  // J
    {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11},  // K
    {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F},  // L
    {0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11},  // M
    {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11},  // N
    {0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E},  // O
    {0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10},  // P
    {0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D},  // Q
    {0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11},  // R
    {0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E},  // S
    {0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04},  // T
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E},  // U
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04},  // V
    {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A},  // W
    {0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11},  // X
    {0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04},  // Y
    {0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F},  // Z
    {0x0E, 0x08, 0x08, 0x08, 0x08, 0x08, 0x0E},  // [
    {0x00, 0x10, 0x08, 0x04, 0x02, 0x01, 0x00},  // backslash
    {0x0E, 0x02, 0x02, 0x02, 0x02, 0x02, 0x0E},  // ]
    {0x04, 0x0A, 0x11, 0x00, 0x00, 0x00, 0x00},  // ^
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F},  // _
    {0x08, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00},  // `
    {0x00, 0x00, 0x0E, 0x01, 0x0F, 0x11, 0x0F},  // a
    {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1E},  // b
    {0x00, 0x00, 0x0E, 0x10, 0x10, 0x11, 0x0E},  // c
    {0x01, 0x01, 0x0D, 0x13, 0x11, 0x11, 0x0F},  // d
    {0x00, 0x00, 0x0E, 0x11, 0x1F, 0x10, 0x0E},  // e
    {0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08},  // f
    {0x00, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x0E},  // g
    {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11},  // h
    {0x04, 0x00, 0x0C, 0x04, 0x04, 0x04, 0x0E},  // i
    {0x02, 0x00, 0x06, 0x02, 0x02, 0x12, 0x0C},  // j
    {0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12},  // k
    {0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E},  // l
    {0x00, 0x00, 0x1A, 0x15, 0x15, 0x11, 0x11},  // m
    {0x00, 0x00, 0x16, 0x19, 0x11, 0x11, 0x11},  // n
    {0x00, 0x00, 0x0E, 0x11, 0x11, 0x11, 0x0E},  // o
    {0x00, 0x00, 0x1E, 0x11, 0x1E, 0x10, 0x10},  // p
    {0x00, 0x00, 0x0D, 0x13, 0x0F, 0x01, 0x01},  // q
    {0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10},  // r
    {0x00, 0x00, 0x0E, 0x10, 0x0E, 0x01, 0x1E},  // s
    {0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06},  // t
    {0x00, 0x00, 0x11, 0x11, 0x11, 0x13, 0x0D},  // u
    {0x00, 0x00, 0x11, 0x11, 0x11, 0x0A, 0x04},  // v
    {0x00, 0x00, 0x11, 0x11, 0x15, 0x15, 0x0A},  // w
    {0x00, 0x00, 0x11, 0x0A, 0x04, 0x0A, 0x11},  // x
    {0x00, 0x00, 0x11, 0x11, 0x0F, 0x01, 0x0E},  // y
    {0x00, 0x00, 0x1F, 0x02, 0x04, 0x08, 0x1F},  // z
    {0x02, 0x04, 0x04, 0x08, 0x04, 0x04, 0x02},  // {
    {0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04},  // |
    {0x08, 0x04, 0x04, 0x02, 0x04, 0x04, 0x08},  // }
    {0x00, 0x00, 0x08, 0x15, 0x02, 0x00, 0x00},  // ~
};

constexpr std::array<uint8_t, 8> kBox = {0x1F, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1F, 0x00};

enum class Mark { none, grave, acute, circumflex, tilde, diaeresis, ring, cedilla };

// Two rows drawn above a letter whose top two rows are then dropped (lowercase letters have them
// empty; capitals keep rows 0, 2, 3, 4, 6 — squeezed to five rows, still legible).
constexpr uint8_t kMarkRows[8][2] = {
    {0x00, 0x00}, {0x08, 0x04}, {0x02, 0x04}, {0x04, 0x0A}, {0x0D, 0x16}, {0x00, 0x0A}, {0x0E, 0x0A}, {0x00, 0x00}};

std::array<uint8_t, 8> ascii_glyph(char c) {
  std::array<uint8_t, 8> g{};
  const auto i = static_cast<unsigned char>(c);
  if (i < 0x20 || i > 0x7E) return kBox;
  for (int r = 0; r < 7; ++r) g[size_t(r)] = kAscii[i - 0x20][r];
  return g;
}

std::array<uint8_t, 8> with_mark(char base, Mark m) {
  std::array<uint8_t, 8> g = ascii_glyph(base);
  if (base == 'i') g = {0x00, 0x00, 0x0C, 0x04, 0x04, 0x04, 0x0E, 0x00};   // dotless i under the mark
  if (m == Mark::cedilla) {
    g[7] = 0x04;   // a tail below the baseline
    return g;
  }
  if (base >= 'A' && base <= 'Z') g = {0, 0, g[0], g[2], g[3], g[4], g[6], 0};
  g[0] = kMarkRows[int(m)][0];
  g[1] = kMarkRows[int(m)][1];
  return g;
}

// Latin-1 letters U+00C0..U+00FF as (base, mark); base 0: not a decomposable letter.
struct Decomposed { char base; Mark mark; };
Decomposed latin1_letter(uint32_t cp) {
  static const char* kBases = "AAAAAAECEEEEIIIIDNOOOOOxOUUUUYPsaaaaaaeceeeeiiiidnooooo/ouuuuypy";
  static const Mark kMarks[64] = {
      Mark::grave, Mark::acute, Mark::circumflex, Mark::tilde, Mark::diaeresis, Mark::ring, Mark::none,
      Mark::cedilla, Mark::grave, Mark::acute, Mark::circumflex, Mark::diaeresis, Mark::grave, Mark::acute,
      Mark::circumflex, Mark::diaeresis, Mark::none, Mark::tilde, Mark::grave, Mark::acute, Mark::circumflex,
      Mark::tilde, Mark::diaeresis, Mark::none, Mark::none, Mark::grave, Mark::acute, Mark::circumflex,
      Mark::diaeresis, Mark::acute, Mark::none, Mark::none,
      Mark::grave, Mark::acute, Mark::circumflex, Mark::tilde, Mark::diaeresis, Mark::ring, Mark::none,
      Mark::cedilla, Mark::grave, Mark::acute, Mark::circumflex, Mark::diaeresis, Mark::grave, Mark::acute,
      Mark::circumflex, Mark::diaeresis, Mark::none, Mark::tilde, Mark::grave, Mark::acute, Mark::circumflex,
      Mark::tilde, Mark::diaeresis, Mark::none, Mark::none, Mark::grave, Mark::acute, Mark::circumflex,
      Mark::diaeresis, Mark::acute, Mark::none, Mark::diaeresis};
  if (cp < 0xC0 || cp > 0xFF) return {0, Mark::none};
  return {kBases[cp - 0xC0], kMarks[cp - 0xC0]};
}

std::array<uint8_t, 8> turned(std::array<uint8_t, 8> g) {   // rotated by 180 degrees (rows 0..6)
  std::array<uint8_t, 8> r{};
  for (int i = 0; i < 7; ++i) {
    uint8_t v = 0;
    for (int b = 0; b < 5; ++b)
      if (g[size_t(6 - i)] & (1 << b)) v |= uint8_t(1 << (4 - b));
    r[size_t(i)] = v;
  }
  return r;
}

// matplotlib's viridis at 0, 0.1, ..., 1.
constexpr uint8_t kViridis[11][3] = {{68, 1, 84},    {72, 36, 117},  {65, 68, 135},  {53, 95, 141},
                                     {42, 120, 142}, {33, 145, 140}, {34, 168, 132}, {68, 191, 112},
                                     {122, 209, 81}, {189, 223, 38}, {253, 231, 37}};

int64_t label_chars(const std::string& s, int64_t max_chars) {
  return std::min<int64_t>(int64_t(utf8_code_points(s).size()), max_chars);
}

// Code points to draw for a label: cut to max_chars, ending in an ellipsis when cut.
std::vector<uint32_t> label_points(const std::string& s, int64_t max_chars) {
  std::vector<uint32_t> cps = utf8_code_points(s);
  if (int64_t(cps.size()) > max_chars) {
    cps.resize(size_t(max_chars));
    cps.back() = 0x2026;
  }
  return cps;
}

struct Canvas {
  uint8_t* px;
  int64_t h, w;
  void set(int64_t y, int64_t x, const std::array<uint8_t, 3>& c) {
    if (y < 0 || y >= h || x < 0 || x >= w) return;
    uint8_t* p = px + (y * w + x) * 3;
    p[0] = c[0], p[1] = c[1], p[2] = c[2];
  }
  // One glyph with its top-left corner at (y, x); vertical: turned 90 degrees counter-clockwise
  // (reading upwards), occupying 8 f columns and 6 f rows with (y, x) its top-left corner.
  void glyph(const std::array<uint8_t, 8>& g, int64_t y, int64_t x, int64_t f, bool vertical) {
    const std::array<uint8_t, 3> ink{0, 0, 0};
    for (int64_t r = 0; r < 8; ++r)
      for (int64_t c = 0; c < 5; ++c) {
        if (!(g[size_t(r)] & (1 << (4 - c)))) continue;
        // horizontal: (row r, col c); vertical: glyph column c goes up, row r goes right.
        const int64_t gy = vertical ? (5 - c) : r, gx = vertical ? r : c;
        for (int64_t dy = 0; dy < f; ++dy)
          for (int64_t dx = 0; dx < f; ++dx) set(y + gy * f + dy, x + gx * f + dx, ink);
      }
  }
};

}  // namespace

std::vector<uint32_t> utf8_code_points(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1Fu) : len == 3 ? (b & 0x0Fu) : (b & 0x07u);
    bool ok = len != 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      ok = (c >> 6) == 0x2;
      cp = (cp << 6) | (c & 0x3Fu);
    }
    if (!ok) {
      out.push_back(0xFFFD);
      ++i;
    } else {
      out.push_back(cp);
      i += len;
    }
  }
  return out;
}

std::array<uint8_t, 8> glyph_rows(uint32_t cp) {
  if (cp >= 0x20 && cp <= 0x7E) return ascii_glyph(char(cp));
  const Decomposed d = latin1_letter(cp);
  if (d.base != 0) {
    if (d.mark != Mark::none) return with_mark(d.base, d.mark);
    if (d.base == 'x') return {0x00, 0x00, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x00};   // multiplication sign
    if (d.base == '/') return {0x00, 0x04, 0x00, 0x1F, 0x00, 0x04, 0x00, 0x00};   // division sign
    return ascii_glyph(d.base);   // Æ, Ð, Ø, Þ, ß, æ, ð, ø, þ: their nearest ASCII letter
  }
  switch (cp) {
    case 0xBF: return turned(ascii_glyph('?'));                   // ¿
    case 0xA1: return turned(ascii_glyph('!'));                   // ¡
    case 0x2581: return {0, 0, 0, 0, 0, 0, 0, 0x0E};             // ▁ SentencePiece word start: low short bar
    case 0xA0: return ascii_glyph(' ');
    case 0x2018: case 0x2019: case 0xB4: return ascii_glyph('\'');
    case 0x201C: case 0x201D: case 0xAB: case 0xBB: return ascii_glyph('"');
    case 0x2013: case 0x2014: return ascii_glyph('-');
    case 0x2026: return {0, 0, 0, 0, 0, 0, 0x15, 0};              // …
    case 0xB0: return {0x0C, 0x12, 0x0C, 0, 0, 0, 0, 0};          // °
    case 0xAA: return {0x0E, 0x01, 0x0F, 0x11, 0x0F, 0x00, 0x1F, 0};   // ª
    case 0xBA: return {0x0E, 0x11, 0x11, 0x11, 0x0E, 0x00, 0x1F, 0};   // º
    default: return kBox;
  }
}

std::array<uint8_t, 3> colormap_rgb(const std::string& colormap, double w) {
  if (std::isnan(w)) w = 0;
  w = std::clamp(w, 0.0, 1.0);
  if (colormap == "gray") {
    const auto v = uint8_t(std::lround(w * 255.0));
    return {v, v, v};
  }
  ATTN_CHECK(colormap == "viridis", "render_alignment: expected colormap \"viridis\" or \"gray\", got \"",
             colormap, "\"");
  const double x = w * 10.0;
  const int i = std::min(9, int(x));
  const double t = x - i;
  std::array<uint8_t, 3> c{};
  for (int k = 0; k < 3; ++k)
    c[size_t(k)] = uint8_t(std::lround(kViridis[i][k] + t * (kViridis[i + 1][k] - kViridis[i][k])));
  return c;
}

AlignmentLayout alignment_layout(int64_t T, int64_t S, const std::vector<std::string>& src_tokens,
                                 const std::vector<std::string>& tgt_tokens, const AlignmentOptions& opt) {
  ATTN_CHECK(opt.cell >= 1 && opt.font_scale >= 1 && opt.margin >= 0 && opt.max_label_chars >= 1,
             "render_alignment: expected cell >= 1, font_scale >= 1, margin >= 0, max_label_chars >= 1, got ",
             opt.cell, ", ", opt.font_scale, ", ", opt.margin, ", ", opt.max_label_chars);
  ATTN_CHECK(int64_t(src_tokens.size()) == S && int64_t(tgt_tokens.size()) == T,
             "render_alignment: expected ", S, " source and ", T, " target tokens for weights of shape [", T, ", ",
             S, "], got ", src_tokens.size(), " and ", tgt_tokens.size());
  int64_t src_chars = 1, tgt_chars = 1;
  for (const auto& s : src_tokens) src_chars = std::max(src_chars, label_chars(s, opt.max_label_chars));
  for (const auto& t : tgt_tokens) tgt_chars = std::max(tgt_chars, label_chars(t, opt.max_label_chars));
  const int64_t adv = 6 * opt.font_scale;
  AlignmentLayout l;
  l.left = opt.margin + adv * tgt_chars + opt.margin;
  l.top = opt.margin + adv * src_chars + opt.margin;
  l.width = l.left + S * opt.cell + opt.margin;
  l.height = l.top + T * opt.cell + opt.margin;
  return l;
}

Tensor render_alignment(const Tensor& weights, const std::vector<std::string>& src_tokens,
                        const std::vector<std::string>& tgt_tokens, const AlignmentOptions& opt) {
  ATTN_CHECK(weights.defined() && weights.dim() == 2,
             "render_alignment: expected weights of shape (T, S), got ",
             weights.defined() ? shape_str(weights.shape()) : std::string("an undefined tensor"));
  ATTN_CHECK(weights.dtype() == DType::f32 || weights.dtype() == DType::f64,
             "render_alignment: expected f32 or f64 weights, got ", dtype_name(weights.dtype()));
  const int64_t T = weights.size(0), S = weights.size(1);
  const AlignmentLayout l = alignment_layout(T, S, src_tokens, tgt_tokens, opt);
  colormap_rgb(opt.colormap, 0);   // validates the name before allocating
  Tensor img = Tensor::full({l.height, l.width, 3}, 255, DType::u8);
  Canvas cv{img.data<uint8_t>(), l.height, l.width};
  const std::vector<double> w = weights.to_vector<double>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t s = 0; s < S; ++s) {
      const auto c = colormap_rgb(opt.colormap, w[size_t(t * S + s)]);
      for (int64_t y = 0; y < opt.cell; ++y)
        for (int64_t x = 0; x < opt.cell; ++x) cv.set(l.top + t * opt.cell + y, l.left + s * opt.cell + x, c);
    }
  const int64_t f = opt.font_scale, adv = 6 * f;
  // Target labels: right-aligned against the grid, centred on their row.
  for (int64_t t = 0; t < T; ++t) {
    const auto cps = label_points(tgt_tokens[size_t(t)], opt.max_label_chars);
    const int64_t y = l.top + t * opt.cell + (opt.cell - 7 * f) / 2;
    int64_t x = l.left - opt.margin - adv * int64_t(cps.size());
    for (uint32_t cp : cps) cv.glyph(glyph_rows(cp), y, x, f, false), x += adv;
  }
  // Source labels: reading upwards, the first character just above the grid, centred on the column.
  for (int64_t s = 0; s < S; ++s) {
    const auto cps = label_points(src_tokens[size_t(s)], opt.max_label_chars);
    const int64_t x = l.left + s * opt.cell + (opt.cell - 7 * f) / 2;
    int64_t y = l.top - opt.margin - adv;
    for (uint32_t cp : cps) cv.glyph(glyph_rows(cp), y, x, f, true), y -= adv;
  }
  return img;
}

void write_alignment_png(const std::string& path, const Tensor& weights, const std::vector<std::string>& src_tokens,
                         const std::vector<std::string>& tgt_tokens, const AlignmentOptions& opt) {
  data::write_png(path, render_alignment(weights, src_tokens, tgt_tokens, opt));
}

}  // namespace attn::viz

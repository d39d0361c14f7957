// Alignment heat maps: the layout formula, cell colours, label ink where labels go (and nowhere
// else outside the grid), the font's non-ASCII forms, UTF-8 robustness, PNG round trip, errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "attn/attn.h"
#include "attn/data/image.h"
#include "attn/viz/heatmap.h"
#include "errors.h"

using namespace attn;
using test::error_of;
using namespace attn::viz;

namespace {

std::array<uint8_t, 3> pixel(const Tensor& img, int64_t y, int64_t x) {
  const uint8_t* p = img.data<uint8_t>() + (y * img.size(1) + x) * 3;
  return {p[0], p[1], p[2]};
}

// Number of black pixels in rows [y0, y1) x columns [x0, x1).
int64_t ink(const Tensor& img, int64_t y0, int64_t y1, int64_t x0, int64_t x1) {
  int64_t n = 0;
  for (int64_t y = y0; y < y1; ++y)
    for (int64_t x = x0; x < x1; ++x) n += pixel(img, y, x) == std::array<uint8_t, 3>{0, 0, 0};
  return n;
}

const std::string kSp = "\xe2\x96\x81";   // SentencePiece's word-start mark U+2581

}  // namespace

TEST(Heatmap, LayoutFormula) {
  AlignmentOptions opt;
  opt.cell = 10;
  opt.margin = 3;
  opt.font_scale = 2;
  // Longest target label "cat." = 4 characters, longest source "gato" = 4 (the ▁ counts as one).
  const std::vector<std::string> src{kSp + "el", kSp + "gato", "."}, tgt{"the", "cat."};
  Tensor img = render_alignment(Tensor::zeros({2, 3}), src, tgt, opt);
  // left = 3 + 6*2*4 + 3 = 54; top = 3 + 6*2*5 + 3 = 66 ("▁gato" is 5 characters);
  // W = 54 + 3*10 + 3 = 87; H = 66 + 2*10 + 3 = 89.
  EXPECT_EQ(img.shape(), (Shape{89, 87, 3}));
  EXPECT_EQ(img.dtype(), DType::u8);
  AlignmentLayout l = alignment_layout(2, 3, src, tgt, opt);
  EXPECT_EQ(l.left, 54);
  EXPECT_EQ(l.top, 66);
  // Labels are cut at max_label_chars (the last character becomes "…").
  opt.max_label_chars = 3;
  l = alignment_layout(2, 3, src, tgt, opt);
  EXPECT_EQ(l.left, 3 + 6 * 2 * 3 + 3);
  EXPECT_EQ(l.top, 3 + 6 * 2 * 3 + 3);
}

// The defaults (those of `attn align`) draw a short sentence at a size a person can read: cells of
// at least 24 pixels and letters at least 14 pixels tall (the 7-row font at scale 2 or more).
TEST(Heatmap, DefaultsAreReadable) {
  const std::vector<std::string> src{kSp + "el", kSp + "gato", kSp + "come", kSp + "pescado", "."};
  const std::vector<std::string> tgt{kSp + "the", kSp + "cat", kSp + "eats"};
  Generator g(4);
  const Tensor w = softmax(randn({3, 5}, g) * 3.0, -1);
  const AlignmentOptions opt;
  EXPECT_GE(opt.cell, 24);
  EXPECT_GE(opt.font_scale, 2);
  const Tensor img = render_alignment(w, src, tgt);
  const AlignmentLayout l = alignment_layout(3, 5, src, tgt);
  EXPECT_GE(img.size(1), 200);   // 122 at the old defaults (16-pixel cells, 5 x 7 pixel letters)
  EXPECT_GE(img.size(0), 180);
  EXPECT_EQ(img.size(1), l.left + 5 * opt.cell + opt.margin);
  // The ink of the target label "▁cat" (row 1) spans at least 14 pixel rows, inside its row.
  int64_t first = -1, last = -1;
  for (int64_t y = l.top + opt.cell; y < l.top + 2 * opt.cell; ++y)
    if (ink(img, y, y + 1, 0, l.left) > 0) {
      if (first < 0) first = y;
      last = y;
    }
  ASSERT_GE(first, 0);
  EXPECT_GE(last - first + 1, 14);
}

TEST(Heatmap, CellColours) {
  // Weights: row 0 = [1, 0], row 1 = [0.5, NaN].
  Tensor w = Tensor::from_vector<float>({1.f, 0.f, 0.5f, std::nanf("")}, {2, 2});
  AlignmentOptions opt;
  opt.cell = 12;
  Tensor img = render_alignment(w, {"a", "b"}, {"x", "y"}, opt);
  const AlignmentLayout l = alignment_layout(2, 2, {"a", "b"}, {"x", "y"}, opt);
  const auto at = [&](int64_t t, int64_t s, int64_t dy, int64_t dx) {
    return pixel(img, l.top + t * opt.cell + dy, l.left + s * opt.cell + dx);
  };
  using C = std::array<uint8_t, 3>;
  // viridis: 1 -> #fde725, 0 -> #440154, 0.5 -> #21918c (a tabulated stop); NaN -> as 0.
  EXPECT_EQ(at(0, 0, 0, 0), (C{253, 231, 37}));
  EXPECT_EQ(at(0, 0, 11, 11), (C{253, 231, 37}));
  EXPECT_EQ(at(0, 1, 5, 5), (C{68, 1, 84}));
  EXPECT_EQ(at(1, 0, 5, 5), (C{33, 145, 140}));
  EXPECT_EQ(at(1, 1, 5, 5), (C{68, 1, 84}));
  // Between stops: 0.05 is halfway from #440154 to #482475 -> (70, 18.5, 100.5) rounded away from 0.
  EXPECT_EQ(colormap_rgb("viridis", 0.05), (C{70, 19, 101}));
  EXPECT_EQ(colormap_rgb("viridis", 7.0), (C{253, 231, 37}));   // clamped
  opt.colormap = "gray";
  img = render_alignment(w, {"a", "b"}, {"x", "y"}, opt);
  EXPECT_EQ(at(0, 0, 3, 3), (C{255, 255, 255}));
  EXPECT_EQ(at(0, 1, 3, 3), (C{0, 0, 0}));
  EXPECT_EQ(at(1, 0, 3, 3), (C{128, 128, 128}));   // round(127.5) = 128
  // The background around the grid is white.
  EXPECT_EQ(pixel(img, img.size(0) - 1, img.size(1) - 1), (C{255, 255, 255}));
}

TEST(Heatmap, LabelsDrawInkWhereTheyBelong) {
  AlignmentOptions opt;
  opt.cell = 16;
  const std::vector<std::string> src{"ab", "", "xyz"}, tgt{"Hello", ""};
  Tensor img = render_alignment(Tensor::full({2, 3}, 0.5), src, tgt, opt);
  const AlignmentLayout l = alignment_layout(2, 3, src, tgt, opt);
  // Left strip, row band of target 0: ink; of target 1 (empty label): none.
  EXPECT_GT(ink(img, l.top, l.top + 16, 0, l.left), 20);
  EXPECT_EQ(ink(img, l.top + 16, l.top + 32, 0, l.left), 0);
  // Top strip, column band of source 0 and 2: ink; source 1 (empty): none.
  EXPECT_GT(ink(img, 0, l.top, l.left, l.left + 16), 10);
  EXPECT_EQ(ink(img, 0, l.top, l.left + 16, l.left + 32), 0);
  EXPECT_GT(ink(img, 0, l.top, l.left + 32, l.left + 48), 10);
  // Nothing black in the corner above the target labels and left of the source labels.
  EXPECT_EQ(ink(img, 0, l.top, 0, l.left), 0);
  // The grid itself holds only the colour map (no ink).
  EXPECT_EQ(ink(img, l.top, l.top + 32, l.left, l.left + 48), 0);
  // "Hello" is right-aligned against the grid: its last column of ink is within margin + 1 of it.
  int64_t last = -1;
  for (int64_t x = 0; x < l.left; ++x)
    if (ink(img, l.top, l.top + 16, x, x + 1) > 0) last = x;
  EXPECT_GE(last, l.left - opt.margin - 6);
  EXPECT_LT(last, l.left - opt.margin);
}

TEST(Heatmap, GlyphsOfAsciiAccentsAndSentencePiece) {
  const auto box = glyph_rows(0x4E00);   // a CJK ideograph: the box
  EXPECT_EQ(box, (std::array<uint8_t, 8>{0x1F, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1F, 0x00}));
  // Every printable ASCII character but the space has ink and is not the box.
  for (uint32_t c = 0x21; c <= 0x7E; ++c) {
    const auto g = glyph_rows(c);
    int bits = 0;
    for (uint8_t r : g) bits += __builtin_popcount(r);
    EXPECT_GT(bits, 0) << char(c);
    EXPECT_NE(g, box) << char(c);
  }
  // Accented letters: the base letter's lower rows with a mark on top, different from the base.
  for (uint32_t cp : {0xF1u, 0xE1u, 0xE9u, 0xEDu, 0xF3u, 0xFAu, 0xFCu, 0xC1u, 0xC9u, 0xD1u, 0xDCu}) {
    const auto g = glyph_rows(cp);
    EXPECT_NE(g, box) << std::hex << cp;
    EXPECT_NE(g[0] | g[1], 0) << std::hex << cp;   // the mark
  }
  EXPECT_EQ(glyph_rows(0xF1)[6], glyph_rows('n')[6]);   // ñ is an n underneath
  EXPECT_EQ(glyph_rows(0xE9)[4], glyph_rows('e')[4]);   // é is an e underneath
  EXPECT_NE(glyph_rows(0xE1), glyph_rows(0xE0));        // á vs à
  // ¿ ¡ are ? ! turned over: the dot at the top.
  EXPECT_EQ(glyph_rows(0xBF)[0], 0x04);
  EXPECT_EQ(glyph_rows(0xA1)[0], 0x04);
  EXPECT_EQ(glyph_rows(0xA1)[1], 0x00);
  // ▁ is a short low bar, not an underscore.
  EXPECT_NE(glyph_rows(0x2581), glyph_rows('_'));
  EXPECT_NE(glyph_rows(0x2581)[7], 0);
  // UTF-8 decoding, with invalid bytes as U+FFFD.
  EXPECT_EQ(utf8_code_points("a\xc3\xb1\xe2\x96\x81"), (std::vector<uint32_t>{'a', 0xF1, 0x2581}));
  EXPECT_EQ(utf8_code_points("\xff" "a\xe2\x96"), (std::vector<uint32_t>{0xFFFD, 'a', 0xFFFD, 0xFFFD}));
}

TEST(Heatmap, Utf8LabelsDoNotCrashAndRoundTripAsPng) {
  const std::vector<std::string> src{kSp + "\xc2\xbf" "D\xc3\xb3nde", kSp + "est\xc3\xa1", kSp + "el",
                                     kSp + "ni\xc3\xb1o", "?", "\xe4\xb8\xad\xe6\x96\x87", "\xff\xfe broken",
                                     std::string(100, 'x')};
  const std::vector<std::string> tgt{kSp + "Where", kSp + "is", kSp + "the", kSp + "child", "?"};
  Generator g(3);
  Tensor w = rand({5, 8}, g);
  for (int64_t f : {1, 2}) {
    AlignmentOptions opt;
    opt.font_scale = f;
    opt.cell = 8 * f + 2;
    Tensor img = render_alignment(w, src, tgt, opt);
    const AlignmentLayout l = alignment_layout(5, 8, src, tgt, opt);
    EXPECT_EQ(img.shape(), (Shape{l.height, l.width, 3}));
    EXPECT_EQ(l.top, opt.margin * 2 + 6 * f * opt.max_label_chars);   // the 100-x label, cut
    const auto path = (std::filesystem::temp_directory_path() / ("attn_heatmap_" + std::to_string(f) + ".png")).string();
    write_alignment_png(path, w, src, tgt, opt);
    Tensor back = data::read_image(path, 3);
    EXPECT_EQ(back.to_vector<int64_t>(), img.to_vector<int64_t>());
    std::filesystem::remove(path);
  }
}

TEST(Heatmap, Errors) {
  EXPECT_EQ(error_of([] { render_alignment(Tensor::zeros({2, 3}), {"a", "b"}, {"x", "y"}); }),
            "render_alignment: expected 3 source and 2 target tokens for weights of shape [2, 3], got 2 and 2");
  EXPECT_EQ(error_of([] { render_alignment(Tensor::zeros({6}), {}, {}); }),
            "render_alignment: expected weights of shape (T, S), got [6]");
  EXPECT_EQ(error_of([] { render_alignment(Tensor::zeros({1, 1}, DType::i64), {"a"}, {"b"}); }),
            "render_alignment: expected f32 or f64 weights, got i64");
  AlignmentOptions opt;
  opt.colormap = "jet";
  EXPECT_EQ(error_of([&] { render_alignment(Tensor::zeros({1, 1}), {"a"}, {"b"}, opt); }),
            "render_alignment: expected colormap \"viridis\" or \"gray\", got \"jet\"");
}

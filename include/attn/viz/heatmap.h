// Alignment heat maps for translation: cross-attention weights drawn as a grid of coloured cells,
// source tokens along the top (vertical text, reading upwards) and target tokens down the left.
//
//   Tensor w = ...;                                   // (T, S) f32 in [0, 1]: target row, source column
//   viz::AlignmentOptions opt;  opt.cell = 32;      // pixels per cell
//   Tensor img = viz::render_alignment(w, {"\xe2\x96\x81el", "\xe2\x96\x81gato"}, {"\xe2\x96\x81the", "\xe2\x96\x81cat"}, opt);
//   data::write_png("align.png", img);                // img: u8 (H, W, 3)
//   // or in one call: viz::write_alignment_png("align.png", w, src, tgt, opt);
//
// Layout (every size in pixels, f = opt.font_scale, glyph advance 6 f, line height 8 f):
//   left = margin + 6 f * max(1, longest target label in characters) + margin
//   top  = margin + 6 f * max(1, longest source label in characters) + margin
//   W = left + S * cell + margin,   H = top + T * cell + margin
// Cell (t, s) covers rows [top + t cell, top + (t + 1) cell) and columns [left + s cell, ...).
// Labels longer than max_label_chars characters are cut, ending in "…". Text is black on white.
//
// Colours: "viridis" (matplotlib's, linear between its 11 tabulated stops 0, 0.1, ..., 1: 0 ->
// #440154, 1 -> #fde725) or "gray" (round(255 w)). Weights are clamped to [0, 1]; NaN draws as 0.
//
// Text uses an embedded 5x7 bitmap font (attn's own table) for ASCII; Latin-1 letters with a
// grave / acute / circumflex / tilde / diaeresis / ring / cedilla (ñ á é í ó ú ü ...) are drawn as
// the base letter with the mark, ¿ and ¡ as ? and ! turned over, SentencePiece's ▁ (U+2581) as a
// short low bar, quotes and dashes as their ASCII forms, and any other code point (or invalid UTF-8
// byte) as a box.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "attn/core/tensor.h"

namespace attn::viz {

struct AlignmentOptions {
  // The defaults draw a short sentence readably: 10 x 14 pixel letters in 28 pixel cells.
  int64_t cell = 28;               // cell side in pixels (>= 8 * font_scale keeps column labels apart)
  int64_t font_scale = 2;          // each font pixel becomes font_scale x font_scale pixels
  int64_t margin = 8;
  int64_t max_label_chars = 24;
  std::string colormap = "viridis";   // "viridis" | "gray"
};

struct AlignmentLayout {
  int64_t left = 0, top = 0;       // where the grid starts
  int64_t width = 0, height = 0;   // of the whole image
};

// The layout render_alignment uses (the formula above).
AlignmentLayout alignment_layout(int64_t T, int64_t S, const std::vector<std::string>& src_tokens,
                                 const std::vector<std::string>& tgt_tokens, const AlignmentOptions& opt = {});

// weights: (T, S) f32 or f64; src_tokens.size() == S, tgt_tokens.size() == T -> u8 (H, W, 3).
Tensor render_alignment(const Tensor& weights, const std::vector<std::string>& src_tokens,
                        const std::vector<std::string>& tgt_tokens, const AlignmentOptions& opt = {});
// render_alignment, written with data::write_png.
void write_alignment_png(const std::string& path, const Tensor& weights, const std::vector<std::string>& src_tokens,
                         const std::vector<std::string>& tgt_tokens, const AlignmentOptions& opt = {});

// The colour of weight w under a colour map ("viridis" | "gray").
std::array<uint8_t, 3> colormap_rgb(const std::string& colormap, double w);

// The 5x8 bitmap of one code point (rows top to bottom, bit 4 = leftmost column; row 7 is below the
// baseline, used by ▁ and cedillas). Unknown code points give the box.
std::array<uint8_t, 8> glyph_rows(uint32_t code_point);
// Code points of a UTF-8 string (an invalid byte becomes U+FFFD).
std::vector<uint32_t> utf8_code_points(const std::string& s);

}  // namespace attn::viz

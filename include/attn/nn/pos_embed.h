// Absolute positional encodings: fixed (sinusoidal 1-d, 2-d sin-cos) and learned (1-d, 2-d).
// Relative ones (Swin's bias table, 1-d biases, ViT's relative embeddings) are in
// attn/nn/attention/relative_bias.h.
//
//   Tensor pe = nn::sinusoidal_pos_embed(128, 512);             // (128, 512), "Attention Is All You Need"
//   Tensor pe2 = nn::sincos_2d_pos_embed(768, 14, 14, true);    // (197, 768), MAE's layout, cls row 0
//   nn::PosEmbed pos({.kind = nn::PosEmbedKind::learned, .dim = 768, .num_positions = 197});
//   Tensor y = pos.forward(x);                                  // x (B, 197, 768) + pos_embed
//   // (1, 2 + 14*14, 192) -> (1, 2 + 24*24, 192): a 224 DeiT checkpoint for 384 images
//   Tensor pe384 = nn::resample_pos_embed(ckpt_pos, {14, 14}, {24, 24}, /*num_prefix_tokens=*/2);
//
// sinusoidal_pos_embed: PE[pos, 2i] = sin(pos / base^(2i/D)), PE[pos, 2i+1] = cos(pos / base^(2i/D))
//   (interleaved; an odd D ends with a sin column).
// sincos_2d_pos_embed: MAE / MoCo v3's get_2d_sincos_pos_embed on a (grid_h, grid_w) grid, tokens
//   row-major (token m = i grid_w + j). Columns [0, D/2) encode the column index j, columns
//   [D/2, D) the row index i (MAE's meshgrid puts w first), each half as [sin(p ω_k) for k < D/4,
//   cos(p ω_k) for k < D/4] (NOT interleaved), ω_k = 1 / 10000^(k / (D/4)). D % 4 == 0.
//   cls_token prepends a row of zeros. Computed in double, then converted.
//
// PosEmbed kinds and their tensors (checkpoint names):
//   none        nothing; forward(x) = x
//   sinusoidal  buffer "pos_embed" (1, N, D), N = num_positions
//   learned     parameter "pos_embed" (1, N, D), timm's init trunc_normal(std .02); N counts any class
//               token (ViT-B/16 at 224: 197)
//   learned_2d  ViT's 2-d ablation: parameters "col_embed" (grid_w, D/2) and "row_embed" (grid_h, D/2),
//               token (i, j) gets [col_embed[j], row_embed[i]] (X then Y, as the sin-cos layout), and
//               with cls_token "cls_pos_embed" (1, 1, D) first; trunc_normal(std .02)
//   sincos_2d   buffer "pos_embed" (1, N, D) = sincos_2d_pos_embed (MAE's checkpoint key)
// forward(x): x (B, T, D) + the first T positions (T <= N; the 2-d kinds need T == N).
//
// Resampling an absolute position embedding to another patch grid, as DeiT / timm's
// resample_abs_pos_embed (timm.layers) do: the prefix (class, distillation) tokens are kept apart,
// the grid part is resized with bicubic interpolation exactly as torch.nn.functional.interpolate
// (mode='bicubic', align_corners=False) computes it (Keys' cubic with a = -0.75, border pixels
// replicated). antialias=true is timm's variant (resample_abs_pos_embed's default; F.interpolate(
// mode='bicubic', antialias=True)): Keys' cubic with a = -0.5 instead of -0.75, widened by in/out when
// shrinking, and the border handled by renormalising the weights of the taps inside the grid instead
// of replicating the edge. The default (false) is DeiT's plain bicubic.
//   Tensor y = nn::interpolate_bicubic(x, 7, 9);   // x: (N, C, H, W) -> (N, C, 7, 9)
#pragma once
#include <cstdint>
#include <utility>

#include "attn/core/rng.h"
#include "attn/nn/module.h"

namespace attn::nn {

Tensor sinusoidal_pos_embed(int64_t num_positions, int64_t dim, DType dtype = DType::f32, double base = 10000.0);
Tensor sincos_2d_pos_embed(int64_t dim, int64_t grid_h, int64_t grid_w, bool cls_token = false,
                           DType dtype = DType::f32);

// x: (N, C, H, W) floating -> (N, C, out_h, out_w), same dtype. No autograd (weights conversion).
Tensor interpolate_bicubic(const Tensor& x, int64_t out_h, int64_t out_w, bool antialias = false);
// pos: (1, prefix + old_h * old_w, D) -> (1, prefix + new_h * new_w, D). Grids are (rows, cols);
// non-square grids allowed. Returns a copy of pos when the grids are equal.
Tensor resample_pos_embed(const Tensor& pos, std::pair<int64_t, int64_t> old_grid,
                          std::pair<int64_t, int64_t> new_grid, int64_t num_prefix_tokens, bool antialias = false);

enum class PosEmbedKind { none, sinusoidal, learned, learned_2d, sincos_2d };

struct PosEmbedOptions {
  PosEmbedKind kind = PosEmbedKind::learned;
  int64_t dim = 0;              // D
  int64_t num_positions = 0;    // none / sinusoidal / learned: N
  int64_t grid_h = 0;           // learned_2d / sincos_2d
  int64_t grid_w = 0;
  bool cls_token = false;       // learned_2d / sincos_2d: one extra position first
  DType dtype = DType::f32;
};

class PosEmbed : public Module {
 public:
  explicit PosEmbed(const PosEmbedOptions& o, Generator& g = default_generator());
  // x (B, T, D) -> x + embedding()[:, :T]
  Tensor forward(const Tensor& x) const;
  // (1, N, D), differentiable for the learned kinds; undefined for none.
  Tensor embedding() const;
  int64_t num_positions() const;   // N (0 for none: any length)
  const PosEmbedOptions& options() const { return opt_; }

 private:
  PosEmbedOptions opt_;

 public:
  Tensor& pos_embed;       // learned (parameter), sinusoidal / sincos_2d (buffer)
  Tensor& cls_pos_embed;   // learned_2d with cls_token
  Tensor& col_embed;       // learned_2d
  Tensor& row_embed;       // learned_2d
};

}  // namespace attn::nn

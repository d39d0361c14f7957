// Resampling a ViT's absolute position embedding to another patch grid, as DeiT / timm's
// resample_abs_pos_embed do: the prefix (class, distillation) tokens are kept apart, the grid part
// is resized with bicubic interpolation exactly as torch.nn.functional.interpolate(mode='bicubic',
// align_corners=False) computes it (Keys' cubic with a = -0.75, border pixels replicated).
//
//   // (1, 2 + 14*14, 192) -> (1, 2 + 24*24, 192): a 224 DeiT checkpoint for 384 images
//   Tensor pe = io::resample_pos_embed(ckpt_pos, {14, 14}, {24, 24}, /*num_prefix_tokens=*/2);
//   Tensor y = io::interpolate_bicubic(x, 7, 9);   // x: (N, C, H, W) -> (N, C, 7, 9)
//
// antialias=true is timm's variant (resample_abs_pos_embed's default; F.interpolate(mode='bicubic',
// antialias=True)): Keys' cubic with a = -0.5 instead of -0.75, widened by in/out when shrinking, and
// the border handled by renormalising the weights of the taps inside the grid instead of replicating
// the edge. The default (false) is DeiT's plain bicubic.
#pragma once
#include <cstdint>
#include <utility>

#include "attn/core/tensor.h"

namespace attn::io {

// x: (N, C, H, W) floating -> (N, C, out_h, out_w), same dtype. No autograd (weights conversion).
Tensor interpolate_bicubic(const Tensor& x, int64_t out_h, int64_t out_w, bool antialias = false);

// pos: (1, prefix + old_h * old_w, D) -> (1, prefix + new_h * new_w, D). Grids are (rows, cols);
// non-square grids allowed. Returns a copy of pos when the grids are equal.
Tensor resample_pos_embed(const Tensor& pos, std::pair<int64_t, int64_t> old_grid,
                          std::pair<int64_t, int64_t> new_grid, int64_t num_prefix_tokens,
                          bool antialias = false);

}  // namespace attn::io

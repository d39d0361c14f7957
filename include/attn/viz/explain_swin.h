// Seeing a Swin Transformer's shifted windows: one block's window attention drawn over the image.
//
//   auto sw = std::dynamic_pointer_cast<models::SwinTransformer>(pretrained.model);
//   auto p = viz::prepare_image("shoe.png", pretrained.preprocess);
//   viz::SwinExplanation e = viz::explain_swin(*sw, p, {.stage = 0, .block = 1});   // the first shifted block
//   data::write_png("windows.png", e.panel);    // image | the query's attention | attention received
//
// The block's attention probabilities (SwinTransformer::attention_of, heads fused by `fusion`) are mapped back from the block's windows (padded, rolled by -shift) to the token map
// H x W of its stage (the image in P 2^stage pixel cells):
//   query:    the query token's row: nonzero only inside its window (for a shifted block, the part
//             of the window in the query's region of the shift mask; elsewhere e^-100, zero in f32
//             after rounding for practical purposes)
//   received: per token, the mean over its window's queries (the real tokens, not the padding) of
//             the attention it receives
// The window grid the block ran, in image coordinates, has its borders at token offsets p with
// (p - shift) mod window == 0 (window_of below); the panels draw it in white, the query cell in black.
#pragma once
#include <cstdint>

#include "attn/models/swin.h"
#include "attn/viz/explain.h"

namespace attn::viz {

struct SwinExplainOptions {
  int64_t stage = 0, block = 1;          // 0-based; block 1 of a stage is its first shifted one
  int64_t query_row = -1, query_col = -1;   // the query token in the stage's map; -1: the map's centre
  HeadFusion fusion = HeadFusion::mean;
  int64_t min_panel = 224;               // minimum panel side in pixels (integer upscaling)
  double alpha = 0.5;                    // heat-map opacity
};

struct SwinExplanation {
  Tensor query_map;   // (H, W) f32: the query token's attention over the stage's token map
  Tensor received;    // (H, W) f32: mean attention received within each window
  int64_t query_row = 0, query_col = 0;
  int64_t window = 0, shift_h = 0, shift_w = 0;   // window side and the shift the block ran
  int64_t cell = 0;   // image pixels per token of the stage (patch_size 2^stage)
  Tensor panel;       // u8 (S', 3 S', 3): image | query map | received, window borders drawn
};

// The window (along one side) that token offset p lies in for a block of window `window` shifted by
// `shift`: floor((p - shift) / window), the shift mask's regions included (the wrapped window's two
// parts get -1 and the last index).
int64_t window_of(int64_t p, int64_t window, int64_t shift);

SwinExplanation explain_swin(const models::SwinTransformer& swin, const PreparedImage& p,
                             const SwinExplainOptions& o = {});

}  // namespace attn::viz

// Shifted-window multi-head self-attention (Swin Transformer, Liu et al. 2021; V2, Liu et al. 2022),
// exactly as torchvision 0.14's shifted_window_attention, with its parameter names.
//
//   nn::ShiftedWindowAttention a({.dim = 96, .num_heads = 3, .window_h = 7, .window_w = 7, .shift_h = 3, .shift_w = 3});
//   Tensor y = a.forward(x);                              // x (B, H, W, C) -> (B, H, W, C), any H, W
//   Tensor w = nn::window_partition(x, 7, 7);             // (B, H, W, C), H, W multiples of 7 -> (B nW, 49, C)
//   Tensor o = nn::window_attention(w, *a.qkv, *a.proj, bias, 3);   // the swappable core, (B nW, 49, C)
//
// forward: pad H, W at the end to multiples of the window (zeros); drop the shift along a side the
// window covers whole (window >= padded size); cyclic shift by -shift (torch.roll); windows in raster
// order; window_attention with the relative position bias (NH, N, N) plus, when shifted, the shift
// mask (0 within a region, -100 across regions, built for the padded size with torchvision's slices);
// windows back; shift back; crop the padding.
// window_attention: qkv = Linear(C, 3C) in [q | k | v] order, heads of C / NH,
//   V1:  softmax(q kᵀ / sqrt(HS) + bias) v
//   V2:  softmax(cos(q, k) · exp(min(logit_scale, log 100)) + bias) v, the key's qkv bias held at zero
// then the output projection. The module runs f32 without attention dropout through the fused
// window_attention_packed (attn/ops/window_attention.h: bias and shift mask added per window in its
// kernel); otherwise window_attention: V1 through scaled_dot_product_attention_packed with the bias
// and mask expanded to the windows as its additive mask, V2 through composite ops.
//
// Parameters: qkv, proj; V1 "relative_position_bias_table" ((2Wh-1)(2Ww-1), NH), trunc_normal .02,
// and the persistent buffer "relative_position_index" (N N) i64 (torchvision's flat layout);
// V2 "logit_scale" (NH, 1, 1) = log 10, "cpb_mlp" (0: Linear(2, 512), 1: ReLU, 2: Linear(512, NH, no
// bias)) over the persistent buffer "relative_coords_table" (1, 2Wh-1, 2Ww-1, 2) of log-spaced
// coordinates sign(t) log2(1 + |8 t / (W - 1)|) / 3 (W: pretrained_window when set; a window of 1
// divides by nothing, as transformers); the bias is 16 sigmoid(cpb_mlp(table)[index]).
#pragma once
#include <cstdint>
#include <memory>
#include <utility>

#include "attn/core/rng.h"
#include "attn/nn/linear.h"
#include "attn/nn/module.h"
#include "attn/nn/sequential.h"

namespace attn::nn {

// (B, H, W, C), H and W multiples of the window -> (B nW, wh ww, C), windows in raster order.
Tensor window_partition(const Tensor& x, int64_t wh, int64_t ww);
// The inverse: (B nW, wh ww, C) -> (B, H, W, C).
Tensor window_reverse(const Tensor& windows, int64_t batch, int64_t h, int64_t w, int64_t wh, int64_t ww);
// torch.roll(x, (sh, sw), (1, 2)) on (B, H, W, C): out[:, i, j] = x[:, (i - sh) mod H, (j - sw) mod W].
Tensor roll_hw(const Tensor& x, int64_t sh, int64_t sw);
// torchvision's shift mask for a padded (h, w) map: (nW, N, N) f32, 0 where both tokens lie in one
// region of the shifted map, -100 elsewhere.
Tensor swin_shift_mask(int64_t h, int64_t w, int64_t wh, int64_t ww, int64_t sh, int64_t sw);

// windows (B', N, C) -> (B', N, C); bias additive, broadcastable to (B', NH, N, N). logit_scale
// (NH, 1, 1) defined: V2's cosine attention. Attention-weight dropout attn_drop when training.
// probs non-null: also the attention probabilities (B', NH, N, N), before dropout (the unfused path).
Tensor window_attention(const Tensor& windows, const Linear& qkv, const Linear& proj, const Tensor& bias,
                        int64_t num_heads, const Tensor& logit_scale = Tensor(), double attn_drop = 0.0,
                        bool training = false, Generator* g = nullptr, Tensor* probs = nullptr);

struct ShiftedWindowAttentionOptions {
  int64_t dim = 0, num_heads = 0;
  int64_t window_h = 7, window_w = 7;
  int64_t shift_h = 0, shift_w = 0;
  bool qkv_bias = true, proj_bias = true;
  double attn_drop = 0.0, proj_drop = 0.0;
  bool v2 = false;   // cosine attention + continuous position bias
  // timm >= 1.0's order: roll the map, then pad it (mask for the padded size), crop, roll back; the
  // shift is kept whatever the map's size (timm fixes it when the model is built).
  bool roll_before_pad = false;
  // transformers' Swinv2Layer: torchvision's order (pad, then roll), the shift kept whatever the map's
  // size, and its mask added twice (-200 across regions).
  bool hf_v2 = false;
  // V2: the window the position-bias MLP was trained at (timm's / transformers' pretrained_window_size):
  // relative_coords_table's offsets are divided by pretrained - 1 instead of window - 1; 0: the window.
  int64_t pretrained_window_h = 0, pretrained_window_w = 0;
};

class ShiftedWindowAttention : public Module {
 public:
  explicit ShiftedWindowAttention(const ShiftedWindowAttentionOptions& o, Generator& g = default_generator());
  // (B, H, W, C) -> (B, H, W, C); shift false: no shift at all (Hugging Face's rule for small maps).
  // weights: also the attention probabilities, (B nW, NH, N, N) over the padded, shifted map's windows
  // in raster order (before attention dropout).
  Tensor forward(const Tensor& x, bool shift = true, Tensor* weights = nullptr) const;
  // The shift forward(x, shift) runs an H x W map with: (0, 0) where it drops it (no shift asked for,
  // or, as torchvision, a window that covers the padded side whole; roll_before_pad and hf_v2 keep it).
  std::pair<int64_t, int64_t> effective_shift(int64_t h, int64_t w, bool shift = true) const;
  // (NH, N, N): the table gathered (V1), or 16 sigmoid of the MLP's (V2). V1 without gradients reuses
  // the last one while the table holds the same values.
  Tensor relative_position_bias() const;
  const ShiftedWindowAttentionOptions& options() const { return opt_; }
  // The row maps of forward(x, shift) for a (B, H, W) map that needs no padding, in torchvision's order
  // (pad, then roll): source[r] is the row of x (B H W rows) that window row r (the rolled map's
  // windows in raster order) takes, back[i] the window row that x's row i gets back. Both i64,
  // B H W long; built once per geometry and kept. Undefined for a map that needs padding or with
  // roll_before_pad (timm's order).
  struct RowMap {
    Tensor source, back;
  };
  RowMap row_map(int64_t batch, int64_t h, int64_t w, bool shift = true) const;
  // The attention and projection of the windows of row_map's source order, (B nW, N, C) -> (B nW, N, C):
  // in eval mode, forward(x, shift) is the gather of x by source, this, and the gather of its rows by
  // back (training adds the projection's dropout, which this leaves out).
  Tensor attend_windows(const Tensor& windows, int64_t h, int64_t w, bool shift = true) const;
  // Multiply-accumulates for one (B = 1) padded hp x wp map.
  int64_t macs(int64_t hp, int64_t wp) const;

  std::shared_ptr<Linear> qkv, proj;
  std::shared_ptr<Sequential> cpb_mlp;   // V2 only

 private:
  Tensor attend(const Tensor& windows, int64_t Hp, int64_t Wp, int64_t sh, int64_t sw, Tensor* weights) const;

  ShiftedWindowAttentionOptions opt_;
  Tensor* table_ = nullptr;          // V1: relative_position_bias_table
  Tensor* logit_scale_ = nullptr;    // V2
  Tensor* coords_table_ = nullptr;   // V2: relative_coords_table
  Tensor* index_ = nullptr;          // relative_position_index
  struct BiasCache;
  std::shared_ptr<BiasCache> bias_cache_;   // V1 inference: the table's values and their bias
};

}  // namespace attn::nn

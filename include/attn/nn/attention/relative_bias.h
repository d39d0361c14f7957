// Relative position terms added to attention logits (before the softmax).
//
//   nn::RelativePositionBias2D rpb({.window_h = 7, .window_w = 7, .num_heads = 3});   // Swin
//   Tensor bias = rpb.forward();                       // (3, 49, 49): add to (B, 3, 49, 49) logits
//   nn::RelativePositionBias1D rb({.max_len = 128, .num_heads = 12});
//   Tensor b1 = rb.forward(64);                        // (12, 64, 64), b1[h, i, j] = table[i - j + 127, h]
//   nn::RelativePositionEmbedding1D re({.max_len = 197, .head_dim = 64});   // ViT's ablation
//   Tensor b2 = re.forward(q);                         // q (B, NH, T, 64) -> (B, NH, T, T)
//
// RelativePositionBias2D: Swin Transformer's table, parameter "relative_position_bias_table"
//   ((2Wh-1)(2Ww-1), NH), init trunc_normal std .02, and buffer "relative_position_index" (N, N)
//   i64, N = Wh Ww, computed exactly as Swin: for tokens p = (y1, x1), q = (y2, x2) (row-major in
//   the window), index = (y1 - y2 + Wh - 1) (2Ww - 1) + (x1 - x2 + Ww - 1). forward() returns
//   table[index] permuted to (NH, N, N). The index buffer is non-persistent by default (as timm);
//   persistent_index keeps it in state_dict (as the original Swin checkpoints). class_token: BEiT's
//   layout (beit_relative_position_index), the bias of a sequence whose token 0 is a class token.
// RelativePositionBias1D: the same in 1-d: a learned scalar per offset i - j and head, parameter
//   "relative_position_bias_table" (2L-1, NH), trunc_normal std .02.
// RelativePositionEmbedding1D: ViT's (Dosovitskiy et al. 2021, App. D.4) 1-d relative attention: a
//   learned embedding r_o (head_dim) per offset o = i - j ("relative_embedding" (2L-1, head_dim),
//   shared by the heads, trunc_normal std .02); the extra logits q_i · r_{i-j} are the bias.
#pragma once
#include <cstdint>

#include "attn/core/rng.h"
#include "attn/nn/module.h"

namespace attn::nn {

// Swin's relative_position_index for a (wh, ww) window: (wh ww, wh ww) i64.
Tensor swin_relative_position_index(int64_t wh, int64_t ww);
// BEiT's, with a class token first: (wh ww + 1)² i64; Swin's index shifted by one row and column, row 0
// (class token to patches) L - 3, column 0 (patches to class token) L - 2, [0, 0] L - 1, where
// L = (2wh - 1)(2ww - 1) + 3 is the table's row count.
Tensor beit_relative_position_index(int64_t wh, int64_t ww);
// 1-d: index[i][j] = i - j + max_len - 1, (max_len, max_len) i64.
Tensor relative_position_index_1d(int64_t max_len);

struct RelativePositionBias2DOptions {
  int64_t window_h = 0;
  int64_t window_w = 0;
  int64_t num_heads = 0;
  bool class_token = false;   // BEiT's: a class token before the window's tokens (3 more table rows)
  bool persistent_index = false;
  DType dtype = DType::f32;
};

class RelativePositionBias2D : public Module {
 public:
  explicit RelativePositionBias2D(const RelativePositionBias2DOptions& o, Generator& g = default_generator());
  Tensor forward() const;   // (NH, N, N); with class_token (NH, N + 1, N + 1)
  const RelativePositionBias2DOptions& options() const { return opt_; }

 private:
  RelativePositionBias2DOptions opt_;

 public:
  Tensor& relative_position_bias_table;   // ((2Wh-1)(2Ww-1) (+ 3 with class_token), NH)
  Tensor& relative_position_index;        // (N, N) (with class_token (N + 1, N + 1)) i64
};

struct RelativePositionBias1DOptions {
  int64_t max_len = 0;     // L: sequences up to L tokens
  int64_t num_heads = 0;
  DType dtype = DType::f32;
};

class RelativePositionBias1D : public Module {
 public:
  explicit RelativePositionBias1D(const RelativePositionBias1DOptions& o, Generator& g = default_generator());
  Tensor forward(int64_t T) const;   // T <= L -> (NH, T, T)
  const RelativePositionBias1DOptions& options() const { return opt_; }

 private:
  RelativePositionBias1DOptions opt_;

 public:
  Tensor& relative_position_bias_table;   // (2L-1, NH)
};

struct RelativePositionEmbedding1DOptions {
  int64_t max_len = 0;    // L
  int64_t head_dim = 0;   // HS
  DType dtype = DType::f32;
};

class RelativePositionEmbedding1D : public Module {
 public:
  explicit RelativePositionEmbedding1D(const RelativePositionEmbedding1DOptions& o,
                                       Generator& g = default_generator());
  // q (B, NH, T, HS), T <= L -> (B, NH, T, T): out[b, h, i, j] = q[b, h, i] · r[i - j + L - 1].
  Tensor forward(const Tensor& q) const;
  const RelativePositionEmbedding1DOptions& options() const { return opt_; }

 private:
  RelativePositionEmbedding1DOptions opt_;

 public:
  Tensor& relative_embedding;   // (2L-1, HS)
};

}  // namespace attn::nn

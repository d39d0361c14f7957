// Relative position biases: Swin's 2-d table, a 1-d table, and ViT's 1-d relative embeddings.
#include "attn/nn/attention/relative_bias.h"

#include "attn/nn/init.h"
#include "attn/ops/indexing.h"
#include "attn/ops/matmul.h"

namespace attn::nn {

Tensor swin_relative_position_index(int64_t wh, int64_t ww) {
  ATTN_CHECK(wh > 0 && ww > 0, "swin_relative_position_index: expected a positive window, got (", wh, ", ", ww,
             ")");
  const int64_t n = wh * ww;
  Tensor idx = Tensor::empty({n, n}, DType::i64);
  if (idx.is_shapes_only()) return idx;   // a model built with shapes only (models::parameter_count)
  int64_t* p = idx.data<int64_t>();
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = 0; b < n; ++b) {
      const int64_t dy = a / ww - b / ww + wh - 1, dx = a % ww - b % ww + ww - 1;
      p[a * n + b] = dy * (2 * ww - 1) + dx;
    }
  return idx;
}

Tensor beit_relative_position_index(int64_t wh, int64_t ww) {
  const Tensor inner = swin_relative_position_index(wh, ww);
  const int64_t n = wh * ww, t = n + 1, rows = (2 * wh - 1) * (2 * ww - 1) + 3;
  Tensor idx = Tensor::empty({t, t}, DType::i64);
  if (idx.is_shapes_only()) return idx;
  int64_t* p = idx.data<int64_t>();
  const int64_t* q = inner.data<int64_t>();
  for (int64_t a = 0; a < t; ++a)
    for (int64_t b = 0; b < t; ++b)
      p[a * t + b] = a == 0 && b == 0 ? rows - 1 : a == 0 ? rows - 3 : b == 0 ? rows - 2 : q[(a - 1) * n + (b - 1)];
  return idx;
}

Tensor relative_position_index_1d(int64_t max_len) {
  ATTN_CHECK(max_len > 0, "relative_position_index_1d: expected a positive max_len, got ", max_len);
  Tensor idx = Tensor::empty({max_len, max_len}, DType::i64);
  if (idx.is_shapes_only()) return idx;
  int64_t* p = idx.data<int64_t>();
  for (int64_t i = 0; i < max_len; ++i)
    for (int64_t j = 0; j < max_len; ++j) p[i * max_len + j] = i - j + max_len - 1;
  return idx;
}

namespace {
const RelativePositionBias2DOptions& checked(const RelativePositionBias2DOptions& o) {
  ATTN_CHECK(o.window_h > 0 && o.window_w > 0 && o.num_heads > 0,
             "RelativePositionBias2D: expected positive window_h, window_w and num_heads, got ", o.window_h, ", ",
             o.window_w, " and ", o.num_heads);
  ATTN_CHECK(is_floating(o.dtype), "RelativePositionBias2D: expected a f32 or f64 dtype, got ",
             dtype_name(o.dtype));
  return o;
}
const RelativePositionBias1DOptions& checked(const RelativePositionBias1DOptions& o) {
  ATTN_CHECK(o.max_len > 0 && o.num_heads > 0,
             "RelativePositionBias1D: expected positive max_len and num_heads, got ", o.max_len, " and ",
             o.num_heads);
  ATTN_CHECK(is_floating(o.dtype), "RelativePositionBias1D: expected a f32 or f64 dtype, got ",
             dtype_name(o.dtype));
  return o;
}
const RelativePositionEmbedding1DOptions& checked(const RelativePositionEmbedding1DOptions& o) {
  ATTN_CHECK(o.max_len > 0 && o.head_dim > 0,
             "RelativePositionEmbedding1D: expected positive max_len and head_dim, got ", o.max_len, " and ",
             o.head_dim);
  ATTN_CHECK(is_floating(o.dtype), "RelativePositionEmbedding1D: expected a f32 or f64 dtype, got ",
             dtype_name(o.dtype));
  return o;
}
}  // namespace

RelativePositionBias2D::RelativePositionBias2D(const RelativePositionBias2DOptions& o, Generator& g)
    : opt_(checked(o)),
      relative_position_bias_table(register_parameter(
          "relative_position_bias_table",
          Tensor::zeros({(2 * o.window_h - 1) * (2 * o.window_w - 1) + (o.class_token ? 3 : 0), o.num_heads},
                        o.dtype))),
      relative_position_index(register_buffer("relative_position_index",
                                              o.class_token ? beit_relative_position_index(o.window_h, o.window_w)
                                                            : swin_relative_position_index(o.window_h, o.window_w),
                                              o.persistent_index)) {
  init::trunc_normal_(relative_position_bias_table, g, 0.0, 0.02);
}

Tensor RelativePositionBias2D::forward() const {
  // table[index] (N, N, NH) -> (NH, N, N)
  return embedding(relative_position_bias_table, relative_position_index).permute({2, 0, 1}).contiguous();
}

RelativePositionBias1D::RelativePositionBias1D(const RelativePositionBias1DOptions& o, Generator& g)
    : opt_(checked(o)),
      relative_position_bias_table(register_parameter("relative_position_bias_table",
                                                      Tensor::zeros({2 * o.max_len - 1, o.num_heads}, o.dtype))) {
  init::trunc_normal_(relative_position_bias_table, g, 0.0, 0.02);
}

Tensor RelativePositionBias1D::forward(int64_t T) const {
  ATTN_CHECK(T > 0 && T <= opt_.max_len, "RelativePositionBias1D: expected a length in [1, ", opt_.max_len,
             "], got ", T);
  const Tensor idx = relative_position_index_1d(opt_.max_len).slice(0, 0, T).slice(1, 0, T).contiguous();
  return embedding(relative_position_bias_table, idx).permute({2, 0, 1}).contiguous();
}

RelativePositionEmbedding1D::RelativePositionEmbedding1D(const RelativePositionEmbedding1DOptions& o, Generator& g)
    : opt_(checked(o)),
      relative_embedding(register_parameter("relative_embedding",
                                            Tensor::zeros({2 * o.max_len - 1, o.head_dim}, o.dtype))) {
  init::trunc_normal_(relative_embedding, g, 0.0, 0.02);
}

Tensor RelativePositionEmbedding1D::forward(const Tensor& q) const {
  ATTN_CHECK(q.defined() && q.dim() == 4 && q.size(3) == opt_.head_dim,
             "RelativePositionEmbedding1D: expected q of shape (B, NH, T, ", opt_.head_dim, "), got ",
             q.defined() ? q.shape() : Shape{});
  ATTN_CHECK(q.dtype() == relative_embedding.dtype(), "RelativePositionEmbedding1D: expected q of dtype ",
             dtype_name(relative_embedding.dtype()), ", got ", dtype_name(q.dtype()));
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2);
  ATTN_CHECK(T > 0 && T <= opt_.max_len, "RelativePositionEmbedding1D: expected a length in [1, ", opt_.max_len,
             "], got ", T);
  const Tensor logits = matmul(q, relative_embedding.t());   // (B, NH, T, 2L-1): q_i · r_o for every offset
  const Tensor idx = relative_position_index_1d(opt_.max_len).slice(0, 0, T).slice(1, 0, T).expand({B, H, T, T})
                         .contiguous();
  return gather(logits, 3, idx);
}

}  // namespace attn::nn

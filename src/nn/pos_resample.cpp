// Bicubic resampling (PyTorch's upsample_bicubic2d, align_corners=False, with and without antialias)
// and ViT position-embedding resizing (attn/nn/pos_embed.h). Direct loops: position embeddings are
// small and this runs once per conversion.
#include "attn/nn/pos_embed.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "attn/core/error.h"
#include "attn/ops/combine.h"

namespace attn::nn {

namespace {

// PyTorch computes the scale, source indices, weights and sums in the input's "opmath" type
// (float for f32 / bf16, double for f64); doing the same keeps the results within rounding.
template <class T>
void cubic_weights(T t, T w[4]) {
  const T A = T(-0.75);
  auto near = [A](T x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };        // |x| <= 1
  auto far = [A](T x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };   // 1 < |x| < 2
  w[0] = far(t + T(1));
  w[1] = near(t);
  const T u = T(1) - t;
  w[2] = near(u);
  w[3] = far(u + T(1));
}

template <class T>
struct Taps {
  std::vector<int64_t> idx;   // 4 per output position, clamped to [0, in - 1]
  std::vector<T> w;           // 4 per output position
};

// align_corners=False source index: scale * (dst + 0.5) - 0.5, not clamped at 0 (cubic), with
// scale = in / out as PyTorch computes it when only the output size is given.
template <class T>
Taps<T> taps(int64_t in, int64_t out) {
  Taps<T> t;
  t.idx.resize(size_t(4 * out));
  t.w.resize(size_t(4 * out));
  const T scale = T(in) / T(out);
  for (int64_t o = 0; o < out; ++o) {
    const T src = scale * (T(o) + T(0.5)) - T(0.5);
    const int64_t f = int64_t(std::floor(src));
    cubic_weights<T>(src - T(f), &t.w[size_t(4 * o)]);
    for (int k = 0; k < 4; ++k) t.idx[size_t(4 * o + k)] = std::clamp<int64_t>(f - 1 + k, 0, in - 1);
  }
  return t;
}

// Separable: for each output pixel, 4 rows each interpolated along the width, then along the height
// (the same order of products and sums as PyTorch's generic upsampling kernel).
template <class T>
Tensor bicubic(const Tensor& x, int64_t out_h, int64_t out_w) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const std::vector<T> in = x.to_vector<T>();
  const Taps<T> th = taps<T>(H, out_h), tw = taps<T>(W, out_w);
  std::vector<T> out(size_t(N * C * out_h * out_w));
  for (int64_t p = 0; p < N * C; ++p) {
    const T* src = in.data() + p * H * W;
    T* dst = out.data() + p * out_h * out_w;
    for (int64_t oy = 0; oy < out_h; ++oy)
      for (int64_t ox = 0; ox < out_w; ++ox) {
        const int64_t* xi = &tw.idx[size_t(4 * ox)];
        const T* xw = &tw.w[size_t(4 * ox)];
        T acc = 0;
        for (int i = 0; i < 4; ++i) {
          const T* row = src + th.idx[size_t(4 * oy + i)] * W;
          T r = row[xi[0]] * xw[0];
          for (int j = 1; j < 4; ++j) r += row[xi[j]] * xw[j];
          const T term = r * th.w[size_t(4 * oy + i)];
          acc = i == 0 ? term : acc + term;
        }
        dst[oy * out_w + ox] = acc;
      }
  }
  return Tensor::from_vector(out, {N, C, out_h, out_w});
}


// antialias=True (PyTorch's _upsample_bicubic2d_aa, the PIL-style separable filter): Keys' cubic with
// a = -0.5, stretched by the scale when downsampling (support 2 * in/out taps each side), weights
// renormalised over the taps inside the input instead of replicating the border. Per output position:
// the first tap and the taps' weights.
template <class T>
T aa_cubic(T x) {
  const T a = T(-0.5);
  if (x < 0) x = -x;
  if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
  return 0;
}

template <class T>
struct AaTaps {
  std::vector<int64_t> first, count;   // per output position
  std::vector<T> w;                     // `width` per output position (zero-padded)
  int64_t width = 0;
};

template <class T>
AaTaps<T> aa_taps(int64_t in, int64_t out) {
  AaTaps<T> t;
  const T scale = T(in) / T(out);
  const T support = scale >= T(1) ? T(2) * scale : T(2);
  const T invscale = scale >= T(1) ? T(1) / scale : T(1);
  t.width = int64_t(std::ceil(support)) * 2 + 1;
  t.first.resize(size_t(out));
  t.count.resize(size_t(out));
  t.w.assign(size_t(out * t.width), T(0));
  for (int64_t o = 0; o < out; ++o) {
    const T center = scale * (T(o) + T(0.5));
    const int64_t lo = std::max<int64_t>(int64_t(center - support + T(0.5)), 0);
    const int64_t n = std::min<int64_t>(int64_t(center + support + T(0.5)), in) - lo;
    T* w = &t.w[size_t(o * t.width)];
    T total = 0;
    for (int64_t j = 0; j < n; ++j) {
      w[j] = aa_cubic<T>((T(j + lo) - center + T(0.5)) * invscale);
      total += w[j];
    }
    if (total != T(0))
      for (int64_t j = 0; j < n; ++j) w[j] /= total;
    t.first[size_t(o)] = lo;
    t.count[size_t(o)] = n;
  }
  return t;
}

// One dimension of a (planes, rows, cols) array: along the columns (stride 1) or the rows (stride
// cols), in the order PyTorch takes them (columns first, then rows; an unchanged size is skipped).
template <class T>
std::vector<T> aa_pass(const std::vector<T>& in, int64_t planes, int64_t rows, int64_t cols, int64_t out_len,
                       bool along_cols) {
  const int64_t len = along_cols ? cols : rows;
  const AaTaps<T> t = aa_taps<T>(len, out_len);
  const int64_t orows = along_cols ? rows : out_len, ocols = along_cols ? out_len : cols;
  const int64_t step = along_cols ? 1 : cols;
  std::vector<T> out(size_t(planes * orows * ocols));
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t r = 0; r < orows; ++r)
      for (int64_t c = 0; c < ocols; ++c) {
        const int64_t o = along_cols ? c : r;
        const T* w = &t.w[size_t(o * t.width)];
        const T* src = in.data() + p * rows * cols + (along_cols ? r * cols : c) + t.first[size_t(o)] * step;
        T acc = src[0] * w[0];
        for (int64_t j = 1; j < t.count[size_t(o)]; ++j) acc += src[j * step] * w[j];
        out[size_t((p * orows + r) * ocols + c)] = acc;
      }
  return out;
}

template <class T>
Tensor bicubic_aa(const Tensor& x, int64_t out_h, int64_t out_w) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  std::vector<T> v = x.to_vector<T>();
  if (out_w != W) v = aa_pass<T>(v, N * C, H, W, out_w, true);
  if (out_h != H) v = aa_pass<T>(v, N * C, H, out_w, out_h, false);
  return Tensor::from_vector(v, {N, C, out_h, out_w});
}

}  // namespace

Tensor interpolate_bicubic(const Tensor& x, int64_t out_h, int64_t out_w, bool antialias) {
  ATTN_CHECK(x.defined() && x.dim() == 4, "interpolate_bicubic: expected a 4-d (N, C, H, W) tensor, got ",
             x.defined() ? x.shape() : Shape{});
  ATTN_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64 || x.dtype() == DType::bf16,
             "interpolate_bicubic: expected a floating tensor, got ", dtype_name(x.dtype()));
  ATTN_CHECK(out_h > 0 && out_w > 0, "interpolate_bicubic: expected a positive output size, got [", out_h, ", ",
             out_w, "]");
  ATTN_CHECK(x.size(2) > 0 && x.size(3) > 0, "interpolate_bicubic: expected a non-empty input, got ", x.shape());
  if (antialias) {
    if (x.dtype() == DType::f64) return bicubic_aa<double>(x, out_h, out_w);
    return bicubic_aa<float>(x, out_h, out_w).to(x.dtype());
  }
  if (x.dtype() == DType::f64) return bicubic<double>(x, out_h, out_w);
  return bicubic<float>(x, out_h, out_w).to(x.dtype());
}

Tensor resample_pos_embed(const Tensor& pos, std::pair<int64_t, int64_t> old_grid,
                          std::pair<int64_t, int64_t> new_grid, int64_t num_prefix_tokens, bool antialias) {
  const auto [oh, ow] = old_grid;
  const auto [nh, nw] = new_grid;
  ATTN_CHECK(pos.defined() && pos.dim() == 3 && pos.size(0) == 1,
             "resample_pos_embed: expected a position embedding of shape (1, tokens, dim), got ",
             pos.defined() ? pos.shape() : Shape{});
  ATTN_CHECK(oh > 0 && ow > 0 && nh > 0 && nw > 0 && num_prefix_tokens >= 0,
             "resample_pos_embed: expected positive grids, got [", oh, ", ", ow, "] -> [", nh, ", ", nw, "]");
  ATTN_CHECK(pos.size(1) == num_prefix_tokens + oh * ow, "resample_pos_embed: expected ", num_prefix_tokens,
             " prefix tokens + a ", oh, "x", ow, " grid = ", num_prefix_tokens + oh * ow, " tokens, got ", pos.shape());
  if (oh == nh && ow == nw) return pos.clone();
  const int64_t D = pos.size(2);
  Tensor prefix = pos.slice(1, 0, num_prefix_tokens);
  // (1, oh*ow, D) -> (1, D, oh, ow) -> resize -> (1, nh*nw, D)
  Tensor grid = pos.slice(1, num_prefix_tokens, pos.size(1)).reshape({1, oh, ow, D}).permute({0, 3, 1, 2});
  Tensor resized = interpolate_bicubic(grid.contiguous(), nh, nw, antialias).permute({0, 2, 3, 1}).reshape({1, nh * nw, D});
  if (num_prefix_tokens == 0) return resized.contiguous();
  return concat({prefix.contiguous(), resized.contiguous()}, 1);
}

}  // namespace attn::nn

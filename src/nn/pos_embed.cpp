// Absolute positional encodings: sinusoidal, 2-d sin-cos (MAE), learned 1-d and 2-d.
#include "attn/nn/pos_embed.h"

#include <cmath>
#include <vector>

#include "attn/nn/init.h"
#include "attn/ops/combine.h"
#include "attn/ops/elementwise.h"

namespace attn::nn {

namespace {
// A (rows, cols) tensor of `dtype` from row-major doubles.
Tensor from_doubles(const std::vector<double>& v, int64_t rows, int64_t cols, DType dtype) {
  return Tensor::from_vector<double>(v, {rows, cols}).to(dtype);
}
}  // namespace

Tensor sinusoidal_pos_embed(int64_t num_positions, int64_t dim, DType dtype, double base) {
  ATTN_CHECK(num_positions > 0 && dim > 0, "sinusoidal_pos_embed: expected positive num_positions and dim, got ",
             num_positions, " and ", dim);
  ATTN_CHECK(is_floating(dtype), "sinusoidal_pos_embed: expected a f32 or f64 dtype, got ", dtype_name(dtype));
  std::vector<double> v(size_t(num_positions * dim));
  for (int64_t pos = 0; pos < num_positions; ++pos)
    for (int64_t k = 0; k < dim; ++k) {
      const double angle = double(pos) / std::pow(base, double(k / 2 * 2) / double(dim));
      v[size_t(pos * dim + k)] = (k % 2 == 0) ? std::sin(angle) : std::cos(angle);
    }
  return from_doubles(v, num_positions, dim, dtype);
}

Tensor sincos_2d_pos_embed(int64_t dim, int64_t grid_h, int64_t grid_w, bool cls_token, DType dtype) {
  ATTN_CHECK(dim > 0 && dim % 4 == 0, "sincos_2d_pos_embed: expected a dim divisible by 4, got ", dim);
  ATTN_CHECK(grid_h > 0 && grid_w > 0, "sincos_2d_pos_embed: expected a positive grid, got (", grid_h, ", ",
             grid_w, ")");
  ATTN_CHECK(is_floating(dtype), "sincos_2d_pos_embed: expected a f32 or f64 dtype, got ", dtype_name(dtype));
  const int64_t quarter = dim / 4, rows = grid_h * grid_w + (cls_token ? 1 : 0);
  std::vector<double> v(size_t(rows * dim), 0.0);
  std::vector<double> omega(static_cast<size_t>(quarter));
  for (int64_t k = 0; k < quarter; ++k) omega[size_t(k)] = 1.0 / std::pow(10000.0, double(k) / double(quarter));
  for (int64_t i = 0; i < grid_h; ++i)
    for (int64_t j = 0; j < grid_w; ++j) {
      double* row = v.data() + (i * grid_w + j + (cls_token ? 1 : 0)) * dim;
      // First half: the column index j; second half: the row index i.
      const double coord[2] = {double(j), double(i)};
      for (int half = 0; half < 2; ++half)
        for (int64_t k = 0; k < quarter; ++k) {
          const double a = coord[half] * omega[size_t(k)];
          row[half * 2 * quarter + k] = std::sin(a);
          row[half * 2 * quarter + quarter + k] = std::cos(a);
        }
    }
  return from_doubles(v, rows, dim, dtype);
}

namespace {
PosEmbedOptions checked(PosEmbedOptions o) {
  ATTN_CHECK(o.dim > 0, "PosEmbed: expected a positive dim, got ", o.dim);
  ATTN_CHECK(is_floating(o.dtype), "PosEmbed: expected a f32 or f64 dtype, got ", dtype_name(o.dtype));
  switch (o.kind) {
    case PosEmbedKind::none: break;
    case PosEmbedKind::sinusoidal:
    case PosEmbedKind::learned:
      ATTN_CHECK(o.num_positions > 0, "PosEmbed: expected a positive num_positions, got ", o.num_positions);
      break;
    case PosEmbedKind::learned_2d:
    case PosEmbedKind::sincos_2d:
      ATTN_CHECK(o.grid_h > 0 && o.grid_w > 0, "PosEmbed: expected a positive grid, got (", o.grid_h, ", ",
                 o.grid_w, ")");
      if (o.kind == PosEmbedKind::learned_2d)
        ATTN_CHECK(o.dim % 2 == 0, "PosEmbed: learned_2d needs an even dim, got ", o.dim);
      else
        ATTN_CHECK(o.dim % 4 == 0, "PosEmbed: sincos_2d needs a dim divisible by 4, got ", o.dim);
      o.num_positions = o.grid_h * o.grid_w + (o.cls_token ? 1 : 0);
      break;
  }
  return o;
}
}  // namespace

// "pos_embed" is a parameter (learned), a buffer (fixed kinds) or absent.
PosEmbed::PosEmbed(const PosEmbedOptions& o, Generator& g)
    : opt_(checked(o)),
      pos_embed(opt_.kind == PosEmbedKind::learned
                    ? register_parameter("pos_embed", Tensor::empty({1, opt_.num_positions, opt_.dim}, opt_.dtype))
                : opt_.kind == PosEmbedKind::sinusoidal
                    ? register_buffer("pos_embed",
                                      sinusoidal_pos_embed(opt_.num_positions, opt_.dim, opt_.dtype).unsqueeze(0))
                : opt_.kind == PosEmbedKind::sincos_2d
                    ? register_buffer("pos_embed", sincos_2d_pos_embed(opt_.dim, opt_.grid_h, opt_.grid_w,
                                                                       opt_.cls_token, opt_.dtype)
                                                       .unsqueeze(0))
                    : register_parameter("pos_embed", Tensor())),
      cls_pos_embed(register_parameter("cls_pos_embed", opt_.kind == PosEmbedKind::learned_2d && opt_.cls_token
                                                            ? Tensor::empty({1, 1, opt_.dim}, opt_.dtype)
                                                            : Tensor())),
      col_embed(register_parameter("col_embed", opt_.kind == PosEmbedKind::learned_2d
                                                    ? Tensor::empty({opt_.grid_w, opt_.dim / 2}, opt_.dtype)
                                                    : Tensor())),
      row_embed(register_parameter("row_embed", opt_.kind == PosEmbedKind::learned_2d
                                                    ? Tensor::empty({opt_.grid_h, opt_.dim / 2}, opt_.dtype)
                                                    : Tensor())) {
  // Every learned table is written here (not zero-filled first: under SkipRandomInit(Fill::none) a
  // model built for a strict load touches none of its pages).
  for (Tensor* t : {&pos_embed, &cls_pos_embed, &col_embed, &row_embed})
    if (t->defined() && t->requires_grad()) init::trunc_normal_(*t, g, 0.0, 0.02);
}

int64_t PosEmbed::num_positions() const { return opt_.kind == PosEmbedKind::none ? 0 : opt_.num_positions; }

Tensor PosEmbed::embedding() const {
  if (opt_.kind != PosEmbedKind::learned_2d) return pos_embed;
  const int64_t gh = opt_.grid_h, gw = opt_.grid_w, half = opt_.dim / 2;
  const Tensor cols = col_embed.unsqueeze(0).expand({gh, gw, half}).contiguous();   // [i, j] = col_embed[j]
  const Tensor rows = row_embed.unsqueeze(1).expand({gh, gw, half}).contiguous();   // [i, j] = row_embed[i]
  Tensor e = concat({cols, rows}, 2).reshape({1, gh * gw, opt_.dim});
  if (cls_pos_embed.defined()) e = concat({cls_pos_embed, e}, 1);
  return e;
}

Tensor PosEmbed::forward(const Tensor& x) const {
  ATTN_CHECK(x.defined() && x.dim() == 3 && x.size(2) == opt_.dim, "PosEmbed: expected input of shape (B, T, ",
             opt_.dim, "), got ", x.defined() ? x.shape() : Shape{});
  if (opt_.kind == PosEmbedKind::none) return x;
  ATTN_CHECK(x.dtype() == opt_.dtype, "PosEmbed: expected input of dtype ", dtype_name(opt_.dtype), ", got ",
             dtype_name(x.dtype()));
  const int64_t T = x.size(1), N = opt_.num_positions;
  const bool grid = opt_.kind == PosEmbedKind::learned_2d || opt_.kind == PosEmbedKind::sincos_2d;
  if (grid)
    ATTN_CHECK(T == N, "PosEmbed: expected input of shape (B, ", N, ", ", opt_.dim, "), got ", x.shape());
  else
    ATTN_CHECK(T <= N, "PosEmbed: expected at most ", N, " positions, got input of shape ", x.shape());
  const Tensor e = embedding();
  return x + (T == N ? e : e.slice(1, 0, T));
}

}  // namespace attn::nn

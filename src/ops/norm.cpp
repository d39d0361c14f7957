// Layer norm, and the fused residual add + layer norm (declared in attn/ops/fused.h), with their
// backward passes. f32 runs the vectorised row kernels (backend/cpu/vec_dispatch.h): one pass
// forward saving mean and rstd per row, one pass backward giving dx and the per-block partial
// sums of dweight and dbias. f64 runs the reference kernels (backend/reference/norm_reference.h).
#include "attn/core/profile.h"
#include "attn/ops/norm.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "attn/autograd/grad_mode.h"
#include "attn/autograd/node.h"
#include "attn/ops/fused.h"
#include "../backend/cpu/convert_kernels.h"
#include "../backend/cpu/vec_dispatch.h"
#include "../backend/reference/norm_reference.h"

namespace attn {

namespace {

int64_t row_grain(int64_t C) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1)); }

void check_input(const char* op, const char* what, const Tensor& x) {
  ATTN_CHECK(x.defined(), op, ": expected ", what, ", got an undefined tensor");
  ATTN_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, op, ": expected a f32 or f64 tensor, got ",
             dtype_name(x.dtype()));
  ATTN_CHECK(x.dim() >= 1, op, ": expected ", what, " with at least 1 dim, got shape ", x.shape());
  ATTN_CHECK(x.size(-1) > 0, op, ": expected a non-empty last dim, got shape ", x.shape());
}

void check_affine(const char* op, const char* what, const Tensor& t, int64_t C, DType dt) {
  if (!t.defined()) return;
  ATTN_CHECK(t.dim() == 1 && t.size(0) == C, op, ": expected ", what, " of shape [", C, "], got ", t.shape());
  ATTN_CHECK(t.dtype() == dt, op, ": expected ", what, " of dtype ", dtype_name(dt), ", got ",
             dtype_name(t.dtype()));
}

// y = LN(x + r) (r undefined: LN(x)); s = x + r when r is defined. x, r contiguous.
// y_bf16: y rounded to bf16 as it is written (f32 x; each chunk's rows normalised into a small f32
// scratch first).
void ln_forward(const Tensor& x, const Tensor& r, const Tensor& w_in, const Tensor& b_in, double eps, Tensor& s,
                Tensor& y, Tensor& mean, Tensor& rstd, bool y_bf16 = false) {
  const int64_t C = x.size(-1), rows = x.numel() / C;
  y = Tensor::empty(x.shape(), y_bf16 ? DType::bf16 : x.dtype());
  if (r.defined()) s = Tensor::empty(x.shape(), x.dtype());
  mean = Tensor::empty({rows}, x.dtype());
  rstd = Tensor::empty({rows}, x.dtype());
  if (rows == 0) return;
  if (x.dtype() == DType::f32) {
    // The kernels always take weight and bias: ones / zeros stand in for missing ones.
    const Tensor w = w_in.defined() ? w_in.contiguous() : Tensor::ones({C});
    const Tensor b = b_in.defined() ? b_in.contiguous() : Tensor::zeros({C});
    const float* px = x.data<float>();
    const float* pr = r.defined() ? r.data<float>() : nullptr;
    float* ps = r.defined() ? s.data<float>() : nullptr;
    float* pm = mean.data<float>();
    float* prs = rstd.data<float>();
    const float* pw = w.data<float>();
    const float* pb = b.data<float>();
    const auto& k = kernels::row_kernels();
    if (y_bf16) {
      auto* yb = static_cast<uint16_t*>(y.raw_data());
      const auto& ck = kernels::convert_kernels();
      constexpr int64_t kRows = 16;
      parallel_for(0, rows, row_grain(C), [&](int64_t r0, int64_t r1) {
        std::vector<float> tmp(size_t(std::min(kRows, r1 - r0) * C));
        for (int64_t a = r0; a < r1; a += kRows) {
          const int64_t n = std::min(kRows, r1 - a), o = a * C;
          k.layer_norm_fwd(px + o, pr ? pr + o : nullptr, pw, pb, ps ? ps + o : nullptr, tmp.data(), pm + a,
                           prs + a, n, C, float(eps));
          ck.f32_to_bf16(tmp.data(), yb + o, n * C);
        }
      });
      return;
    }
    float* py = y.data<float>();
    parallel_for(0, rows, row_grain(C), [&](int64_t r0, int64_t r1) {
      const int64_t o = r0 * C;
      k.layer_norm_fwd(px + o, pr ? pr + o : nullptr, pw, pb, ps ? ps + o : nullptr, py + o, pm + r0, prs + r0,
                       r1 - r0, C, float(eps));
    });
    return;
  }
  const Tensor w = w_in.defined() ? w_in.contiguous() : Tensor();
  const Tensor b = b_in.defined() ? b_in.contiguous() : Tensor();
  ATTN_DISPATCH_FLOAT(x.dtype(), "layer_norm", [&] {
    reference::layer_norm_forward<T>(x.data<T>(), r.defined() ? r.data<T>() : nullptr,
                                     w.defined() ? w.data<T>() : nullptr, b.defined() ? b.data<T>() : nullptr,
                                     r.defined() ? s.data<T>() : nullptr, y.data<T>(), mean.data<T>(),
                                     rstd.data<T>(), rows, C, eps);
  });
}

// f32 backward over rows of length C: dx, and when dwb (2 C floats) is non-null dweight (dwb[0, C))
// and dbias (dwb[C, 2 C)). The rows are cut into fixed blocks of ln_bwd_block_rows(C) rows (a
// function of C alone, not of the thread count); the row kernel sums each block's dw / db in f32
// into its slice of `part`, and the blocks' sums are then added in double in block order. So the
// result is bit-identical at any thread count. Measured at (128 x 50 x 192), 2 threads: the final
// sum used to run column by column down the blocks, a chain of dependent double adds (serial, as
// 2 C < the grain) that was ~0.08 of 0.29 ms; it now runs along the rows of `part`
// (independent columns, vectorised) with the columns split across threads, and blocks of ~24K
// elements (128 rows at C = 192, was 32) leave a quarter as many partial sums to add.
int64_t ln_bwd_block_rows(int64_t C) { return std::clamp<int64_t>(24576 / C, 32, 256); }

void ln_backward_f32(const float* dy, const float* x, const float* mean, const float* rstd, const float* w,
                     float* dx, float* dwb, int64_t rows, int64_t C) {
  const auto& k = kernels::row_kernels();
  if (!dwb) {
    parallel_for(0, rows, row_grain(C), [&](int64_t r0, int64_t r1) {
      k.layer_norm_bwd(dy + r0 * C, x + r0 * C, mean + r0, rstd + r0, w, dx + r0 * C, nullptr, nullptr, r1 - r0, C);
    });
    return;
  }
  const int64_t ncols = 2 * C, block = ln_bwd_block_rows(C), nblocks = (rows + block - 1) / block;
  // part: (nblocks, 2 C), each block's slice zeroed by the thread that fills it.
  std::unique_ptr<float[]> part(new float[size_t(nblocks * ncols)]);
  float* pp = part.get();
  parallel_for(0, nblocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * block, r1 = std::min(rows, r0 + block);
      float* acc = pp + b * ncols;
      std::fill(acc, acc + ncols, 0.f);
      k.layer_norm_bwd(dy + r0 * C, x + r0 * C, mean + r0, rstd + r0, w, dx + r0 * C, acc, acc + C, r1 - r0, C);
    }
  });
  // Columns split across threads in chunks of kCols; each chunk sums down the blocks.
  constexpr int64_t kCols = 128;
  parallel_for(0, (ncols + kCols - 1) / kCols, 1, [&](int64_t j0, int64_t j1) {
    double s[kCols];
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t c0 = j * kCols, n = std::min(kCols, ncols - c0);
      for (int64_t i = 0; i < n; ++i) s[i] = 0.0;
      for (int64_t b = 0; b < nblocks; ++b) {
        const float* src = pp + b * ncols + c0;
        for (int64_t i = 0; i < n; ++i) s[i] += double(src[i]);
      }
      for (int64_t i = 0; i < n; ++i) dwb[c0 + i] = float(s[i]);
    }
  });
}

struct LayerNormNode : autograd::Node {
  Tensor x, weight, mean, rstd;   // x: the normalised input (contiguous); weight may be undefined
  bool has_bias = false;
  const char* name() const override { return "layer_norm"; }
  std::vector<Tensor> backward(const Tensor& dout_in) override {
    ATTN_CHECK(dout_in.dtype() == x.dtype(), "layer_norm: expected a gradient of dtype ", dtype_name(x.dtype()),
               ", got ", dtype_name(dout_in.dtype()));
    const Tensor dout = dout_in.contiguous();
    const int64_t C = x.size(-1), rows = x.numel() / C;
    const bool want_w = weight.defined() && (next[1].fn || next[1].leaf);
    const bool want_b = has_bias && (next[2].fn || next[2].leaf);
    Tensor dx = Tensor::empty(x.shape(), x.dtype());
    Tensor dwb;   // (2, C): dweight, dbias
    if (want_w || want_b) dwb = rows > 0 && x.dtype() == DType::f32 ? Tensor::empty({2, C}, x.dtype())
                                                                     : Tensor::zeros({2, C}, x.dtype());
    if (rows > 0 && x.dtype() == DType::f32) {
      const Tensor w = weight.defined() ? weight.contiguous() : Tensor::ones({C});
      ln_backward_f32(dout.data<float>(), x.data<float>(), mean.data<float>(), rstd.data<float>(), w.data<float>(),
                      dx.data<float>(), dwb.defined() ? dwb.data<float>() : nullptr, rows, C);
    } else if (rows > 0) {
      const Tensor w = weight.defined() ? weight.contiguous() : Tensor();
      ATTN_DISPATCH_FLOAT(x.dtype(), "layer_norm", [&] {
        T* pwb = dwb.defined() ? dwb.data<T>() : nullptr;
        reference::layer_norm_backward<T>(dout.data<T>(), x.data<T>(), mean.data<T>(), rstd.data<T>(),
                                          w.defined() ? w.data<T>() : nullptr, dx.data<T>(), pwb,
                                          pwb ? pwb + C : nullptr, rows, C);
      });
    }
    Tensor dw = want_w ? dwb.select(0, 0).contiguous() : Tensor();
    Tensor db = want_b ? dwb.select(0, 1).contiguous() : Tensor();
    return {dx, dw, db};
  }
  void release() override { x = Tensor(); weight = Tensor(); mean = Tensor(); rstd = Tensor(); }
};

// The residual add of add_layer_norm: s = x + residual, same shapes.
struct ResidualAddNode : autograd::Node {
  const char* name() const override { return "add_layer_norm"; }
  std::vector<Tensor> backward(const Tensor& dout) override { return {dout, dout}; }
};

void attach_layer_norm(Tensor& y, const Tensor& input, const Tensor& saved_x, const Tensor& weight,
                       const Tensor& bias, const Tensor& mean, const Tensor& rstd) {
  if (!autograd::needs_grad({input, weight, bias})) return;
  auto n = std::make_shared<LayerNormNode>();
  n->x = saved_x.detach();
  n->weight = weight.defined() ? weight.detach() : Tensor();
  n->has_bias = bias.defined();
  n->mean = mean;
  n->rstd = rstd;
  autograd::attach(y, n, {input, weight, bias});
}

}  // namespace

namespace {
// A bf16 result: of an f32 input, for inference, or in training under bf16 autocast (for a Linear that
// rounds its input to bf16 anyway: the gradient flows through as through the f32 result).
bool bf16_result(const char* op, const Tensor& x, const std::vector<Tensor>& ins, DType result) {
  ATTN_CHECK(result == DType::f32 || result == DType::bf16, op, ": expected an f32 or bf16 result, got ",
             dtype_name(result));
  if (result == DType::f32) return false;
  ATTN_CHECK(x.dtype() == DType::f32, op, ": a bf16 result is of an f32 input, got ", dtype_name(x.dtype()));
  ATTN_CHECK(autocast_bf16() || !autograd::needs_grad(ins), op, ": a bf16 result is for inference or bf16 "
             "autocast, and no gradient flows through it otherwise; run under NoGradGuard or AutocastBf16Guard");
  return true;
}
}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, DType result) {
  ATTN_PROFILE("layer_norm");
  check_input("layer_norm", "an input", x);
  const int64_t C = x.size(-1);
  check_affine("layer_norm", "weight", weight, C, x.dtype());
  check_affine("layer_norm", "bias", bias, C, x.dtype());
  const bool y_bf16 = bf16_result("layer_norm", x, {x, weight, bias}, result);
  const Tensor xc = x.detach().contiguous();
  Tensor s, y, mean, rstd;
  ln_forward(xc, Tensor(), weight, bias, eps, s, y, mean, rstd, y_bf16);
  attach_layer_norm(y, x, xc, weight, bias, mean, rstd);
  return y;
}

std::pair<Tensor, Tensor> add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight,
                                         const Tensor& bias, double eps, DType result) {
  ATTN_PROFILE("add_layer_norm");
  check_input("add_layer_norm", "an input", x);
  ATTN_CHECK(residual.defined(), "add_layer_norm: expected a residual, got an undefined tensor");
  ATTN_CHECK(residual.shape() == x.shape(), "add_layer_norm: expected residual of shape ", x.shape(), ", got ",
             residual.shape());
  ATTN_CHECK(residual.dtype() == x.dtype(), "add_layer_norm: expected residual of dtype ", dtype_name(x.dtype()),
             ", got ", dtype_name(residual.dtype()));
  const int64_t C = x.size(-1);
  check_affine("add_layer_norm", "weight", weight, C, x.dtype());
  check_affine("add_layer_norm", "bias", bias, C, x.dtype());
  const bool y_bf16 = bf16_result("add_layer_norm", x, {x, residual, weight, bias}, result);
  Tensor s, y, mean, rstd;
  ln_forward(x.detach().contiguous(), residual.detach().contiguous(), weight, bias, eps, s, y, mean, rstd, y_bf16);
  if (autograd::needs_grad({x, residual})) autograd::attach(s, std::make_shared<ResidualAddNode>(), {x, residual});
  attach_layer_norm(y, s, s, weight, bias, mean, rstd);
  return {s, y};
}

}  // namespace attn

namespace attn {

namespace {

// The row-map forms' shared checks: an f32 input of rows of C, an f32 other operand of width C, an i64
// 1-D row map with every index in [0, limit); no gradient wanted of any of them.
void check_row_form(const char* op, const Tensor& x, const Tensor& other, const char* other_name,
                    const Tensor& rows, int64_t limit, const Tensor& weight, const Tensor& bias) {
  check_input(op, "an input", x);
  ATTN_CHECK(x.dtype() == DType::f32, op, ": expected an f32 input, got ", dtype_name(x.dtype()));
  const int64_t C = x.size(-1);
  if (other.defined()) {
    ATTN_CHECK(other.dtype() == DType::f32 && other.dim() >= 1 && other.size(-1) == C, op, ": expected ",
               other_name, " f32 with a last dim of ", C, ", got ", dtype_name(other.dtype()), " of shape ",
               other.shape());
  }
  check_affine(op, "weight", weight, C, x.dtype());
  check_affine(op, "bias", bias, C, x.dtype());
  ATTN_CHECK(rows.defined(), op, ": expected rows, a 1-D i64 tensor of row indices, got an undefined tensor");
  ATTN_CHECK(rows.dtype() == DType::i64 && rows.dim() == 1, op,
             ": expected rows, a 1-D i64 tensor of row indices, got ", dtype_name(rows.dtype()), " of shape ",
             rows.shape());
  ATTN_CHECK(!autograd::needs_grad({x, other, weight, bias}), op, ": runs for inference, and no gradient flows "
             "through it; run under NoGradGuard");
  const Tensor rc = rows.contiguous();
  const int64_t* p = rc.data<int64_t>();
  for (int64_t i = 0; i < rows.size(0); ++i)
    ATTN_CHECK(p[i] >= 0 && p[i] < limit, op, ": expected row indices in [0, ", limit, "), got ", p[i],
               " at position ", i);
}

// For rows [r0, r1) of the output: kernel(i, x_row, r_row, s_row, y_row) fills y_row (f32: y's own
// row; bf16: a scratch row, rounded into y after), given the f32 rows to normalise.
template <class RowArgs>
void ln_rows_run(int64_t n_out, int64_t C, const Tensor& w_in, const Tensor& b_in, double eps, Tensor& y,
                 RowArgs args) {
  const Tensor w = w_in.defined() ? w_in.contiguous() : Tensor::ones({C});
  const Tensor b = b_in.defined() ? b_in.contiguous() : Tensor::zeros({C});
  const float* pw = w.data<float>();
  const float* pb = b.data<float>();
  const bool bf16 = y.dtype() == DType::bf16;
  const auto& k = kernels::row_kernels();
  const auto& ck = kernels::convert_kernels();
  parallel_for(0, n_out, row_grain(C), [&](int64_t r0, int64_t r1) {
    std::vector<float> tmp(bf16 ? size_t(C) : 0);
    float mean = 0, rstd = 0;
    for (int64_t i = r0; i < r1; ++i) {
      const auto [px, pr, ps] = args(i);
      float* py = bf16 ? tmp.data() : y.data<float>() + i * C;
      k.layer_norm_fwd(px, pr, pw, pb, ps, py, &mean, &rstd, 1, C, float(eps));
      if (bf16) ck.f32_to_bf16(py, static_cast<uint16_t*>(y.raw_data()) + i * C, C);
    }
  });
}

struct RowPtrs {
  const float* x;
  const float* r;
  float* s;
};

}  // namespace

std::pair<Tensor, Tensor> layer_norm_rows(const Tensor& x, const Tensor& pending, const Tensor& rows,
                                          const Tensor& weight, const Tensor& bias, double eps, DType result) {
  ATTN_PROFILE("layer_norm_rows");
  check_input("layer_norm_rows", "an input", x);
  const int64_t C = x.size(-1), n = x.numel() / C;
  check_row_form("layer_norm_rows", x, pending, "pending", rows, n, weight, bias);
  ATTN_CHECK(result == DType::f32 || result == DType::bf16, "layer_norm_rows: expected an f32 or bf16 result, got ",
             dtype_name(result));
  const int64_t m = rows.size(0);
  const Tensor rc = rows.contiguous();
  const int64_t* idx = rc.data<int64_t>();
  if (pending.defined()) {
    ATTN_CHECK(pending.shape() == x.shape(), "layer_norm_rows: expected pending of shape ", x.shape(), ", got ",
               pending.shape());
    ATTN_CHECK(m == n, "layer_norm_rows: with pending, rows must be a permutation of the ", n,
               " rows of x, got ", m, " indices");
    std::vector<char> seen(size_t(n), 0);
    for (int64_t i = 0; i < m; ++i) {
      ATTN_CHECK(!seen[size_t(idx[i])], "layer_norm_rows: with pending, rows must be a permutation of x's rows; row ",
                 idx[i], " appears twice");
      seen[size_t(idx[i])] = 1;
    }
  }
  const Tensor xc = x.contiguous(), pc = pending.defined() ? pending.contiguous() : Tensor();
  Tensor s = pending.defined() ? Tensor::empty(x.shape()) : xc;
  Tensor y = Tensor::empty({m, C}, result);
  const float* px = xc.data<float>();
  const float* pp = pc.defined() ? pc.data<float>() : nullptr;
  float* ps = pc.defined() ? s.data<float>() : nullptr;
  ln_rows_run(m, C, weight, bias, eps, y, [&](int64_t i) {
    const int64_t o = idx[i] * C;
    return RowPtrs{px + o, pp ? pp + o : nullptr, ps ? ps + o : nullptr};
  });
  return {s, y};
}

std::pair<Tensor, Tensor> add_layer_norm_rows(const Tensor& x, const Tensor& residual, const Tensor& rows,
                                              const Tensor& weight, const Tensor& bias, double eps, DType result) {
  ATTN_PROFILE("add_layer_norm_rows");
  check_input("add_layer_norm_rows", "an input", x);
  ATTN_CHECK(residual.defined(), "add_layer_norm_rows: expected a residual, got an undefined tensor");
  const int64_t C = x.size(-1), n = x.numel() / C;
  const int64_t m = residual.dim() >= 1 && residual.size(-1) == C ? residual.numel() / C : 0;
  check_row_form("add_layer_norm_rows", x, residual, "residual", rows, m, weight, bias);
  ATTN_CHECK(rows.size(0) == n, "add_layer_norm_rows: expected one row index per row of x (", n, "), got ",
             rows.size(0));
  ATTN_CHECK(result == DType::f32 || result == DType::bf16,
             "add_layer_norm_rows: expected an f32 or bf16 result, got ", dtype_name(result));
  const Tensor xc = x.contiguous(), rc_res = residual.contiguous(), rc = rows.contiguous();
  const int64_t* idx = rc.data<int64_t>();
  Tensor s = Tensor::empty(x.shape()), y = Tensor::empty(x.shape(), result);
  const float* px = xc.data<float>();
  const float* pr = rc_res.data<float>();
  float* ps = s.data<float>();
  ln_rows_run(n, C, weight, bias, eps, y, [&](int64_t i) {
    return RowPtrs{px + i * C, pr + idx[i] * C, ps + i * C};
  });
  return {s, y};
}

}  // namespace attn

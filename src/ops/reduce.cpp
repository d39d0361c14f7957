// Reductions along dims: sum, mean, var, max/argmax, sum_to; each with its backward.
#include "attn/core/profile.h"
#include "attn/ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attn/autograd/grad_mode.h"
#include "attn/autograd/node.h"
#include "attn/core/parallel.h"
#include "attn/ops/elementwise.h"

namespace attn {

namespace {

std::vector<int64_t> norm_dims(std::vector<int64_t> dims, int64_t nd, const char* op, const Shape& s) {
  if (dims.empty()) {
    dims.resize(nd);
    for (int64_t i = 0; i < nd; ++i) dims[i] = i;
    return dims;
  }
  std::vector<bool> seen(std::max<int64_t>(nd, 1), false);
  for (auto& d : dims) {
    int64_t r = d < 0 ? d + nd : d;
    ATTN_CHECK(r >= 0 && r < std::max<int64_t>(nd, 1), op, ": dim ", d, " is out of range for shape ", s);
    ATTN_CHECK(!seen[r], op, ": dim ", d, " repeated");
    seen[r] = true;
    d = r;
  }
  std::sort(dims.begin(), dims.end());
  return dims;
}

Shape reduced_shape(const Shape& s, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t i = 0; i < int64_t(s.size()); ++i) {
    bool r = std::find(dims.begin(), dims.end(), i) != dims.end();
    if (!r) out.push_back(s[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

// Moves reduced dims last and returns a contiguous (rows, inner) layout: `rows` outputs, each the
// reduction of `inner` consecutive values.
Tensor reduce_layout(const Tensor& a, const std::vector<int64_t>& dims, int64_t& rows, int64_t& inner) {
  std::vector<int64_t> perm;
  inner = 1;
  for (int64_t i = 0; i < a.dim(); ++i)
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) perm.push_back(i);
  for (int64_t d : dims) { perm.push_back(d); inner *= a.shape()[d]; }
  rows = inner == 0 ? shape_numel(reduced_shape(a.shape(), dims, false)) : a.numel() / inner;
  if (a.dim() == 0) return a.contiguous();
  return a.detach().permute(perm).contiguous();
}

// Sum (and optionally sum of squares about a mean) of each row; double accumulation.
template <class T>
void row_sums(const T* x, int64_t rows, int64_t inner, T* out) {
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* p = x + r * inner;
      double acc = 0;
      for (int64_t i = 0; i < inner; ++i) acc += double(p[i]);
      out[r] = T(acc);
    }
  });
}

// Sum over leading rows of a contiguous (rows, cols) matrix: out[c] = Σ_r x[r, c] (a bias gradient).
// Double accumulation. Tall matrices: a fixed number of row blocks (set by the size, not the thread
// count, so the result is the same for any thread count), each summing its rows into its own partial
// with unit-stride (vectorised) passes; the partials are then added in block order. Short ones: column
// chunks. (The old column-chunk loop over all rows ran at 2.5 GB/s on a ViT MLP's 6400 x 768 gradient.)
template <class T>
void col_sums(const T* x, int64_t rows, int64_t cols, T* out) {
  if (rows <= 0 || cols <= 0) {
    for (int64_t c = 0; c < cols; ++c) out[c] = T(0);
    return;
  }
  const int64_t nb = std::clamp<int64_t>(rows * cols / 32768, 1, std::min<int64_t>(rows / 8 + 1, 32));
  if (nb == 1 || cols > 65536) {
    parallel_for(0, cols, 256, [&](int64_t b, int64_t e) {
      std::vector<double> acc(size_t(e - b), 0.0);
      double* a = acc.data();
      for (int64_t r = 0; r < rows; ++r) {
        const T* p = x + r * cols + b;
        for (int64_t c = 0; c < e - b; ++c) a[c] += double(p[c]);
      }
      for (int64_t c = b; c < e; ++c) out[c] = T(a[c - b]);
    });
    return;
  }
  std::vector<double> part(size_t(nb * cols), 0.0);
  parallel_for(0, nb, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t r0 = rows * blk / nb, r1 = rows * (blk + 1) / nb;
      // Column tiles of 2048 keep the partial (16 KiB of doubles) in L1 on wide matrices.
      for (int64_t c0 = 0; c0 < cols; c0 += 2048) {
        const int64_t n = std::min<int64_t>(2048, cols - c0);
        double* a = part.data() + blk * cols + c0;
        for (int64_t r = r0; r < r1; ++r) {
          const T* p = x + r * cols + c0;
          for (int64_t c = 0; c < n; ++c) a[c] += double(p[c]);
        }
      }
    }
  });
  parallel_for(0, cols, 1024, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      double s = 0;
      for (int64_t blk = 0; blk < nb; ++blk) s += part[size_t(blk * cols + c)];
      out[c] = T(s);
    }
  });
}

Tensor sum_forward(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  Shape os = reduced_shape(a.shape(), dims, keepdim);
  Tensor out = Tensor::empty(os, a.dtype());
  // Fast path: contiguous input reduced over a leading block of dims.
  bool prefix = a.is_contiguous() && !dims.empty() && a.dim() > 0;
  for (size_t i = 0; prefix && i < dims.size(); ++i) prefix = dims[i] == int64_t(i);
  ATTN_DISPATCH_FLOAT(a.dtype(), "sum", [&] {
    if (prefix && int64_t(dims.size()) < a.dim()) {
      int64_t rows = 1;
      for (int64_t d : dims) rows *= a.shape()[d];
      // out.numel() is the column count even when rows == 0 (col_sums zero-fills then).
      col_sums<T>(a.data<T>(), rows, out.numel(), out.data<T>());
      return;
    }
    int64_t rows, inner;
    Tensor c = reduce_layout(a, dims, rows, inner);
    row_sums<T>(c.data<T>(), rows, inner, out.data<T>());
  });
  return out;
}

struct SumNode : autograd::Node {
  Shape in_shape;
  std::vector<int64_t> dims;
  bool keepdim;
  double scale = 1.0;   // 1/N for mean
  const char* name() const override { return scale == 1.0 ? "sum" : "mean"; }
  std::vector<Tensor> backward(const Tensor& dout) override {
    Tensor g = dout;
    if (!keepdim)
      for (int64_t d : dims) g = g.unsqueeze(d);
    if (scale != 1.0) g = mul(g, scale);
    return {g.expand(in_shape).contiguous()};
  }
};

Tensor sum_impl(const Tensor& a, std::vector<int64_t> dims_in, bool keepdim, bool is_mean) {
  ATTN_PROFILE("reduce");
  auto dims = norm_dims(std::move(dims_in), a.dim(), is_mean ? "mean" : "sum", a.shape());
  if (a.dim() == 0) dims.clear();
  Tensor out = sum_forward(a, dims, keepdim);
  int64_t n = 1;
  for (int64_t d : dims) n *= a.shape()[d];
  const double scale = is_mean ? 1.0 / double(n) : 1.0;
  if (is_mean) {
    NoGradGuard g;
    out = mul(out, scale);
  }
  if (autograd::needs_grad({a})) {
    auto nd = std::make_shared<SumNode>();
    nd->in_shape = a.shape(); nd->dims = dims; nd->keepdim = keepdim; nd->scale = scale;
    autograd::attach(out, nd, {a});
  }
  return out;
}

}  // namespace

Tensor sum(const Tensor& a) { return sum_impl(a, {}, false, false); }
Tensor sum(const Tensor& a, std::vector<int64_t> dims, bool keepdim) {
  ATTN_CHECK(!dims.empty(), "sum: expected at least one dim (use sum(a) for all elements)");
  return sum_impl(a, std::move(dims), keepdim, false);
}
Tensor mean(const Tensor& a) { return sum_impl(a, {}, false, true); }
Tensor mean(const Tensor& a, std::vector<int64_t> dims, bool keepdim) {
  ATTN_CHECK(!dims.empty(), "mean: expected at least one dim (use mean(a) for all elements)");
  return sum_impl(a, std::move(dims), keepdim, true);
}

namespace {
struct VarNode : autograd::Node {
  Tensor x, mu;   // mu keepdim-shaped
  double denom;
  const char* name() const override { return "var"; }
  std::vector<Tensor> backward(const Tensor& dout) override {
    Tensor g = dout.reshape(mu.shape());   // keepdim layout: same element order
    return {mul(mul(sub(x, mu), g), 2.0 / denom)};
  }
  void release() override { x = Tensor(); mu = Tensor(); }
};
}  // namespace

Tensor var(const Tensor& a, std::vector<int64_t> dims_in, int64_t correction, bool keepdim) {
  auto dims = norm_dims(std::move(dims_in), a.dim(), "var", a.shape());
  int64_t n = 1;
  for (int64_t d : dims) n *= a.shape()[d];
  Tensor out, mu;
  {
    NoGradGuard g;
    mu = sum_forward(a, dims, true);
    mu = mul(mu, 1.0 / double(n));
    Tensor dev = sub(a.detach(), mu);
    out = sum_forward(mul(dev, dev), dims, keepdim);
    out = mul(out, 1.0 / double(std::max<int64_t>(n - correction, 0)));
  }
  if (autograd::needs_grad({a})) {
    auto nd = std::make_shared<VarNode>();
    nd->x = a.detach(); nd->mu = mu; nd->denom = double(n - correction);
    autograd::attach(out, nd, {a});
  }
  return out;
}

namespace {
struct MaxNode : autograd::Node {
  Shape in_shape;
  Tensor idx;     // i64, keepdim shape
  int64_t dim;
  const char* name() const override { return "max"; }
  std::vector<Tensor> backward(const Tensor& dout) override {
    Tensor g = dout.reshape(idx.shape()).contiguous();
    Tensor dx = Tensor::zeros(in_shape, g.dtype());
    // Scatter along `dim`: outer x [dim] x inner.
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < dim; ++i) outer *= in_shape[i];
    for (int64_t i = dim + 1; i < int64_t(in_shape.size()); ++i) inner *= in_shape[i];
    const int64_t n = in_shape[dim];
    const int64_t* ip = idx.data<int64_t>();
    ATTN_DISPATCH_FLOAT(g.dtype(), "max", [&] {
      const T* gp = g.data<T>();
      T* dp = dx.data<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i)
          dp[(o * n + ip[o * inner + i]) * inner + i] += gp[o * inner + i];
    });
    return {dx};
  }
};

// values and indices (keepdim shapes) of the max along `dim`; first maximal index; NaN wins.
void max_along(const Tensor& a_in, int64_t dim, Tensor& vals, Tensor& idx) {
  Tensor a = a_in.contiguous();
  Shape ks = a.shape();
  const int64_t n = ks[dim];
  ATTN_CHECK(n > 0, "max: cannot reduce an empty dim (dim ", dim, " of shape ", a.shape(), ")");
  ks[dim] = 1;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < dim; ++i) outer *= a.shape()[i];
  for (int64_t i = dim + 1; i < a.dim(); ++i) inner *= a.shape()[i];
  vals = Tensor::empty(ks, a.dtype());
  idx = Tensor::empty(ks, DType::i64);
  int64_t* ip = idx.data<int64_t>();
  ATTN_DISPATCH_ALL(a.dtype(), "max", [&] {
    const T* x = a.data<T>();
    T* v = vals.data<T>();
    parallel_for(0, outer, 1, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          const T* p = x + o * n * inner + i;
          T best = p[0];
          int64_t bi = 0;
          for (int64_t j = 1; j < n; ++j) {
            const T c = p[j * inner];
            if (best != best) break;                 // NaN found: stays
            if (c != c || c > best) { best = c; bi = j; }
          }
          v[o * inner + i] = best;
          ip[o * inner + i] = bi;
        }
    });
  });
}
}  // namespace

std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim) {
  const int64_t nd = std::max<int64_t>(a.dim(), 1);
  int64_t d = dim < 0 ? dim + nd : dim;
  ATTN_CHECK(d >= 0 && d < nd, "max: dim ", dim, " is out of range for shape ", a.shape());
  Tensor src = a.dim() == 0 ? a.reshape({1}) : a;
  Tensor vals, idx;
  max_along(src.detach(), d, vals, idx);
  Tensor idx_keep = idx;
  if (!keepdim) { vals = vals.squeeze(d); idx = idx.squeeze(d); }
  if (a.dim() == 0) { vals = vals.reshape({}); idx = idx.reshape({}); }
  if (autograd::needs_grad({a})) {
    auto n = std::make_shared<MaxNode>();
    n->in_shape = src.shape(); n->idx = idx_keep; n->dim = d;
    if (a.dim() == 0) {
      Tensor out = vals;
      autograd::attach(out, n, {src});
      return {out, idx};
    }
    autograd::attach(vals, n, {a});
  }
  return {vals, idx};
}

Tensor max(const Tensor& a) {
  ATTN_CHECK(a.numel() > 0, "max: cannot reduce an empty tensor of shape ", a.shape());
  return max(a.reshape({-1}), 0, false).first;
}

Tensor argmax(const Tensor& a, int64_t dim, bool keepdim) {
  NoGradGuard g;
  return max(a, dim, keepdim).second;
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int64_t lead = g.dim() - int64_t(shape.size());
  ATTN_CHECK(lead >= 0, "sum_to: cannot sum shape ", g.shape(), " to ", shape);
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < g.dim(); ++i) {
    if (i < lead) { dims.push_back(i); continue; }
    const int64_t want = shape[i - lead];
    if (want == 1 && g.shape()[i] != 1) dims.push_back(i);
    else ATTN_CHECK(want == g.shape()[i], "sum_to: cannot sum shape ", g.shape(), " to ", shape);
  }
  Tensor r = dims.empty() ? g : sum(g, dims, true);
  return r.reshape(shape);
}

}  // namespace attn

// Indexing and masking ops: embedding, index_select, gather, masked_fill, where; each with its
// backward beside it. Scatter-adds (the backward of the gathers) split the work by destination
// (outer slice x column block) and sum each destination in index order, so results do not depend
// on the thread count.
#include "attn/core/profile.h"
#include "attn/ops/indexing.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "attn/autograd/grad_mode.h"
#include "attn/autograd/node.h"
#include "attn/core/parallel.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "../core/strided.h"
#include "quantize_internal.h"

namespace attn {

namespace {

using detail::prod;
using detail::wrap_dim;

// Column block for work split by (outer, column block): enough blocks to feed every thread.
// The block size never changes results (each destination element is summed by one work item).
int64_t column_block(int64_t outer, int64_t inner) {
  const int64_t nt = get_num_threads();
  if (outer >= 2 * nt || inner <= 64) return std::max<int64_t>(inner, 1);
  const int64_t want = (inner + 4 * nt - 1) / (4 * nt);
  return std::max<int64_t>(64, (want + 15) / 16 * 16);
}

// dst: (outer, n, inner), src: (outer, k, inner), both contiguous.
// dst[o, idx[j], :] += src[o, j, :] for every o, j, in order of j.
template <class T>
void index_add_rows(T* dst, const T* src, int64_t outer, int64_t n, int64_t k, int64_t inner,
                    const int64_t* idx) {
  if (outer == 0 || k == 0 || inner == 0) return;
  const int64_t cb = column_block(outer, inner);
  const int64_t nb = (inner + cb - 1) / cb;
  parallel_for(0, outer * nb, 1, [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t o = w / nb, c0 = (w % nb) * cb, c1 = std::min(inner, c0 + cb);
      for (int64_t j = 0; j < k; ++j) {
        T* d = dst + (o * n + idx[j]) * inner;
        const T* s = src + (o * k + j) * inner;
        for (int64_t c = c0; c < c1; ++c) d[c] += s[c];
      }
    }
  });
}

void index_add_rows_any(Tensor& dst, const Tensor& src, int64_t outer, int64_t n, int64_t k,
                        int64_t inner, const int64_t* idx, const char* op) {
  Tensor s = src.contiguous();
  ATTN_DISPATCH_FLOAT(dst.dtype(), op, [&] {
    index_add_rows<T>(dst.data<T>(), s.data<T>(), outer, n, k, inner, idx);
  });
}

// out[o, j, :] = x[o, idx[j], :] as raw bytes; x (outer, n, inner) contiguous.
void gather_rows(char* out, const char* x, int64_t outer, int64_t n, int64_t k, int64_t inner_bytes,
                 const int64_t* idx) {
  if (outer == 0 || k == 0 || inner_bytes == 0) return;
  const int64_t grain = std::max<int64_t>(1, 65536 / inner_bytes);
  parallel_for(0, outer * k, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = r / k, j = r % k;
      std::memcpy(out + r * inner_bytes, x + (o * n + idx[j]) * inner_bytes, size_t(inner_bytes));
    }
  });
}

std::vector<int64_t> read_indices(const Tensor& index, int64_t n, const char* op, const char* where_txt) {
  std::vector<int64_t> idx = index.to_vector<int64_t>();
  for (size_t i = 0; i < idx.size(); ++i)
    ATTN_CHECK(idx[i] >= 0 && idx[i] < n, op, ": index ", idx[i], " at flat position ", i,
               " is out of range [0, ", n, ")", where_txt);
  return idx;
}

// ---- embedding ----

struct EmbeddingNode : autograd::Node {
  std::vector<int64_t> idx;
  int64_t rows = 0, cols = 0;
  DType dtype = DType::f32;
  const char* name() const override { return "embedding"; }
  std::vector<Tensor> backward(const Tensor& dout) override {
    Tensor dw = Tensor::zeros({rows, cols}, dtype);
    index_add_rows_any(dw, dout, 1, rows, int64_t(idx.size()), cols, idx.data(), "embedding backward");
    return {dw};
  }
  void release() override { idx.clear(); idx.shrink_to_fit(); }
};

// ---- index_select ----

struct IndexSelectNode : autograd::Node {
  std::vector<int64_t> idx;
  Shape x_shape;
  DType dtype = DType::f32;
  int64_t outer = 0, n = 0, inner = 0;
  const char* name() const override { return "index_select"; }
  std::vector<Tensor> backward(const Tensor& dout) override {
    Tensor dx = Tensor::zeros(x_shape, dtype);
    index_add_rows_any(dx, dout, outer, n, int64_t(idx.size()), inner, idx.data(), "index_select backward");
    return {dx};
  }
  void release() override { idx.clear(); idx.shrink_to_fit(); }
};

// ---- gather ----

// Index shape viewed as (outer, J, inner) around dim; element (o, j, i) reads x at
// xo[o] + idx * sd + xi[i] (x contiguous).
struct GatherPlan {
  int64_t outer = 1, J = 1, inner = 1, sd = 1;
  std::vector<int64_t> xo, xi;
};

GatherPlan make_plan(const Shape& xs, const Shape& is, int64_t dim) {
  GatherPlan p;
  const int64_t nd = int64_t(xs.size());
  Shape xst = contiguous_strides(xs);
  p.outer = prod(is, 0, dim);
  p.J = is[dim];
  p.inner = prod(is, dim + 1, nd);
  p.sd = xst[dim];
  auto offsets = [&](int64_t b, int64_t e, int64_t count) {
    std::vector<int64_t> v(size_t(count), 0);
    for (int64_t q = 0; q < count; ++q) {
      int64_t rem = q, off = 0;
      for (int64_t d = e - 1; d >= b; --d) {
        off += (rem % is[d]) * xst[d];
        rem /= is[d];
      }
      v[size_t(q)] = off;
    }
    return v;
  };
  p.xo = offsets(0, dim, p.outer);
  p.xi = offsets(dim + 1, nd, p.inner);
  return p;
}

template <class F>
void for_each_gather_block(const GatherPlan& p, F&& f) {
  if (p.outer == 0 || p.inner == 0 || p.J == 0) return;
  const int64_t cb = column_block(p.outer, p.inner);
  const int64_t nb = (p.inner + cb - 1) / cb;
  parallel_for(0, p.outer * nb, 1, [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t o = w / nb, c0 = (w % nb) * cb, c1 = std::min(p.inner, c0 + cb);
      f(o, c0, c1);
    }
  });
}

struct GatherNode : autograd::Node {
  GatherPlan plan;
  std::vector<int64_t> idx;
  Shape x_shape;
  DType dtype = DType::f32;
  const char* name() const override { return "gather"; }
  std::vector<Tensor> backward(const Tensor& dout) override {
    Tensor dx = Tensor::zeros(x_shape, dtype);
    Tensor g = dout.contiguous();
    ATTN_DISPATCH_FLOAT(dtype, "gather backward", [&] {
      T* d = dx.data<T>();
      const T* s = g.data<T>();
      const GatherPlan& p = plan;
      const int64_t* ix = idx.data();
      for_each_gather_block(p, [&](int64_t o, int64_t c0, int64_t c1) {
        for (int64_t j = 0; j < p.J; ++j) {
          const int64_t row = (o * p.J + j) * p.inner;
          for (int64_t i = c0; i < c1; ++i) d[p.xo[o] + ix[row + i] * p.sd + p.xi[i]] += s[row + i];
        }
      });
    });
    return {dx};
  }
  void release() override { idx.clear(); idx.shrink_to_fit(); }
};

// ---- where / masked_fill ----

bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

// cond ? a : b over shape s (every operand broadcastable to s), no autograd.
Tensor where_kernel(const Tensor& cond, const Tensor& a, const Tensor& b, const Shape& s, const char* op) {
  Tensor out = Tensor::empty(s, a.dtype());
  if (out.numel() == 0) return out;
  ATTN_DISPATCH_ALL(a.dtype(), op, [&] {
    T* o = out.data<T>();
    if (cond.shape() == s && a.shape() == s && b.shape() == s && cond.is_contiguous() &&
        a.is_contiguous() && b.is_contiguous()) {
      const uint8_t* c = cond.data<uint8_t>();
      const T* x = a.data<T>();
      const T* y = b.data<T>();
      parallel_for(0, out.numel(), 32768, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) o[i] = c[i] ? x[i] : y[i];
      });
      return;
    }
    Tensor ec = cond.detach().expand(s), ea = a.detach().expand(s), eb = b.detach().expand(s);
    check_not_gemm_packed(a);
    check_not_gemm_packed(b);
    const uint8_t* pc = static_cast<const uint8_t*>(cond.impl().storage->data);
    const T* pa = static_cast<const T*>(a.impl().storage->data);
    const T* pb = static_cast<const T*>(b.impl().storage->data);
    Shape so = out.strides();
    detail::for_each_row<4>(
        s, {&so, &ec.strides(), &ea.strides(), &eb.strides()}, {0, ec.offset(), ea.offset(), eb.offset()},
        [&](const std::array<int64_t, 4>& off, int64_t n, const std::array<int64_t, 4>& st) {
          T* d = o + off[0];
          const uint8_t* c = pc + off[1];
          const T* x = pa + off[2];
          const T* y = pb + off[3];
          if (st[1] == 1 && st[2] == 1 && st[3] == 0) {
            const T yy = *y;
            for (int64_t i = 0; i < n; ++i) d[i] = c[i] ? x[i] : yy;
          } else if (st[1] == 1 && st[2] == 0 && st[3] == 1) {
            const T xx = *x;
            for (int64_t i = 0; i < n; ++i) d[i] = c[i] ? xx : y[i];
          } else {
            for (int64_t i = 0; i < n; ++i) d[i] = c[i * st[1]] ? x[i * st[2]] : y[i * st[3]];
          }
        });
  });
  return out;
}

struct MaskedFillNode : autograd::Node {
  Tensor mask;
  const char* name() const override { return "masked_fill"; }
  std::vector<Tensor> backward(const Tensor& dout) override {
    return {where_kernel(mask, Tensor::scalar(0.0, dout.dtype()), dout, dout.shape(), "masked_fill backward")};
  }
  void release() override { mask = Tensor(); }
};

struct WhereNode : autograd::Node {
  Tensor cond;
  Shape a_shape, b_shape;
  const char* name() const override { return "where"; }
  std::vector<Tensor> backward(const Tensor& dout) override {
    Tensor da, db;
    Tensor zero = Tensor::scalar(0.0, dout.dtype());
    if (next[0].fn || next[0].leaf)
      da = sum_to(where_kernel(cond, dout, zero, dout.shape(), "where backward"), a_shape);
    if (next[1].fn || next[1].leaf)
      db = sum_to(where_kernel(cond, zero, dout, dout.shape(), "where backward"), b_shape);
    return {da, db};
  }
  void release() override { cond = Tensor(); }
};

bool is_index_dtype(DType t) { return t == DType::i64 || t == DType::i32; }

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  ATTN_PROFILE("embedding");
  ATTN_CHECK(weight.dim() == 2, "embedding: expected a 2-d weight (V, C), got shape ", weight.shape());
  ATTN_CHECK(is_index_dtype(indices.dtype()), "embedding: expected indices of dtype i64 or i32, got ",
             dtype_name(indices.dtype()));
  const int64_t V = weight.size(0), C = weight.size(1);
  std::vector<int64_t> idx = read_indices(indices, V, "embedding", "");
  Shape os = indices.shape();
  os.push_back(C);
  if (weight.dtype() == DType::i8) return detail::embedding_int8(weight, idx, os);
  Tensor w = weight.detach().contiguous();
  Tensor out = Tensor::empty(os, weight.dtype());
  const int64_t es = int64_t(weight.element_size());
  gather_rows(static_cast<char*>(out.raw_data()), static_cast<const char*>(w.raw_data()), 1, V,
              int64_t(idx.size()), C * es, idx.data());
  if (autograd::needs_grad({weight})) {
    ATTN_CHECK(is_floating(weight.dtype()) && weight.dtype() != DType::bf16,
               "embedding: gradients need a f32 or f64 weight, got ", dtype_name(weight.dtype()));
    auto n = std::make_shared<EmbeddingNode>();
    n->idx = std::move(idx);
    n->rows = V; n->cols = C; n->dtype = weight.dtype();
    autograd::attach(out, n, {weight});
  }
  return out;
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  ATTN_PROFILE("index_select");
  ATTN_CHECK(x.dim() >= 1, "index_select: expected a tensor with at least 1 dim, got shape ", x.shape());
  const int64_t d = wrap_dim(dim, x.dim(), "index_select", x.shape());
  ATTN_CHECK(index.dim() <= 1, "index_select: expected a 1-d index, got shape ", index.shape());
  ATTN_CHECK(is_index_dtype(index.dtype()), "index_select: expected an index of dtype i64 or i32, got ",
             dtype_name(index.dtype()));
  const Shape& xs = x.shape();
  const int64_t n = xs[d];
  const std::string where_txt = detail::cat(" for dim ", d, " of shape ", xs);
  std::vector<int64_t> idx = read_indices(index, n, "index_select", where_txt.c_str());
  const int64_t outer = prod(xs, 0, d), inner = prod(xs, d + 1, x.dim()), k = int64_t(idx.size());
  Shape os = xs;
  os[d] = k;
  Tensor xc = x.detach().contiguous();
  Tensor out = Tensor::empty(os, x.dtype());
  const int64_t es = int64_t(x.element_size());
  gather_rows(static_cast<char*>(out.raw_data()), static_cast<const char*>(xc.raw_data()), outer, n, k,
              inner * es, idx.data());
  if (autograd::needs_grad({x})) {
    auto nd = std::make_shared<IndexSelectNode>();
    nd->idx = std::move(idx);
    nd->x_shape = xs; nd->dtype = x.dtype();
    nd->outer = outer; nd->n = n; nd->inner = inner;
    autograd::attach(out, nd, {x});
  }
  return out;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  ATTN_PROFILE("gather");
  ATTN_CHECK(index.dtype() == DType::i64, "gather: expected an index of dtype i64, got ",
             dtype_name(index.dtype()));
  ATTN_CHECK(index.dim() == x.dim(), "gather: expected an index of the same rank as x (", x.dim(),
             "), got index shape ", index.shape(), " for x shape ", x.shape());
  // 0-d tensors act as 1-d of size 1.
  const Shape xs = x.dim() == 0 ? Shape{1} : x.shape();
  const Shape is = index.dim() == 0 ? Shape{1} : index.shape();
  const int64_t nd = int64_t(xs.size());
  const int64_t d = wrap_dim(dim, nd, "gather", x.shape());
  for (int64_t i = 0; i < nd; ++i)
    ATTN_CHECK(i == d || is[i] <= xs[i], "gather: index shape ", index.shape(), " is larger than x shape ",
               x.shape(), " at dim ", i, " (only dim ", d, " may differ)");
  const std::string where_txt = detail::cat(" for dim ", d, " of shape ", x.shape());
  std::vector<int64_t> idx = read_indices(index, xs[d], "gather", where_txt.c_str());
  GatherPlan p = make_plan(xs, is, d);
  Tensor xc = x.detach().contiguous();
  Tensor out = Tensor::empty(index.shape(), x.dtype());
  ATTN_DISPATCH_ALL(x.dtype(), "gather", [&] {
    const T* s = xc.data<T>();
    T* o = out.data<T>();
    const int64_t* ix = idx.data();
    for_each_gather_block(p, [&](int64_t oo, int64_t c0, int64_t c1) {
      const T* base = s + p.xo[oo];
      for (int64_t j = 0; j < p.J; ++j) {
        const int64_t row = (oo * p.J + j) * p.inner;
        for (int64_t i = c0; i < c1; ++i) o[row + i] = base[ix[row + i] * p.sd + p.xi[i]];
      }
    });
  });
  if (autograd::needs_grad({x})) {
    auto n = std::make_shared<GatherNode>();
    n->plan = std::move(p);
    n->idx = std::move(idx);
    n->x_shape = x.shape(); n->dtype = x.dtype();
    autograd::attach(out, n, {x});
  }
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  ATTN_PROFILE("masked_fill");
  ATTN_CHECK(mask.dtype() == DType::u8, "masked_fill: expected a u8 mask, got ", dtype_name(mask.dtype()));
  ATTN_CHECK(broadcasts_to(mask.shape(), x.shape()), "masked_fill: mask of shape ", mask.shape(),
             " does not broadcast to x of shape ", x.shape());
  ATTN_CHECK(is_floating(x.dtype()) || std::isfinite(value), "masked_fill: value ", value,
             " does not fit dtype ", dtype_name(x.dtype()));
  Tensor out = where_kernel(mask, Tensor::scalar(value, x.dtype()), x, x.shape(), "masked_fill");
  if (autograd::needs_grad({x})) {
    auto n = std::make_shared<MaskedFillNode>();
    n->mask = mask.detach();
    autograd::attach(out, n, {x});
  }
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  ATTN_PROFILE("where");
  ATTN_CHECK(cond.dtype() == DType::u8, "where: expected a u8 condition, got ", dtype_name(cond.dtype()));
  ATTN_CHECK(a.dtype() == b.dtype(), "where: a and b dtypes differ (", dtype_name(a.dtype()), " and ",
             dtype_name(b.dtype()), "); convert one with .to()");
  const Shape s = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out = where_kernel(cond, a, b, s, "where");
  if (autograd::needs_grad({a, b})) {
    auto n = std::make_shared<WhereNode>();
    n->cond = cond.detach();
    n->a_shape = a.shape(); n->b_shape = b.shape();
    autograd::attach(out, n, {a, b});
  }
  return out;
}

}  // namespace attn

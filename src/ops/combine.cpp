// concat / stack / split / chunk. concat copies contiguous inputs as blocks by memcpy (in parallel
// over blocks, or over pieces of one large block); its backward slices dout the same way. split and
// chunk return views (narrow), whose backward is slice's.
#include "attn/core/profile.h"
#include "attn/ops/combine.h"

#include <algorithm>
#include <cstring>

#include "attn/autograd/grad_mode.h"
#include "attn/autograd/node.h"
#include "attn/core/parallel.h"
#include "../core/strided.h"

namespace attn {

namespace {

using detail::prod;
using detail::wrap_dim;

// Copies `count` blocks of `bytes` bytes: block o from src + o * src_stride to dst + o * dst_stride.
void copy_blocks(char* dst, int64_t dst_stride, const char* src, int64_t src_stride, int64_t count,
                 int64_t bytes) {
  if (count == 0 || bytes == 0) return;
  constexpr int64_t kPiece = int64_t(1) << 18;
  if (bytes <= kPiece) {
    parallel_for(0, count, std::max<int64_t>(1, kPiece / bytes), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) std::memcpy(dst + o * dst_stride, src + o * src_stride, size_t(bytes));
    });
    return;
  }
  const int64_t pieces = (bytes + kPiece - 1) / kPiece;
  parallel_for(0, count * pieces, 1, [&](int64_t b, int64_t e) {
    for (int64_t w = b; w < e; ++w) {
      const int64_t o = w / pieces, p0 = (w % pieces) * kPiece, len = std::min(kPiece, bytes - p0);
      std::memcpy(dst + o * dst_stride + p0, src + o * src_stride + p0, size_t(len));
    }
  });
}

bool skipped_in_concat(const Tensor& t) { return t.dim() == 1 && t.numel() == 0; }

struct ConcatNode : autograd::Node {
  int64_t dim = 0;
  std::vector<int64_t> sizes;     // along dim; -1 for inputs skipped (legacy empty 1-d)
  std::vector<Shape> shapes;
  const char* name() const override { return "concat"; }
  std::vector<Tensor> backward(const Tensor& dout_in) override {
    Tensor dout = dout_in.contiguous();
    const Shape& os = dout.shape();
    const int64_t outer = prod(os, 0, dim), inner = prod(os, dim + 1, int64_t(os.size()));
    const int64_t es = int64_t(dout.element_size());
    const int64_t total = os[dim];
    const char* src = static_cast<const char*>(dout.raw_data());
    std::vector<Tensor> grads(sizes.size());
    int64_t off = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      const bool want = next[k].fn || next[k].leaf;
      if (sizes[k] < 0) {   // a skipped empty 1-d input: an empty gradient, as torch
        if (want) grads[k] = Tensor::zeros(shapes[k], dout.dtype());
        continue;
      }
      if (want) {
        Tensor g = Tensor::empty(shapes[k], dout.dtype());
        copy_blocks(static_cast<char*>(g.raw_data()), sizes[k] * inner * es, src + off * inner * es,
                    total * inner * es, outer, sizes[k] * inner * es);
        grads[k] = g;
      }
      off += sizes[k];
    }
    return grads;
  }
};

}  // namespace

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) {
  ATTN_PROFILE("concat");
  ATTN_CHECK(!xs.empty(), "concat: expected a non-empty list of tensors");
  for (size_t k = 0; k < xs.size(); ++k) ATTN_CHECK(xs[k].defined(), "concat: tensor ", k, " is undefined");
  size_t r = 0;
  while (r < xs.size() && skipped_in_concat(xs[r])) ++r;
  if (r == xs.size()) return Tensor::empty({0}, xs[0].dtype());
  const Tensor& ref = xs[r];
  ATTN_CHECK(ref.dim() >= 1, "concat: tensor ", r, " is 0-d (shape []); only tensors with dims can be concatenated");
  const int64_t d = wrap_dim(dim, ref.dim(), "concat", ref.shape());
  int64_t total = 0;
  for (size_t k = 0; k < xs.size(); ++k) {
    const Tensor& x = xs[k];
    if (skipped_in_concat(x)) continue;
    ATTN_CHECK(x.dtype() == ref.dtype(), "concat: tensor ", k, " has dtype ", dtype_name(x.dtype()),
               " but tensor ", r, " has dtype ", dtype_name(ref.dtype()));
    bool same = x.dim() == ref.dim();
    for (int64_t i = 0; same && i < x.dim(); ++i) same = i == d || x.shape()[i] == ref.shape()[i];
    ATTN_CHECK(same, "concat: tensor ", k, " has shape ", x.shape(), " but tensor ", r, " has shape ",
               ref.shape(), "; sizes must match except in dim ", d);
    total += x.shape()[d];
  }
  Shape os = ref.shape();
  os[d] = total;
  Tensor out = Tensor::empty(os, ref.dtype());
  const int64_t outer = prod(os, 0, d), inner = prod(os, d + 1, int64_t(os.size()));
  const int64_t es = int64_t(ref.element_size());
  char* dst = out.is_shapes_only() ? nullptr : static_cast<char*>(out.raw_data());   // ShapesOnlyGuard
  int64_t off = 0;
  for (const Tensor& x : xs) {
    if (skipped_in_concat(x) || !dst) continue;
    const int64_t n = x.shape()[d];
    if (x.is_contiguous()) {
      copy_blocks(dst + off * inner * es, total * inner * es, static_cast<const char*>(x.raw_data()),
                  n * inner * es, outer, n * inner * es);
    } else {
      Tensor part = out.narrow(d, off, n);
      part.copy_(x);
    }
    off += n;
  }
  if (autograd::needs_grad(xs)) {
    auto node = std::make_shared<ConcatNode>();
    node->dim = d;
    for (const Tensor& x : xs) {
      node->sizes.push_back(skipped_in_concat(x) ? -1 : x.shape()[d]);
      node->shapes.push_back(x.shape());
    }
    autograd::attach(out, node, xs);
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  ATTN_PROFILE("concat");
  ATTN_CHECK(!xs.empty(), "stack: expected a non-empty list of tensors");
  for (size_t k = 0; k < xs.size(); ++k) ATTN_CHECK(xs[k].defined(), "stack: tensor ", k, " is undefined");
  const Tensor& ref = xs[0];
  for (size_t k = 1; k < xs.size(); ++k) {
    ATTN_CHECK(xs[k].shape() == ref.shape(), "stack: tensor ", k, " has shape ", xs[k].shape(),
               " but tensor 0 has shape ", ref.shape(), "; all must have the same shape");
    ATTN_CHECK(xs[k].dtype() == ref.dtype(), "stack: tensor ", k, " has dtype ", dtype_name(xs[k].dtype()),
               " but tensor 0 has dtype ", dtype_name(ref.dtype()));
  }
  const int64_t n = ref.dim() + 1;
  const int64_t d = dim < 0 ? dim + n : dim;
  ATTN_CHECK(d >= 0 && d < n, "stack: dim ", dim, " is out of range for stacking tensors of shape ",
             ref.shape(), " (expected a dim in [", -n, ", ", n - 1, "])");
  std::vector<Tensor> parts;
  parts.reserve(xs.size());
  for (const Tensor& x : xs) parts.push_back(x.unsqueeze(d));
  return concat(parts, d);
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  ATTN_CHECK(x.dim() >= 1, "split: expected a tensor with at least 1 dim, got shape ", x.shape());
  const int64_t d = wrap_dim(dim, x.dim(), "split", x.shape());
  const int64_t n = x.shape()[d];
  ATTN_CHECK(split_size > 0 || (split_size == 0 && n == 0), "split: split_size must be positive, got ",
             split_size);
  std::vector<Tensor> out;
  if (n == 0) {
    out.push_back(x.narrow(d, 0, 0));
    return out;
  }
  for (int64_t s = 0; s < n; s += split_size) out.push_back(x.narrow(d, s, std::min(split_size, n - s)));
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  ATTN_CHECK(x.dim() >= 1, "split: expected a tensor with at least 1 dim, got shape ", x.shape());
  const int64_t d = wrap_dim(dim, x.dim(), "split", x.shape());
  const int64_t n = x.shape()[d];
  int64_t sum = 0;
  for (int64_t s : sizes) {
    ATTN_CHECK(s >= 0, "split: sizes must be non-negative, got ", sizes);
    sum += s;
  }
  ATTN_CHECK(sum == n, "split: sizes ", sizes, " sum to ", sum, " but dim ", d, " of shape ", x.shape(),
             " has size ", n);
  std::vector<Tensor> out;
  out.reserve(sizes.size());
  int64_t off = 0;
  for (int64_t s : sizes) {
    out.push_back(x.narrow(d, off, s));
    off += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  ATTN_CHECK(chunks > 0, "chunk: chunks must be positive, got ", chunks);
  ATTN_CHECK(x.dim() >= 1, "chunk: expected a tensor with at least 1 dim, got shape ", x.shape());
  const int64_t d = wrap_dim(dim, x.dim(), "chunk", x.shape());
  const int64_t n = x.shape()[d];
  if (n == 0) return split(x, std::vector<int64_t>(size_t(chunks), 0), d);
  return split(x, (n + chunks - 1) / chunks, d);
}

}  // namespace attn

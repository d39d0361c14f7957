// Internal helpers to walk strided tensors. Shapes are broadcast beforehand, so every operand
// has the output's shape, with stride 0 on broadcast dims.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "attn/core/parallel.h"
#include "attn/core/tensor.h"

namespace attn::detail {

// Dim d of an n-dim tensor, negative counting from the end; names op and shape when out of range.
inline int64_t wrap_dim(int64_t d, int64_t n, const char* op, const Shape& shape) {
  const int64_t r = d < 0 ? d + n : d;
  ATTN_CHECK(r >= 0 && r < n, op, ": dim ", d, " is out of range for shape ", shape);
  return r;
}

// Product of s[b .. e).
inline int64_t prod(const Shape& s, int64_t b, int64_t e) {
  int64_t p = 1;
  for (int64_t i = b; i < e; ++i) p *= s[i];
  return p;
}

// Calls f(offset) for every element, in row-major order (serial).
template <class F>
void for_each_offset(const Shape& shape, const Shape& strides, int64_t base, F&& f) {
  const int64_t nd = int64_t(shape.size());
  if (shape_numel(shape) == 0) return;
  if (nd == 0) { f(base); return; }
  std::vector<int64_t> idx(nd, 0);
  int64_t off = base;
  const int64_t inner = shape[nd - 1], ist = strides[nd - 1];
  while (true) {
    for (int64_t i = 0; i < inner; ++i) f(off + i * ist);
    int64_t d = nd - 2;
    for (; d >= 0; --d) {
      off += strides[d];
      if (++idx[d] < shape[d]) break;
      off -= strides[d] * shape[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// N operands of the same shape. Calls row(offsets, inner_len, inner_strides) once per innermost
// row, rows split across threads. offsets[k] is operand k's element offset at the row start.
// Dims of size 1 are dropped and adjacent dims that every operand walks as one (stride of the outer
// = stride of the inner × its size) are merged first, so the rows are as long as the layouts allow:
// a (B, T, C) tensor times a per-sample (B, 1, 1) scale is B rows of T·C, not B·T rows of C.
template <size_t N, class F>
void for_each_row(const Shape& shape_in, const std::array<const Shape*, N>& strides_in,
                  const std::array<int64_t, N>& base, F&& row) {
  const int64_t nd_in = int64_t(shape_in.size());
  const int64_t numel = shape_numel(shape_in);
  if (numel == 0) return;
  std::vector<int64_t> shape;
  std::array<std::vector<int64_t>, N> strides;
  for (int64_t d = 0; d < nd_in; ++d) {
    const int64_t n = shape_in[d];
    if (n == 1) continue;
    bool merge = !shape.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = strides[k].back() == (*strides_in[k])[d] * n;
    if (merge) {
      shape.back() *= n;
      for (size_t k = 0; k < N; ++k) strides[k].back() = (*strides_in[k])[d];
    } else {
      shape.push_back(n);
      for (size_t k = 0; k < N; ++k) strides[k].push_back((*strides_in[k])[d]);
    }
  }
  const int64_t nd = int64_t(shape.size());
  if (nd == 0) {   // one element
    std::array<int64_t, N> z{};
    row(base, int64_t(1), z);
    return;
  }
  const int64_t inner = shape[nd - 1];
  const int64_t rows = numel / inner;
  std::array<int64_t, N> ist;
  for (size_t k = 0; k < N; ++k) ist[k] = strides[k][nd - 1];
  // Rows longer than kSeg elements are walked in segments of kSeg, so that merged rows still split
  // across threads; work item = (row, segment).
  constexpr int64_t kSeg = 32768;
  const int64_t segs = (inner + kSeg - 1) / kSeg, seg_len = segs > 1 ? kSeg : inner;
  const int64_t grain = std::max<int64_t>(1, kSeg / std::max<int64_t>(seg_len, 1));
  if (segs == 1 && nd > 1) {
    // Whole rows: the first row's index by division, the next ones by an odometer step (short rows of
    // many dims, a patch gather's 4-element rows, would otherwise spend more on divisions than on data).
    parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
      std::vector<int64_t> idx(size_t(nd - 1), 0);
      std::array<int64_t, N> off = base;
      int64_t rem = r0;
      for (int64_t d = nd - 2; d >= 0; --d) {
        idx[size_t(d)] = rem % shape[d];
        rem /= shape[d];
        for (size_t k = 0; k < N; ++k) off[k] += idx[size_t(d)] * strides[k][d];
      }
      for (int64_t r = r0; r < r1; ++r) {
        row(off, inner, ist);
        for (int64_t d = nd - 2; d >= 0; --d) {
          for (size_t k = 0; k < N; ++k) off[k] += strides[k][d];
          if (++idx[size_t(d)] < shape[d]) break;
          for (size_t k = 0; k < N; ++k) off[k] -= strides[k][d] * shape[d];
          idx[size_t(d)] = 0;
        }
      }
    });
    return;
  }
  parallel_for(0, rows * segs, grain, [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t r = w / segs, j0 = w % segs * seg_len;
      std::array<int64_t, N> off = base;
      int64_t rem = r;
      for (int64_t d = nd - 2; d >= 0; --d) {
        const int64_t i = rem % shape[d];
        rem /= shape[d];
        for (size_t k = 0; k < N; ++k) off[k] += i * strides[k][d];
      }
      for (size_t k = 0; k < N; ++k) off[k] += j0 * ist[k];
      row(off, std::min(seg_len, inner - j0), ist);
    }
  });
}

}  // namespace attn::detail

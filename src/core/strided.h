// Internal helpers to walk strided tensors. Shapes are broadcast beforehand, so every operand
// has the output's shape, with stride 0 on broadcast dims.
#pragma once
#include <array>
#include <cstdint>
#include <functional>

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
template <size_t N, class F>
void for_each_row(const Shape& shape, const std::array<const Shape*, N>& strides,
                  const std::array<int64_t, N>& base, F&& row) {
  const int64_t nd = int64_t(shape.size());
  const int64_t numel = shape_numel(shape);
  if (numel == 0) return;
  if (nd == 0) {
    std::array<int64_t, N> z{};
    row(base, int64_t(1), z);
    return;
  }
  const int64_t inner = shape[nd - 1];
  const int64_t rows = numel / inner;
  std::array<int64_t, N> ist;
  for (size_t k = 0; k < N; ++k) ist[k] = (*strides[k])[nd - 1];
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(inner, 1));
  parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      std::array<int64_t, N> off = base;
      int64_t rem = r;
      for (int64_t d = nd - 2; d >= 0; --d) {
        const int64_t i = rem % shape[d];
        rem /= shape[d];
        for (size_t k = 0; k < N; ++k) off[k] += i * (*strides[k])[d];
      }
      row(off, inner, ist);
    }
  });
}

}  // namespace attn::detail

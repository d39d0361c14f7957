// Indexing and masking ops, forward and backward: embedding lookup, index_select, gather,
// masked_fill and where (PyTorch semantics).
//
//   Tensor h = attn::embedding(wte, tokens);                 // (V, C), (B, T) i64 -> (B, T, C)
//   Tensor r = attn::index_select(x, 0, idx);                // rows idx of x
//   Tensor p = attn::gather(logp, -1, target.unsqueeze(-1)); // (N, C), (N, 1) -> (N, 1)
//   Tensor s = attn::masked_fill(scores, causal, -INFINITY); // mask (T, T) u8 over (B, H, T, T)
//   Tensor y = attn::where(keep, x, zeros);                  // cond, a, b broadcast together
//
// Index tensors are i64 (or i32 where noted); masks are u8 (0/1). An index outside its dimension
// (negative ones included) throws attn::Error naming it. Backward passes that scatter-add
// (embedding, index_select, gather) sum in a fixed order: bit-identical for any thread count.
#pragma once
#include <cstdint>

#include "attn/core/tensor.h"

namespace attn {

// weight: (V, C); indices: i64 or i32, any shape (...). Returns (..., C). Differentiable w.r.t. weight.
Tensor embedding(const Tensor& weight, const Tensor& indices);
// Picks entries `index` (1-d i64/i32) along `dim`: out.shape[dim] = index.numel().
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out[i][j][k] = x[i][index[i][j][k]][k] (dim = 1). index: i64, same rank as x, with
// index.size(d) <= x.size(d) for d != dim. Returns index's shape.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// x with `value` where mask (u8, broadcastable to x's shape) is non-zero; shape of x.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// cond ? a : b elementwise; cond u8, a and b of one dtype; all three broadcast together.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

}  // namespace attn

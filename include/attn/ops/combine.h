// Joining and splitting tensors along a dimension (PyTorch's cat, stack, split, chunk), with
// their backward passes.
//
//   Tensor x = attn::concat({cls, patches}, 1);             // (B, 1, C) + (B, N, C) -> (B, N+1, C)
//   Tensor s = attn::stack({a, b}, 0);                      // two (T, C) -> (2, T, C)
//   auto qkv = attn::split(proj, 768, -1);                  // (B, T, 2304) -> 3 x (B, T, 768) views
//   auto parts = attn::chunk(x, 4, 0);                      // ceil-sized pieces, maybe fewer than 4
//
// concat/stack copy (contiguous blocks by memcpy, in parallel); split/chunk return views of x.
// Negative dims count from the end.
#pragma once
#include <cstdint>
#include <vector>

#include "attn/core/tensor.h"

namespace attn {

// All of one dtype and rank, equal sizes except along dim. As torch.cat, 1-d tensors of shape
// [0] are skipped.
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);
// All of one shape; inserts a new dim at `dim` (in [-(rank+1), rank]).
Tensor stack(const std::vector<Tensor>& xs, int64_t dim);
// Pieces of split_size along dim; the last piece may be smaller.
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim);
// Pieces of the given sizes, which must sum to x.size(dim).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);
// As torch.chunk: pieces of ceil(size / chunks); may give fewer than `chunks` pieces.
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim);

}  // namespace attn

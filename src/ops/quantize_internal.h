// Internal to src/ops: the int8 path of linear() (matmul.cpp dispatches an i8 weight here) and the
// preparation of an i8 weight for packing (pack_linear_weight).
#pragma once
#include <vector>

#include "attn/core/tensor.h"

namespace attn::detail {

// x f32 or bf16 (..., K), w i8 (N, K) with its scales (ops/quantize.h), bias f32 (N) or undefined.
Tensor linear_int8(const Tensor& x, const Tensor& w, const Tensor& bias);
// Before an i8 weight is packed: records its column sums (the packed bytes are opaque afterwards).
// False if w carries no scales (it is then not packed).
bool prepare_int8_pack(const Tensor& w);
// embedding() of an i8 table (V, C) with its per-row scales: out (shape `os`, f32) row r = codes[idx[r]]
// · scale[idx[r]]. idx already checked against V.
Tensor embedding_int8(const Tensor& weight, const std::vector<int64_t>& idx, const Shape& os);

}  // namespace attn::detail

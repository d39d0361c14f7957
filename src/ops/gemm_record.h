// Internal to src/ops: what the fused attention kernels note for a GemmRecorder (attn/ops/matmul.h).
// Their two products are GEMMs in all but name; recorded as the batched GEMMs oneDNN would run.
#pragma once
#include <cstdint>

#include "attn/core/dtype.h"

namespace attn::detail {

// QKᵀ (bh × tq × hs · hs × tk) and PV (bh × tq × tk · tk × hs), in `dtype` (the fused kernels' f32, the bf16
// attention's bf16); nothing unless a recorder is live.
void record_attention_gemms(int64_t bh, int64_t tq, int64_t tk, int64_t hs, DType dtype = DType::f32);
// The backward's four products, f32: dP = dO Vᵀ, dV = Pᵀ dO, dQ = dS K, dK = dSᵀ Q (its recomputed QKᵀ is
// not counted: an unfused attention keeps P instead).
void record_attention_backward_gemms(int64_t bh, int64_t tq, int64_t tk, int64_t hs);

}  // namespace attn::detail

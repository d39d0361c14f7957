// Internal to src/ops: what the fused attention kernels note for a GemmRecorder (attn/ops/matmul.h).
// Their two products are GEMMs in all but name; recorded as the batched GEMMs oneDNN would run.
#pragma once
#include <cstdint>

namespace attn::detail {

// QKᵀ (bh × tq × hs · hs × tk) and PV (bh × tq × tk · tk × hs), f32; nothing unless a recorder is live.
void record_attention_gemms(int64_t bh, int64_t tq, int64_t tk, int64_t hs);

}  // namespace attn::detail

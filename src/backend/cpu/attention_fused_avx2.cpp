// Fused attention kernels, avx2 path (see attention_fused.h, attention_fused_kernels.h).
#define ATTN_KERNEL_TU
#include "attention_fused.h"
#include "vec_avx2.h"
#include "attention_fused_kernels.h"

namespace attn::kernels::avx2 {

void attention_fwd(const AttnFwdArgs& a, int64_t item0, int64_t item1, float* scratch) {
  AttnOps<VecAvx2>::fwd(a, item0, item1, scratch);
}

void attention_bwd(const AttnBwdArgs& a, int64_t item0, int64_t item1, float* scratch) {
  AttnOps<VecAvx2>::bwd(a, item0, item1, scratch);
}

}  // namespace attn::kernels::avx2

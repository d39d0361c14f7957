// Fused attention kernels, scalar path (see attention_fused.h, attention_fused_kernels.h).
#define ATTN_KERNEL_TU
#include "attention_fused.h"
#include "vec_scalar.h"
#include "attention_fused_kernels.h"

namespace attn::kernels::scalar {

void attention_fwd(const AttnFwdArgs& a, int64_t item0, int64_t item1, float* scratch) {
  AttnOps<VecScalar>::fwd(a, item0, item1, scratch);
}

void attention_bwd(const AttnBwdArgs& a, int64_t item0, int64_t item1, float* scratch) {
  AttnOps<VecScalar>::bwd(a, item0, item1, scratch);
}

}  // namespace attn::kernels::scalar

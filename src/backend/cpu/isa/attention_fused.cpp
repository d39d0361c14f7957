// Fused attention kernels of one ISA (see attention_fused.h, attention_fused_kernels.h), compiled
// once per ISA (kernel_isa.h).
#include "kernel_isa.h"
#include "../attention_fused.h"
#include "../attention_fused_kernels.h"

namespace attn::kernels::ATTN_KERNEL_ISA {

void attention_fwd(const AttnFwdArgs& a, int64_t item0, int64_t item1, float* scratch) {
  AttnOps<Vec>::fwd(a, item0, item1, scratch);
}

void attention_bwd(const AttnBwdArgs& a, int64_t item0, int64_t item1, float* scratch) {
  AttnOps<Vec>::bwd(a, item0, item1, scratch);
}

}  // namespace attn::kernels::ATTN_KERNEL_ISA

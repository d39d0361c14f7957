// Fused window-attention kernels of one ISA (see window_attention.h, window_attention_kernels.h),
// compiled once per ISA (kernel_isa.h).
#include "kernel_isa.h"
#include "../window_attention.h"
#include "../window_attention_kernels.h"

namespace attn::kernels::ATTN_KERNEL_ISA {

void window_attention_fwd(const WinAttnFwdArgs& a, int64_t item, float* scratch) {
  WinOps<Vec>::fwd(a, item, scratch);
}

void window_attention_bwd(const WinAttnBwdArgs& a, int64_t item, float* scratch) {
  WinOps<Vec>::bwd(a, item, scratch);
}

}  // namespace attn::kernels::ATTN_KERNEL_ISA

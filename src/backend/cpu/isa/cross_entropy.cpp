// Cross-entropy row kernels of one ISA (per-row statistics and the gradient; see vec_dispatch.h,
// vec_kernels.h), compiled once per ISA (kernel_isa.h).
#include "kernel_isa.h"
#include "../vec_dispatch.h"
#include "../vec_kernels.h"

namespace attn::kernels::ATTN_KERNEL_ISA {

void ce_stats(const float* x, int64_t rows, int64_t n, float* mx, double* se, double* sx) {
  RowOps<Vec>::ce_stats(x, rows, n, mx, se, sx);
}

void ce_grad(const float* x, float* dx, int64_t n, float lhi, float llo, float g, float off) {
  RowOps<Vec>::ce_grad(x, dx, n, lhi, llo, g, off);
}

}  // namespace attn::kernels::ATTN_KERNEL_ISA

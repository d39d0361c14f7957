// Softmax / log-softmax row kernels of one ISA (see vec_dispatch.h, vec_kernels.h), compiled once
// per ISA (kernel_isa.h).
#include "kernel_isa.h"
#include "../vec_dispatch.h"
#include "../vec_kernels.h"

namespace attn::kernels::ATTN_KERNEL_ISA {

void softmax_fwd(const float* x, float* y, int64_t rows, int64_t n, bool log) {
  RowOps<Vec>::softmax_fwd(x, y, rows, n, log);
}

void softmax_bwd(const float* dy, const float* y, float* dx, int64_t rows, int64_t n, bool log) {
  RowOps<Vec>::softmax_bwd(dy, y, dx, rows, n, log);
}

}  // namespace attn::kernels::ATTN_KERNEL_ISA

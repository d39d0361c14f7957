// GELU (exact erf and tanh forms, optional fused bias) row kernels of one ISA (see vec_dispatch.h,
// vec_kernels.h), compiled once per ISA (kernel_isa.h).
#include "kernel_isa.h"
#include "../vec_dispatch.h"
#include "../vec_kernels.h"

namespace attn::kernels::ATTN_KERNEL_ISA {

void gelu_fwd(const float* x, const float* bias, float* y, int64_t rows, int64_t C, bool tanh) {
  RowOps<Vec>::gelu_fwd(x, bias, y, rows, C, tanh);
}

void gelu_bwd(const float* dy, const float* x, const float* bias, float* dx, float* db_acc, int64_t rows,
              int64_t C, bool tanh) {
  RowOps<Vec>::gelu_bwd(dy, x, bias, dx, db_acc, rows, C, tanh);
}

}  // namespace attn::kernels::ATTN_KERNEL_ISA

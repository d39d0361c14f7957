// Layer norm (and residual add + layer norm) row kernels of one ISA (see vec_dispatch.h,
// vec_kernels.h), compiled once per ISA (kernel_isa.h).
#include "kernel_isa.h"
#include "../vec_dispatch.h"
#include "../vec_kernels.h"

namespace attn::kernels::ATTN_KERNEL_ISA {

void layer_norm_fwd(const float* x, const float* r, const float* w, const float* b, float* s, float* y,
                    float* mean, float* rstd, int64_t rows, int64_t C, float eps) {
  RowOps<Vec>::layer_norm_fwd(x, r, w, b, s, y, mean, rstd, rows, C, eps);
}

void layer_norm_bwd(const float* dy, const float* x, const float* mean, const float* rstd, const float* w,
                    float* dx, float* dw_acc, float* db_acc, int64_t rows, int64_t C) {
  RowOps<Vec>::layer_norm_bwd(dy, x, mean, rstd, w, dx, dw_acc, db_acc, rows, C);
}

}  // namespace attn::kernels::ATTN_KERNEL_ISA

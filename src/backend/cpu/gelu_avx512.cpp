// GELU (exact erf and tanh forms, optional fused bias) row kernels, avx512 path (see
// vec_dispatch.h, vec_kernels.h).
#define ATTN_KERNEL_TU
#include "vec_dispatch.h"
#include "vec_avx512.h"
#include "vec_kernels.h"

namespace attn::kernels::avx512 {

void gelu_fwd(const float* x, const float* bias, float* y, int64_t rows, int64_t C, bool tanh) {
  RowOps<VecAvx512>::gelu_fwd(x, bias, y, rows, C, tanh);
}

void gelu_bwd(const float* dy, const float* x, const float* bias, float* dx, float* db_acc, int64_t rows,
              int64_t C, bool tanh) {
  RowOps<VecAvx512>::gelu_bwd(dy, x, bias, dx, db_acc, rows, C, tanh);
}

}  // namespace attn::kernels::avx512

// Softmax / log-softmax and cross-entropy row kernels, avx2 path (see vec_dispatch.h, vec_kernels.h).
#define ATTN_KERNEL_TU
#include "vec_dispatch.h"
#include "vec_avx2.h"
#include "vec_kernels.h"

namespace attn::kernels::avx2 {

void softmax_fwd(const float* x, float* y, int64_t rows, int64_t n, bool log) {
  RowOps<VecAvx2>::softmax_fwd(x, y, rows, n, log);
}

void softmax_bwd(const float* dy, const float* y, float* dx, int64_t rows, int64_t n, bool log) {
  RowOps<VecAvx2>::softmax_bwd(dy, y, dx, rows, n, log);
}

void ce_stats(const float* x, int64_t rows, int64_t n, float* mx, double* se, double* sx) {
  RowOps<VecAvx2>::ce_stats(x, rows, n, mx, se, sx);
}

void ce_grad(const float* x, float* dx, int64_t n, float lhi, float llo, float g, float off) {
  RowOps<VecAvx2>::ce_grad(x, dx, n, lhi, llo, g, off);
}

}  // namespace attn::kernels::avx2

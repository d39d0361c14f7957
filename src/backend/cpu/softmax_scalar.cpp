// Softmax / log-softmax and cross-entropy row kernels, scalar path (see vec_dispatch.h, vec_kernels.h).
#define ATTN_KERNEL_TU
#include "vec_dispatch.h"
#include "vec_scalar.h"
#include "vec_kernels.h"

namespace attn::kernels::scalar {

void softmax_fwd(const float* x, float* y, int64_t rows, int64_t n, bool log) {
  RowOps<VecScalar>::softmax_fwd(x, y, rows, n, log);
}

void softmax_bwd(const float* dy, const float* y, float* dx, int64_t rows, int64_t n, bool log) {
  RowOps<VecScalar>::softmax_bwd(dy, y, dx, rows, n, log);
}

void ce_stats(const float* x, int64_t rows, int64_t n, float* mx, double* se, double* sx) {
  RowOps<VecScalar>::ce_stats(x, rows, n, mx, se, sx);
}

void ce_grad(const float* x, float* dx, int64_t n, float lhi, float llo, float g, float off) {
  RowOps<VecScalar>::ce_grad(x, dx, n, lhi, llo, g, off);
}

}  // namespace attn::kernels::scalar

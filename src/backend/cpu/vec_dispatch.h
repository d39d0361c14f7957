// Row kernels for softmax, layer norm, GELU and cross-entropy (internal): one implementation per ISA
// (isa/softmax.cpp, layer_norm.cpp, gelu.cpp and cross_entropy.cpp, each compiled once per ISA from
// the templates in vec_kernels.h), and the table that picks one at run time from attn::active_isa().
//
//   const auto& k = attn::kernels::row_kernels();           // the active ISA's kernels
//   k.softmax_fwd(x + r0 * n, y + r0 * n, r1 - r0, n, /*log=*/false);
//
// Every kernel is f32, serial, over `rows` contiguous rows of length n (or C); the callers
// (src/ops/softmax.cpp, norm.cpp, fused.cpp, loss.cpp, backend/cpu/unary.cpp) split rows across
// threads.
// The ISA translation units define ATTN_KERNEL_TU and see only the declarations: nothing with
// external linkage is shared between code compiled for different ISAs.
#pragma once
#include <cstdint>

#include "attn/core/isa.h"
#ifndef ATTN_KERNEL_TU
#include <algorithm>
#include <vector>

#include "attn/core/parallel.h"
#endif

namespace attn::kernels {

#define ATTN_ROW_KERNEL_DECLS                                                                      \
  /* y = softmax(x) or log_softmax(x) of each row. */                                             \
  void softmax_fwd(const float* x, float* y, int64_t rows, int64_t n, bool log);                  \
  /* dx from dy and the saved output y. */                                                        \
  void softmax_bwd(const float* dy, const float* y, float* dx, int64_t rows, int64_t n, bool log); \
  /* s = x + r (r may be null: then s is unused and x is normalised), y = (s - mean) * rstd * w   \
     + b; mean and rstd per row. w and b are C floats (ones / zeros for no affine). */            \
  void layer_norm_fwd(const float* x, const float* r, const float* w, const float* b, float* s,  \
                      float* y, float* mean, float* rstd, int64_t rows, int64_t C, float eps);     \
  /* dx of each row; when dw_acc / db_acc are non-null adds dy * xhat and dy into them (C each). */ \
  void layer_norm_bwd(const float* dy, const float* x, const float* mean, const float* rstd,     \
                      const float* w, float* dx, float* dw_acc, float* db_acc, int64_t rows,      \
                      int64_t C);                                                                 \
  /* y = gelu(x + bias) over rows of length C; bias may be null. */                               \
  void gelu_fwd(const float* x, const float* bias, float* y, int64_t rows, int64_t C, bool tanh); \
  /* dx = dy * gelu'(x + bias); when db_acc is non-null adds dx into it (C floats). */            \
  void gelu_bwd(const float* dy, const float* x, const float* bias, float* dx, float* db_acc,     \
                int64_t rows, int64_t C, bool tanh);                                                \
  /* cross-entropy: per row its max, sum of exp(x - max) and (sx non-null) sum of x. */           \
  void ce_stats(const float* x, int64_t rows, int64_t n, float* mx, double* se, double* sx);      \
  /* cross-entropy gradient of one row: dx = g * (exp(x - (lhi + llo)) - off). */                 \
  void ce_grad(const float* x, float* dx, int64_t n, float lhi, float llo, float g, float off);

namespace scalar { ATTN_ROW_KERNEL_DECLS }
namespace avx2 { ATTN_ROW_KERNEL_DECLS }
namespace avx512 { ATTN_ROW_KERNEL_DECLS }
#undef ATTN_ROW_KERNEL_DECLS

struct RowKernels {
  decltype(&scalar::softmax_fwd) softmax_fwd;
  decltype(&scalar::softmax_bwd) softmax_bwd;
  decltype(&scalar::layer_norm_fwd) layer_norm_fwd;
  decltype(&scalar::layer_norm_bwd) layer_norm_bwd;
  decltype(&scalar::gelu_fwd) gelu_fwd;
  decltype(&scalar::gelu_bwd) gelu_bwd;
  decltype(&scalar::ce_stats) ce_stats;
  decltype(&scalar::ce_grad) ce_grad;
};

#ifndef ATTN_KERNEL_TU
// The kernels of one ISA (internal linkage: each caller has its own copy of this table).
static inline const RowKernels& row_kernels(Isa isa) {
#define ATTN_ROW_KERNEL_TABLE(ns) \
  {ns::softmax_fwd, ns::softmax_bwd, ns::layer_norm_fwd, ns::layer_norm_bwd, ns::gelu_fwd, ns::gelu_bwd, \
   ns::ce_stats, ns::ce_grad}
  static const RowKernels tables[3] = {ATTN_ROW_KERNEL_TABLE(scalar), ATTN_ROW_KERNEL_TABLE(avx2),
                                       ATTN_ROW_KERNEL_TABLE(avx512)};
#undef ATTN_ROW_KERNEL_TABLE
  return tables[int(isa)];
}
static inline const RowKernels& row_kernels() { return row_kernels(detail::dispatch_isa()); }

// Runs fn(r0, r1, acc) over [0, rows) in parallel. With `out` null, acc is null and the rows are
// split by parallel_for (at least `grain` rows a chunk). Otherwise the rows are cut into fixed
// blocks of kBlockRows (independent of the thread count, so the result is bit-identical at any
// thread count), fn gets a zeroed `acc` of ncols floats per block, and
// out[c] = sum over blocks of acc[c], summed in double in block order.
constexpr int64_t kBlockRows = 32;
template <class F>
void blocked_rows(int64_t rows, int64_t ncols, int64_t grain, float* out, F&& fn) {
  if (!out) {
    parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) { fn(r0, r1, static_cast<float*>(nullptr)); });
    return;
  }
  const int64_t nblocks = (rows + kBlockRows - 1) / kBlockRows;
  std::vector<float> part(size_t(nblocks * ncols), 0.f);
  parallel_for(0, nblocks, std::max<int64_t>(1, grain / kBlockRows), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      fn(b * kBlockRows, std::min(rows, (b + 1) * kBlockRows), part.data() + b * ncols);
  });
  parallel_for(0, ncols, 1024, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double s = 0;
      for (int64_t b = 0; b < nblocks; ++b) s += double(part[size_t(b * ncols + c)]);
      out[c] = float(s);
    }
  });
}
#endif

}  // namespace attn::kernels

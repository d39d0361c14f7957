// adam_step_: the bias corrections in double, then the fused element loop (backend/cpu/adam_kernels.h)
// over chunks of the parameter across threads.
#include "attn/ops/optim_step.h"

#include <algorithm>
#include <cmath>

#include "attn/core/isa.h"
#include "attn/core/parallel.h"
#include "../backend/cpu/adam_kernels.h"

namespace attn {

namespace {
void run_chunk(float* p, const float* g, float* m, float* v, float* vmax, int64_t n, const kernels::AdamScalars& s,
               bool avx2) {
  if (avx2) kernels::adam_f32_avx2(p, g, m, v, vmax, n, s);
  else kernels::adam_reference<float>(p, g, m, v, vmax, n, s);
}
void run_chunk(double* p, const double* g, double* m, double* v, double* vmax, int64_t n,
               const kernels::AdamScalars& s, bool) {
  kernels::adam_reference<double>(p, g, m, v, vmax, n, s);
}

void check_operand(const Tensor& param, const Tensor& t, const char* what, bool written) {
  ATTN_CHECK(t.defined(), "adam_step_: expected ", what, " of shape ", param.shape(), ", got an undefined tensor");
  ATTN_CHECK(t.shape() == param.shape() && t.dtype() == param.dtype(), "adam_step_: expected ", what,
             " of param's shape ", param.shape(), " and dtype ", dtype_name(param.dtype()), ", got ", t.shape(), " ",
             dtype_name(t.dtype()));
  ATTN_CHECK(!written || t.is_contiguous(), "adam_step_: ", what, " (updated in place) is not contiguous");
}
}  // namespace

void adam_step_(Tensor& param, const Tensor& grad_in, Tensor& exp_avg, Tensor& exp_avg_sq, Tensor* max_exp_avg_sq,
                const AdamStep& s) {
  ATTN_CHECK(param.defined() && param.is_contiguous(), "adam_step_: expected a defined, contiguous param");
  check_operand(param, grad_in, "grad", false);
  check_operand(param, exp_avg, "exp_avg", true);
  check_operand(param, exp_avg_sq, "exp_avg_sq", true);
  if (max_exp_avg_sq) check_operand(param, *max_exp_avg_sq, "max_exp_avg_sq", true);
  const Tensor grad = grad_in.contiguous();
  const double bias_correction1 = 1.0 - std::pow(s.beta1, s.step);
  const double bias_correction2 = 1.0 - std::pow(s.beta2, s.step);
  const double step_size = s.lr / bias_correction1;
  const kernels::AdamScalars sc{s.beta1, s.beta2, s.eps, s.weight_decay, 1.0 - s.lr * s.weight_decay,
                                std::sqrt(bias_correction2), -step_size, s.decoupled};
  const int64_t n = param.numel();
  const bool avx2 = param.dtype() == DType::f32 && active_isa() >= Isa::avx2;
  detail::note_kernel_path(avx2 ? KernelPath::avx2 : KernelPath::scalar);   // the AVX2 kernel on AVX-512 too
  ATTN_DISPATCH_FLOAT(param.dtype(), "adam_step_", [&] {
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    T* m = exp_avg.data<T>();
    T* v = exp_avg_sq.data<T>();
    T* vmax = max_exp_avg_sq ? max_exp_avg_sq->data<T>() : nullptr;
    // Chunks in whole blocks of 8, so the vector/tail split (and the result) does not depend on
    // the thread count.
    parallel_for(0, (n + 7) / 8, 2048, [&](int64_t b0, int64_t b1) {
      const int64_t i0 = b0 * 8, i1 = std::min(n, b1 * 8);
      run_chunk(p + i0, g + i0, m + i0, v + i0, vmax ? vmax + i0 : nullptr, i1 - i0, sc, avx2);
    });
  });
}

}  // namespace attn

// Internal: the fused Adam/AdamW element loop, a portable reference (any float type) and an AVX2 f32
// kernel (adam_avx2.cpp); src/ops/optim_step.cpp picks one at run time from attn::active_isa(). Same
// operation order as torch.optim (1.13): the AVX2 path fuses the multiply-adds (as torch's own
// vectorised add_ does), so it may differ from the reference in the last bit.
//
//   kernels::adam_reference<double>(p, g, m, v, /*vmax=*/nullptr, n, scalars);
#pragma once
#include <cmath>
#include <cstdint>

namespace attn::kernels {

struct AdamScalars {
  double beta1, beta2, eps, weight_decay;
  double decay;                   // 1 - lr * weight_decay (AdamW)
  double bias_correction2_sqrt;   // sqrt(1 - beta2^t)
  double neg_step_size;           // -lr / (1 - beta1^t)
  bool decoupled;                 // AdamW
};

// p, g, m, v (and vmax with amsgrad, else null) over elements [0, n).
template <class T>
void adam_reference(T* p, const T* g, T* m, T* v, T* vmax, int64_t n, const AdamScalars& s) {
  const T twd = T(s.weight_decay), decay = T(s.decay);
  const T b1 = T(s.beta1), one_b1 = T(1.0 - s.beta1), b2 = T(s.beta2), one_b2 = T(1.0 - s.beta2);
  const T bc2s = T(s.bias_correction2_sqrt), teps = T(s.eps), neg_step = T(s.neg_step_size);
  const bool l2 = !s.decoupled && s.weight_decay != 0.0;
  for (int64_t i = 0; i < n; ++i) {
    T gi = g[i];
    if (s.decoupled) p[i] = p[i] * decay;
    else if (l2) gi = gi + twd * p[i];
    m[i] = m[i] * b1 + one_b1 * gi;
    v[i] = v[i] * b2 + one_b2 * gi * gi;
    T vv = v[i];
    if (vmax) {   // torch.maximum: NaN from either side propagates
      const T mx = vmax[i];
      if (!(mx <= vv)) vv = (vv != vv) ? vv : mx;
      vmax[i] = vv;
    }
    const T denom = std::sqrt(vv) / bc2s + teps;
    p[i] = p[i] + neg_step * m[i] / denom;
  }
}

void adam_f32_avx2(float* p, const float* g, float* m, float* v, float* vmax, int64_t n, const AdamScalars& s);

}  // namespace attn::kernels

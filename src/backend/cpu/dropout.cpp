// Dropout's scalar kernels (see dropout_kernels.h): one philox4x32 call per group of 4 elements,
// the AVX2 kernel's reference and its tail.
#include "attn/core/rng.h"
#include "dropout_kernels.h"

namespace attn::kernels {

template <bool Relu, class T>
static void dropout_scalar_impl(const T* x, T* y, int64_t i0, int64_t i1, const DropoutStream& s, T scale) {
  for (int64_t g = i0 / 4; g * 4 < i1; ++g) {
    uint32_t r[4];
    philox4x32(s.seed, s.offset + uint64_t(g), r);
    for (int64_t l = 0; l < 4; ++l) {
      const int64_t i = g * 4 + l;
      if (i < i0) continue;
      if (i >= i1) break;
      T v = x[i];
      if constexpr (Relu) v = v > T(0) ? v : (v != v ? v : T(0));   // attn's relu
      y[i] = v * ((r[l] >> 8) >= s.threshold ? scale : T(0));
    }
  }
}

void dropout_scalar(const float* x, float* y, int64_t i0, int64_t i1, const DropoutStream& s, float scale, bool relu) {
  if (relu) dropout_scalar_impl<true>(x, y, i0, i1, s, scale);
  else dropout_scalar_impl<false>(x, y, i0, i1, s, scale);
}
void dropout_scalar(const double* x, double* y, int64_t i0, int64_t i1, const DropoutStream& s, double scale,
                    bool relu) {
  if (relu) dropout_scalar_impl<true>(x, y, i0, i1, s, scale);
  else dropout_scalar_impl<false>(x, y, i0, i1, s, scale);
}

template <class T>
static void relu_dropout_backward_impl(const T* y, const T* dy, T* dx, int64_t i0, int64_t i1, T scale) {
  for (int64_t i = i0; i < i1; ++i) dx[i] = y[i] > T(0) ? dy[i] * scale : T(0);
}
void relu_dropout_backward_scalar(const float* y, const float* dy, float* dx, int64_t i0, int64_t i1, float scale) {
  relu_dropout_backward_impl(y, dy, dx, i0, i1, scale);
}
void relu_dropout_backward_scalar(const double* y, const double* dy, double* dx, int64_t i0, int64_t i1,
                                  double scale) {
  relu_dropout_backward_impl(y, dy, dx, i0, i1, scale);
}

}  // namespace attn::kernels

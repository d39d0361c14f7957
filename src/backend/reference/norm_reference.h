// Naive reference kernels (the oracle) for softmax, log-softmax, layer norm and GELU, f32 and
// f64, computed in double with libm. The f64 ops run on them (gradient checks); the f32 fast
// kernels (backend/cpu/vec_kernels.h) are tested against them.
//
//   reference::softmax_forward<float>(x, y, outer, n, inner, /*log=*/false);
//
// Softmax works on a contiguous (outer, n, inner) layout, normalising over n; the rest on
// contiguous (rows, C) rows. Pointers documented "may be null" are optional.
#pragma once
#include <cstdint>

namespace attn::reference {

template <class T>
void softmax_forward(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool log);
// softmax: dx = y (dy - sum(dy y));  log_softmax: dx = dy - exp(y) sum(dy).
template <class T>
void softmax_backward(const T* dy, const T* y, T* dx, int64_t outer, int64_t n, int64_t inner, bool log);

// s = x + r (r may be null; s then unused), y = (s - mean) / sqrt(var + eps) * w + b with the
// biased variance; w, b may be null (1, 0). mean and rstd are written per row.
template <class T>
void layer_norm_forward(const T* x, const T* r, const T* w, const T* b, T* s, T* y, T* mean, T* rstd,
                        int64_t rows, int64_t C, double eps);
// dx (may be null), dw and db (totals over rows, may be null) from dy and the saved x, mean, rstd.
template <class T>
void layer_norm_backward(const T* dy, const T* x, const T* mean, const T* rstd, const T* w, T* dx, T* dw,
                         T* db, int64_t rows, int64_t C);

// y = gelu(x + bias) (bias of C, may be null), exact erf form or the tanh approximation.
template <class T>
void gelu_forward(const T* x, const T* bias, T* y, int64_t rows, int64_t C, bool tanh);
// dx = dy gelu'(x + bias); dbias (may be null) = column sums of dx.
template <class T>
void gelu_backward(const T* dy, const T* x, const T* bias, T* dx, T* dbias, int64_t rows, int64_t C, bool tanh);

}  // namespace attn::reference

// Naive reference kernels for softmax, layer norm and GELU (see norm_reference.h). Rows are
// independent, so they run in parallel; column sums (dw, db, dbias) are serial, in row order.
#include "norm_reference.h"

#include <cmath>
#include <limits>
#include <vector>

#include "attn/core/parallel.h"

namespace attn::reference {

namespace {
int64_t grain_for(int64_t per_row) { return std::max<int64_t>(1, 8192 / std::max<int64_t>(per_row, 1)); }

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588;

double gelu_value(double v, bool tanh) {
  if (tanh) return 0.5 * v * (1.0 + std::tanh(kSqrt2OverPi * (v + 0.044715 * v * v * v)));
  return 0.5 * v * std::erfc(-v * kInvSqrt2);
}

double gelu_derivative(double v, bool tanh) {
  if (tanh) {
    const double v2 = v * v;
    const double t = std::tanh(kSqrt2OverPi * (v + 0.044715 * v2 * v));
    return 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3 * 0.044715 * v2);
  }
  return 0.5 * std::erfc(-v * kInvSqrt2) + v * kInvSqrt2Pi * std::exp(-0.5 * v * v);
}
}  // namespace

template <class T>
void softmax_forward(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool log) {
  parallel_for(0, outer * inner, grain_for(n), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const int64_t o = k / inner, i = k % inner;
      const T* xp = x + o * n * inner + i;
      T* yp = y + o * n * inner + i;
      // max; NaN anywhere makes the row NaN (as x - max below does in PyTorch).
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < n; ++j) {
        const double v = double(xp[j * inner]);
        if (v != v || v > mx) mx = v;
        if (v != v) break;
      }
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(double(xp[j * inner]) - mx);
      if (log) {
        const double ls = std::log(sum);
        for (int64_t j = 0; j < n; ++j) yp[j * inner] = T((double(xp[j * inner]) - mx) - ls);
      } else {
        for (int64_t j = 0; j < n; ++j) yp[j * inner] = T(std::exp(double(xp[j * inner]) - mx) / sum);
      }
    }
  });
}

template <class T>
void softmax_backward(const T* dy, const T* y, T* dx, int64_t outer, int64_t n, int64_t inner, bool log) {
  parallel_for(0, outer * inner, grain_for(n), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const int64_t o = k / inner, i = k % inner;
      const int64_t base = o * n * inner + i;
      double s = 0;
      for (int64_t j = 0; j < n; ++j) {
        const int64_t p = base + j * inner;
        s += log ? double(dy[p]) : double(dy[p]) * double(y[p]);
      }
      for (int64_t j = 0; j < n; ++j) {
        const int64_t p = base + j * inner;
        dx[p] = log ? T(double(dy[p]) - std::exp(double(y[p])) * s) : T(double(y[p]) * (double(dy[p]) - s));
      }
    }
  });
}

template <class T>
void layer_norm_forward(const T* x, const T* r, const T* w, const T* b, T* s, T* y, T* mean, T* rstd,
                        int64_t rows, int64_t C, double eps) {
  parallel_for(0, rows, grain_for(C), [&](int64_t r0, int64_t r1) {
    std::vector<double> v(static_cast<size_t>(C));
    for (int64_t row = r0; row < r1; ++row) {
      double sum = 0;
      for (int64_t c = 0; c < C; ++c) {
        const int64_t p = row * C + c;
        v[size_t(c)] = r ? double(T(x[p] + r[p])) : double(x[p]);   // s rounded to T, as stored
        if (r) s[p] = T(x[p] + r[p]);
        sum += v[size_t(c)];
      }
      const double mu = sum / double(C);
      double ss = 0;
      for (int64_t c = 0; c < C; ++c) ss += (v[size_t(c)] - mu) * (v[size_t(c)] - mu);
      const double rs = 1.0 / std::sqrt(ss / double(C) + eps);
      mean[row] = T(mu);
      rstd[row] = T(rs);
      for (int64_t c = 0; c < C; ++c) {
        double o = (v[size_t(c)] - mu) * rs;
        if (w) o *= double(w[c]);
        if (b) o += double(b[c]);
        y[row * C + c] = T(o);
      }
    }
  });
}

template <class T>
void layer_norm_backward(const T* dy, const T* x, const T* mean, const T* rstd, const T* w, T* dx, T* dw,
                         T* db, int64_t rows, int64_t C) {
  if (dx) {
    parallel_for(0, rows, grain_for(C), [&](int64_t r0, int64_t r1) {
      for (int64_t row = r0; row < r1; ++row) {
        const double mu = double(mean[row]), rs = double(rstd[row]);
        double a = 0, bsum = 0;
        for (int64_t c = 0; c < C; ++c) {
          const int64_t p = row * C + c;
          const double gw = double(dy[p]) * (w ? double(w[c]) : 1.0);
          a += gw;
          bsum += gw * (double(x[p]) - mu) * rs;
        }
        a /= double(C);
        bsum /= double(C);
        for (int64_t c = 0; c < C; ++c) {
          const int64_t p = row * C + c;
          const double gw = double(dy[p]) * (w ? double(w[c]) : 1.0);
          const double xh = (double(x[p]) - mu) * rs;
          dx[p] = T(rs * (gw - a - xh * bsum));
        }
      }
    });
  }
  if (dw || db) {
    std::vector<double> sw(size_t(C), 0.0), sb(size_t(C), 0.0);
    for (int64_t row = 0; row < rows; ++row) {
      const double mu = double(mean[row]), rs = double(rstd[row]);
      for (int64_t c = 0; c < C; ++c) {
        const int64_t p = row * C + c;
        sw[size_t(c)] += double(dy[p]) * (double(x[p]) - mu) * rs;
        sb[size_t(c)] += double(dy[p]);
      }
    }
    for (int64_t c = 0; c < C; ++c) {
      if (dw) dw[c] = T(sw[size_t(c)]);
      if (db) db[c] = T(sb[size_t(c)]);
    }
  }
}

template <class T>
void gelu_forward(const T* x, const T* bias, T* y, int64_t rows, int64_t C, bool tanh) {
  parallel_for(0, rows * C, 4096, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const double v = bias ? double(T(x[p] + bias[p % C])) : double(x[p]);
      y[p] = T(gelu_value(v, tanh));
    }
  });
}

template <class T>
void gelu_backward(const T* dy, const T* x, const T* bias, T* dx, T* dbias, int64_t rows, int64_t C, bool tanh) {
  parallel_for(0, rows * C, 4096, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const double v = bias ? double(T(x[p] + bias[p % C])) : double(x[p]);
      dx[p] = T(double(dy[p]) * gelu_derivative(v, tanh));
    }
  });
  if (dbias) {
    std::vector<double> s(size_t(C), 0.0);
    for (int64_t row = 0; row < rows; ++row)
      for (int64_t c = 0; c < C; ++c) s[size_t(c)] += double(dx[row * C + c]);
    for (int64_t c = 0; c < C; ++c) dbias[c] = T(s[size_t(c)]);
  }
}

#define ATTN_INSTANTIATE(T)                                                                          \
  template void softmax_forward<T>(const T*, T*, int64_t, int64_t, int64_t, bool);                  \
  template void softmax_backward<T>(const T*, const T*, T*, int64_t, int64_t, int64_t, bool);       \
  template void layer_norm_forward<T>(const T*, const T*, const T*, const T*, T*, T*, T*, T*, int64_t, \
                                      int64_t, double);                                             \
  template void layer_norm_backward<T>(const T*, const T*, const T*, const T*, const T*, T*, T*, T*,  \
                                       int64_t, int64_t);                                           \
  template void gelu_forward<T>(const T*, const T*, T*, int64_t, int64_t, bool);                    \
  template void gelu_backward<T>(const T*, const T*, const T*, T*, T*, int64_t, int64_t, bool);
ATTN_INSTANTIATE(float)
ATTN_INSTANTIATE(double)
#undef ATTN_INSTANTIATE

}  // namespace attn::reference

// batch_norm forward and backward (train and eval), f32 and f64. x is handled as (N, C, S)
// contiguous; per-channel statistics accumulate in double, the channels split among the threads.
//
// Tokens, (N, C) with S == 1 (a Transformer's BatchNorm over its tokens), keep a channel's values C
// apart: read one channel at a time, every value is a cache line of its own. There each thread walks
// the rows once for its whole range of channels instead, and each channel still adds its values one
// at a time in row order, which is what the row_* sums do for rows of length 1: the same bits as the
// channel-at-a-time walk, read contiguously.
#include "attn/ops/batch_norm.h"

#include <cmath>

#include "attn/autograd/grad_mode.h"
#include "attn/autograd/node.h"
#include "attn/core/parallel.h"

namespace attn {

namespace {

struct BnGeo {
  int64_t N = 0, C = 0, S = 1;
  int64_t count() const { return N * S; }
};

// Σ p[i] and Σ (p[i] - shift)² over a row, in double with independent partial sums.
template <class T>
inline void row_sum(const T* p, int64_t n, double& s) {
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a0 += double(p[i]); a1 += double(p[i + 1]); a2 += double(p[i + 2]); a3 += double(p[i + 3]);
  }
  for (; i < n; ++i) a0 += double(p[i]);
  s += (a0 + a1) + (a2 + a3);
}
template <class T>
inline void row_sq_dev(const T* p, int64_t n, double m, double& s) {
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const double d0 = double(p[i]) - m, d1 = double(p[i + 1]) - m, d2 = double(p[i + 2]) - m,
                 d3 = double(p[i + 3]) - m;
    a0 += d0 * d0; a1 += d1 * d1; a2 += d2 * d2; a3 += d3 * d3;
  }
  for (; i < n; ++i) { const double d = double(p[i]) - m; a0 += d * d; }
  s += (a0 + a1) + (a2 + a3);
}
// Σ g[i] and Σ g[i] (x[i] - m).
template <class T>
inline void row_grad_sums(const T* g, const T* x, int64_t n, double m, double& sg, double& sgx) {
  double a0 = 0, a1 = 0, b0 = 0, b1 = 0;
  int64_t i = 0;
  for (; i + 2 <= n; i += 2) {
    a0 += double(g[i]); a1 += double(g[i + 1]);
    b0 += double(g[i]) * (double(x[i]) - m); b1 += double(g[i + 1]) * (double(x[i + 1]) - m);
  }
  for (; i < n; ++i) { a0 += double(g[i]); b0 += double(g[i]) * (double(x[i]) - m); }
  sg += a0 + a1;
  sgx += b0 + b1;
}

// The per-channel sums over the channels [c0, c1): s[c] += Σ x, q[c] += Σ (x - m[c])², and
// sg[c] += Σ g, sgx[c] += Σ g (x - m[c]); each channel's values in (n, s) order.
template <class T>
void channel_sums(const T* x, const BnGeo& g, int64_t c0, int64_t c1, double* s) {
  if (g.S == 1) {
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t c = c0; c < c1; ++c) s[c] += double(x[n * g.C + c]);
    return;
  }
  for (int64_t c = c0; c < c1; ++c)
    for (int64_t n = 0; n < g.N; ++n) row_sum<T>(x + (n * g.C + c) * g.S, g.S, s[c]);
}
template <class T>
void channel_sq_devs(const T* x, const BnGeo& g, int64_t c0, int64_t c1, const double* m, double* q) {
  if (g.S == 1) {
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t c = c0; c < c1; ++c) {
        const double d = double(x[n * g.C + c]) - m[c];
        q[c] += d * d;
      }
    return;
  }
  for (int64_t c = c0; c < c1; ++c)
    for (int64_t n = 0; n < g.N; ++n) row_sq_dev<T>(x + (n * g.C + c) * g.S, g.S, m[c], q[c]);
}
template <class T>
void channel_grad_sums(const T* gr, const T* x, const BnGeo& g, int64_t c0, int64_t c1, const double* m, double* sg,
                       double* sgx) {
  if (g.S == 1) {
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t i = n * g.C + c;
        sg[c] += double(gr[i]);
        sgx[c] += double(gr[i]) * (double(x[i]) - m[c]);
      }
    return;
  }
  for (int64_t c = c0; c < c1; ++c)
    for (int64_t n = 0; n < g.N; ++n) {
      const int64_t off = (n * g.C + c) * g.S;
      row_grad_sums<T>(gr + off, x + off, g.S, m[c], sg[c], sgx[c]);
    }
}

// Per channel over [c0, c1): y = x a[c] + b[c].
template <class T>
void channel_affine(const T* x, T* y, const BnGeo& g, int64_t c0, int64_t c1, const T* a, const T* b) {
  if (g.S == 1) {
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t c = c0; c < c1; ++c) y[n * g.C + c] = x[n * g.C + c] * a[c] + b[c];
    return;
  }
  for (int64_t c = c0; c < c1; ++c)
    for (int64_t n = 0; n < g.N; ++n) {
      const int64_t off = (n * g.C + c) * g.S;
      for (int64_t i = 0; i < g.S; ++i) y[off + i] = x[off + i] * a[c] + b[c];
    }
}
// Per channel over [c0, c1): dx = a[c] g + b[c] x + k[c] (training), or a[c] g (eval).
template <class T>
void channel_dx(const T* gr, const T* x, T* dx, const BnGeo& g, int64_t c0, int64_t c1, const T* a, const T* b,
                const T* k, bool training) {
  // One run of len values of channel c from off (a row of S values, or one token's channel).
  auto run = [&](int64_t off, int64_t len, int64_t c) {
    if (training)
      for (int64_t i = off; i < off + len; ++i) dx[i] = a[c] * gr[i] + b[c] * x[i] + k[c];
    else
      for (int64_t i = off; i < off + len; ++i) dx[i] = a[c] * gr[i];
  };
  if (g.S != 1) {
    for (int64_t c = c0; c < c1; ++c)
      for (int64_t n = 0; n < g.N; ++n) run((n * g.C + c) * g.S, g.S, c);
    return;
  }
  for (int64_t n = 0; n < g.N; ++n) {
    const int64_t r = n * g.C;
    if (training)
      for (int64_t c = c0; c < c1; ++c) dx[r + c] = a[c] * gr[r + c] + b[c] * x[r + c] + k[c];
    else
      for (int64_t c = c0; c < c1; ++c) dx[r + c] = a[c] * gr[r + c];
  }
}

// Channels per walk: tokens take the thread's whole range at once, other layouts one channel at a
// time (its values stay in cache from the sums to the writes).
inline int64_t channel_step(const BnGeo& g, int64_t c0, int64_t c1) { return g.S == 1 ? c1 - c0 : 1; }

std::vector<double> param_or(const Tensor& t, int64_t C, double fill) {
  return t.defined() ? t.detach().to_vector<double>() : std::vector<double>(size_t(C), fill);
}

thread_local BatchNormSync t_sync;

struct BatchNormNode : autograd::Node {
  Tensor x;                          // (N, C, S) contiguous, detached
  std::vector<double> mean, invstd, w;
  BnGeo g;
  BatchNormSync sync;                // synchronized: the sums over processes
  double total = 0;                  // synchronized: the combined batch's count per channel
  bool training = true, has_weight = false, has_bias = false;
  Shape x_shape;
  const char* name() const override { return "batch_norm"; }
  std::vector<Tensor> backward(const Tensor& dout_in) override {
    Tensor dout = dout_in.contiguous();
    const bool want_x = next[0].fn || next[0].leaf;
    Tensor dx = want_x ? Tensor::empty(x_shape, x.dtype()) : Tensor();
    std::vector<double> sg(size_t(g.C), 0.0), sgx(size_t(g.C), 0.0);
    // Synchronized: dx needs the per-channel sums over the combined batch, computed first.
    std::vector<double> all;
    if (sync && training) {
      all.assign(size_t(2 * g.C), 0.0);
      ATTN_DISPATCH_FLOAT(x.dtype(), "batch_norm", [&] {
        const T* xp = x.data<T>();
        const T* gp = dout.data<T>();
        parallel_for(0, g.C, 1, [&](int64_t c0, int64_t c1) {
          channel_grad_sums<T>(gp, xp, g, c0, c1, mean.data(), all.data(), all.data() + g.C);
        });
      });
      sync(all.data(), int64_t(all.size()));
    }
    ATTN_DISPATCH_FLOAT(x.dtype(), "batch_norm", [&] {
      const T* xp = x.data<T>();
      const T* gp = dout.data<T>();
      T* dp = want_x ? dx.data<T>() : nullptr;
      std::vector<T> ta(size_t(g.C)), tb(size_t(g.C)), tc(size_t(g.C));
      parallel_for(0, g.C, 1, [&](int64_t c0, int64_t c1) {
        const int64_t step = channel_step(g, c0, c1);
        for (int64_t a = c0; a < c1; a += step) {
          const int64_t e = a + step;
          channel_grad_sums<T>(gp, xp, g, a, e, mean.data(), sg.data(), sgx.data());
          if (!dp) continue;
          // dx = a g + b x + k: train  k w is (g - mean(g) - xhat mean(g xhat));  eval  w is g.
          for (int64_t c = a; c < e; ++c) {
            const double m = mean[size_t(c)], is = invstd[size_t(c)];
            const double k = w[size_t(c)] * is;
            double ca = k, cb = 0, cc = 0;
            if (training) {
              const double M = all.empty() ? double(g.count()) : total;
              const double S_g = all.empty() ? sg[size_t(c)] : all[size_t(c)];
              const double S_gx = all.empty() ? sgx[size_t(c)] : all[size_t(g.C + c)];
              const double c2 = k * is * is * S_gx / M;
              cb = -c2;
              cc = -k * S_g / M + m * c2;
            }
            ta[size_t(c)] = T(ca); tb[size_t(c)] = T(cb); tc[size_t(c)] = T(cc);
          }
          channel_dx<T>(gp, xp, dp, g, a, e, ta.data(), tb.data(), tc.data(), training);
        }
      });
    });
    std::vector<Tensor> out{dx};
    if (has_weight) {
      std::vector<double> dw(size_t(g.C));
      for (int64_t c = 0; c < g.C; ++c) dw[size_t(c)] = sgx[size_t(c)] * invstd[size_t(c)];
      Tensor t = Tensor::from_vector<double>(dw, {g.C});
      out.push_back(x.dtype() == DType::f64 ? t : t.to(x.dtype()));
    }
    if (has_bias) {
      Tensor t = Tensor::from_vector<double>(sg, {g.C});
      out.push_back(x.dtype() == DType::f64 ? t : t.to(x.dtype()));
    }
    return out;
  }
  void release() override { x = Tensor(); }
};

void check_param(const Tensor& t, const char* what, int64_t C, DType dt, bool same_dtype) {
  if (!t.defined()) return;
  ATTN_CHECK(t.dim() == 1 && t.shape()[0] == C, "batch_norm: expected ", what, " of shape [", C, "], got ", t.shape());
  if (same_dtype)
    ATTN_CHECK(t.dtype() == dt, "batch_norm: input is ", dtype_name(dt), " but ", what, " is ", dtype_name(t.dtype()));
  else
    ATTN_CHECK(is_floating(t.dtype()), "batch_norm: expected a floating ", what, ", got ", dtype_name(t.dtype()));
}

}  // namespace

void set_batch_norm_sync(BatchNormSync sum) { t_sync = std::move(sum); }
const BatchNormSync& batch_norm_sync() { return t_sync; }

Tensor batch_norm(const Tensor& x, Tensor running_mean, Tensor running_var, const Tensor& weight, const Tensor& bias,
                  bool training, double momentum, double eps) {
  ATTN_CHECK(x.defined(), "batch_norm: expected a defined input");
  ATTN_CHECK(x.dim() >= 2, "batch_norm: expected input with at least 2 dims (N, C, ...), got shape ", x.shape());
  ATTN_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, "batch_norm: expected a f32 or f64 input, got ",
             dtype_name(x.dtype()));
  BnGeo g;
  g.N = x.shape()[0];
  g.C = x.shape()[1];
  for (int64_t d = 2; d < x.dim(); ++d) g.S *= x.shape()[d];
  check_param(weight, "weight", g.C, x.dtype(), true);
  check_param(bias, "bias", g.C, x.dtype(), true);
  check_param(running_mean, "running_mean", g.C, x.dtype(), false);
  check_param(running_var, "running_var", g.C, x.dtype(), false);
  ATTN_CHECK(running_mean.defined() == running_var.defined(),
             "batch_norm: expected running_mean and running_var both defined or both undefined");
  ATTN_CHECK(training || running_mean.defined(), "batch_norm: running_mean and running_var are required in eval mode");
  ATTN_CHECK(!training || g.count() > 1, "batch_norm: expected more than 1 value per channel when training, got input shape ",
             x.shape());
  ATTN_CHECK(eps >= 0, "batch_norm: expected eps >= 0, got ", eps);

  Tensor xc = x.detach().contiguous();
  std::vector<double> mean(size_t(g.C)), var(size_t(g.C)), invstd(size_t(g.C));
  const std::vector<double> w = param_or(weight, g.C, 1.0), b = param_or(bias, g.C, 0.0);
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  // Synchronized: the mean and the variance of the combined batch, in two sums over the processes
  // (per-channel sums and the count, then squared deviations from the combined mean).
  const BatchNormSync sync = training ? t_sync : BatchNormSync();
  double total = double(g.count());
  if (sync) {
    std::vector<double> s(size_t(g.C + 1), 0.0);
    ATTN_DISPATCH_FLOAT(x.dtype(), "batch_norm", [&] {
      const T* xp = xc.data<T>();
      parallel_for(0, g.C, 1, [&](int64_t c0, int64_t c1) { channel_sums<T>(xp, g, c0, c1, s.data()); });
    });
    s[size_t(g.C)] = total;
    sync(s.data(), int64_t(s.size()));
    total = s[size_t(g.C)];
    std::vector<double> q(size_t(g.C), 0.0);
    for (int64_t c = 0; c < g.C; ++c) mean[size_t(c)] = s[size_t(c)] / total;
    ATTN_DISPATCH_FLOAT(x.dtype(), "batch_norm", [&] {
      const T* xp = xc.data<T>();
      parallel_for(0, g.C, 1,
                   [&](int64_t c0, int64_t c1) { channel_sq_devs<T>(xp, g, c0, c1, mean.data(), q.data()); });
    });
    sync(q.data(), g.C);
    for (int64_t c = 0; c < g.C; ++c) var[size_t(c)] = q[size_t(c)] / total;
  }
  if (!training) { mean = running_mean.detach().to_vector<double>(); var = running_var.detach().to_vector<double>(); }
  const bool batch_stats = training && !sync;   // else mean and var hold the statistics to use
  ATTN_DISPATCH_FLOAT(x.dtype(), "batch_norm", [&] {
    const T* xp = xc.data<T>();
    T* yp = out.data<T>();
    std::vector<T> scale(size_t(g.C)), shift(size_t(g.C));
    parallel_for(0, g.C, 1, [&](int64_t c0, int64_t c1) {
      const int64_t step = channel_step(g, c0, c1);
      for (int64_t a = c0; a < c1; a += step) {
        const int64_t e = a + step;
        if (batch_stats) {
          channel_sums<T>(xp, g, a, e, mean.data());
          for (int64_t c = a; c < e; ++c) mean[size_t(c)] /= double(g.count());
          channel_sq_devs<T>(xp, g, a, e, mean.data(), var.data());
          for (int64_t c = a; c < e; ++c) var[size_t(c)] /= double(g.count());
        }
        for (int64_t c = a; c < e; ++c) {
          const double is = 1.0 / std::sqrt(var[size_t(c)] + eps);
          invstd[size_t(c)] = is;
          scale[size_t(c)] = T(w[size_t(c)] * is);
          shift[size_t(c)] = T(b[size_t(c)] - mean[size_t(c)] * w[size_t(c)] * is);
        }
        channel_affine<T>(xp, yp, g, a, e, scale.data(), shift.data());
      }
    });
  });
  if (training && running_mean.defined()) {
    std::vector<double> rm = running_mean.detach().to_vector<double>(), rv = running_var.detach().to_vector<double>();
    const double unbias = total / (total - 1);
    for (int64_t c = 0; c < g.C; ++c) {
      rm[size_t(c)] = (1 - momentum) * rm[size_t(c)] + momentum * mean[size_t(c)];
      rv[size_t(c)] = (1 - momentum) * rv[size_t(c)] + momentum * var[size_t(c)] * unbias;
    }
    running_mean.copy_(Tensor::from_vector<double>(rm, {g.C}));
    running_var.copy_(Tensor::from_vector<double>(rv, {g.C}));
  }
  std::vector<Tensor> ins{x};
  if (weight.defined()) ins.push_back(weight);
  if (bias.defined()) ins.push_back(bias);
  if (autograd::needs_grad(ins)) {
    auto n = std::make_shared<BatchNormNode>();
    n->x = xc; n->mean = mean; n->invstd = invstd; n->w = w; n->g = g; n->training = training;
    n->has_weight = weight.defined(); n->has_bias = bias.defined(); n->x_shape = x.shape();
    n->sync = sync;
    n->total = total;
    autograd::attach(out, n, ins);
  }
  return out;
}

}  // namespace attn

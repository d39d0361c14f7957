// Naive conv2d forward and backward in double: the oracle for the fast paths.
#include "conv_reference.h"

#include "attn/core/parallel.h"

namespace attn::reference {

namespace {
Tensor as_f64(const Tensor& t) { return t.detach().to(DType::f64).contiguous(); }
}  // namespace

Tensor conv2d_forward_naive(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in,
                            const kernels::ConvParams& p) {
  Tensor x = as_f64(x_in), w = as_f64(w_in);
  Tensor b = b_in.defined() ? as_f64(b_in) : Tensor();
  Tensor y = Tensor::empty({p.N, p.O, p.Ho, p.Wo}, DType::f64);
  const double* xp = x.data<double>();
  const double* wp = w.data<double>();
  const double* bp = b.defined() ? b.data<double>() : nullptr;
  double* yp = y.data<double>();
  const int64_t Cg = p.Cg(), Og = p.Og();
  parallel_for(0, p.N * p.O, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / p.O, o = r % p.O, g = o / Og;
      for (int64_t oy = 0; oy < p.Ho; ++oy)
        for (int64_t ox = 0; ox < p.Wo; ++ox) {
          double acc = bp ? bp[o] : 0.0;
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t ky = 0; ky < p.kh; ++ky) {
              const int64_t iy = oy * p.sh - p.ph + ky * p.dh;
              if (iy < 0 || iy >= p.H) continue;
              for (int64_t kx = 0; kx < p.kw; ++kx) {
                const int64_t ix = ox * p.sw - p.pw + kx * p.dw;
                if (ix < 0 || ix >= p.W) continue;
                acc += xp[((n * p.C + g * Cg + ci) * p.H + iy) * p.W + ix] *
                       wp[((o * Cg + ci) * p.kh + ky) * p.kw + kx];
              }
            }
          yp[((n * p.O + o) * p.Ho + oy) * p.Wo + ox] = acc;
        }
    }
  });
  return y.to(x_in.dtype());
}

Tensor conv2d_backward_input_naive(const Tensor& dout_in, const Tensor& w_in, const kernels::ConvParams& p) {
  Tensor dout = as_f64(dout_in), w = as_f64(w_in);
  Tensor dx = Tensor::zeros({p.N, p.C, p.H, p.W}, DType::f64);
  const double* gp = dout.data<double>();
  const double* wp = w.data<double>();
  double* dp = dx.data<double>();
  const int64_t Cg = p.Cg(), Og = p.Og();
  // One (n, c) input plane per task: every write to it comes from this task.
  parallel_for(0, p.N * p.C, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / p.C, c = r % p.C, g = c / Cg, ci = c % Cg;
      double* plane = dp + r * p.H * p.W;
      for (int64_t og = 0; og < Og; ++og) {
        const int64_t o = g * Og + og;
        for (int64_t oy = 0; oy < p.Ho; ++oy)
          for (int64_t ox = 0; ox < p.Wo; ++ox) {
            const double gv = gp[((n * p.O + o) * p.Ho + oy) * p.Wo + ox];
            for (int64_t ky = 0; ky < p.kh; ++ky) {
              const int64_t iy = oy * p.sh - p.ph + ky * p.dh;
              if (iy < 0 || iy >= p.H) continue;
              for (int64_t kx = 0; kx < p.kw; ++kx) {
                const int64_t ix = ox * p.sw - p.pw + kx * p.dw;
                if (ix < 0 || ix >= p.W) continue;
                plane[iy * p.W + ix] += gv * wp[((o * Cg + ci) * p.kh + ky) * p.kw + kx];
              }
            }
          }
      }
    }
  });
  return dx.to(dout_in.dtype());
}

Tensor conv2d_backward_weight_naive(const Tensor& dout_in, const Tensor& x_in, const kernels::ConvParams& p) {
  Tensor dout = as_f64(dout_in), x = as_f64(x_in);
  const int64_t Cg = p.Cg(), Og = p.Og();
  Tensor dw = Tensor::zeros({p.O, Cg, p.kh, p.kw}, DType::f64);
  const double* gp = dout.data<double>();
  const double* xp = x.data<double>();
  double* dp = dw.data<double>();
  parallel_for(0, p.O, 1, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      const int64_t g = o / Og;
      for (int64_t ci = 0; ci < Cg; ++ci)
        for (int64_t ky = 0; ky < p.kh; ++ky)
          for (int64_t kx = 0; kx < p.kw; ++kx) {
            double acc = 0;
            for (int64_t n = 0; n < p.N; ++n)
              for (int64_t oy = 0; oy < p.Ho; ++oy) {
                const int64_t iy = oy * p.sh - p.ph + ky * p.dh;
                if (iy < 0 || iy >= p.H) continue;
                for (int64_t ox = 0; ox < p.Wo; ++ox) {
                  const int64_t ix = ox * p.sw - p.pw + kx * p.dw;
                  if (ix < 0 || ix >= p.W) continue;
                  acc += gp[((n * p.O + o) * p.Ho + oy) * p.Wo + ox] *
                         xp[((n * p.C + g * Cg + ci) * p.H + iy) * p.W + ix];
                }
              }
            dp[((o * Cg + ci) * p.kh + ky) * p.kw + kx] = acc;
          }
    }
  });
  return dw.to(dout_in.dtype());
}

}  // namespace attn::reference

// max_pool2d, avg_pool2d, adaptive_avg_pool2d: forward and backward over (planes, H, W), one
// plane per task. Index formulas follow torch's CPU kernels (ceil_mode=False).
#include "attn/ops/pool.h"

#include <cmath>
#include <limits>

#include "attn/autograd/grad_mode.h"
#include "attn/autograd/node.h"
#include "attn/core/parallel.h"

namespace attn {

namespace {

Shape pair_shape(Pair p) { return {p[0], p[1]}; }

// Input viewed as (planes, H, W); the output has the input's leading dims and (Ho, Wo).
struct PoolGeo {
  Shape in_shape, out_shape;
  int64_t planes = 0, H = 0, W = 0, Ho = 0, Wo = 0;
  int64_t kh = 0, kw = 0, sh = 0, sw = 0, ph = 0, pw = 0;
};

PoolGeo plane_geo(const Tensor& x, const char* op) {
  ATTN_CHECK(x.defined(), op, ": expected a defined input");
  ATTN_CHECK(x.dim() == 3 || x.dim() == 4, op, ": expected input with 3 dims (C, H, W) or 4 dims (N, C, H, W), got shape ",
             x.shape());
  ATTN_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, op, ": expected a f32 or f64 input, got ",
             dtype_name(x.dtype()));
  PoolGeo g;
  g.in_shape = x.shape();
  g.H = x.size(-2);
  g.W = x.size(-1);
  g.planes = 1;
  for (int64_t d = 0; d < x.dim() - 2; ++d) g.planes *= x.shape()[d];
  ATTN_CHECK(g.H > 0 && g.W > 0, op, ": expected non-empty spatial dims, got shape ", x.shape());
  return g;
}

PoolGeo window_geo(const Tensor& x, Pair kernel, Pair stride, Pair padding, const char* op) {
  PoolGeo g = plane_geo(x, op);
  if (stride[0] == 0 && stride[1] == 0) stride = kernel;
  ATTN_CHECK(kernel[0] >= 1 && kernel[1] >= 1, op, ": expected kernel >= 1, got ", pair_shape(kernel));
  ATTN_CHECK(stride[0] >= 1 && stride[1] >= 1, op, ": expected stride >= 1 (or {0, 0} for the kernel size), got ",
             pair_shape(stride));
  ATTN_CHECK(padding[0] >= 0 && padding[1] >= 0 && 2 * padding[0] <= kernel[0] && 2 * padding[1] <= kernel[1], op,
             ": expected padding between 0 and half the kernel size, got padding ", pair_shape(padding),
             " for kernel ", pair_shape(kernel));
  g.kh = kernel[0]; g.kw = kernel[1];
  g.sh = stride[0]; g.sw = stride[1];
  g.ph = padding[0]; g.pw = padding[1];
  const int64_t hp = g.H + 2 * g.ph, wp = g.W + 2 * g.pw;
  ATTN_CHECK(g.kh <= hp && g.kw <= wp, op, ": kernel ", pair_shape(kernel), " is larger than the padded input ",
             Shape{hp, wp}, " (input shape ", x.shape(), ", padding ", pair_shape(padding), ")");
  g.Ho = (hp - g.kh) / g.sh + 1;
  g.Wo = (wp - g.kw) / g.sw + 1;
  g.out_shape = g.in_shape;
  g.out_shape[g.out_shape.size() - 2] = g.Ho;
  g.out_shape.back() = g.Wo;
  return g;
}

// ---------------------------------------------------------------- max
// One step of the window scan: v at index i replaces (best, bi) when v > best or v is NaN (the
// last NaN wins, as torch). Done with masks: the compare is unpredictable, and a branch on it costs
// more than the whole scan.
template <class T>
inline void max_step(T v, int64_t i, T& best, int64_t& bi) {
  const bool take = (v > best) | (v != v);
  const int64_t m = -int64_t(take);
  bi = (bi & ~m) | (i & m);
  best = take ? v : best;
}

// Output columns [ox0, ox1) of row oy whose windows lie inside the input: no clipping. Starting
// from the window's first element is the same as torch's start from -inf at that index.
template <class T, int KH, int KW>
void max_row_interior(const T* xp, T* yp, int64_t* ip, const PoolGeo& g, int64_t oy, int64_t ox0, int64_t ox1) {
  const int64_t kh = KH ? KH : g.kh, kw = KW ? KW : g.kw;
  const int64_t row0 = (oy * g.sh - g.ph) * g.W;
  for (int64_t ox = ox0; ox < ox1; ++ox) {
    const int64_t base = row0 + ox * g.sw - g.pw;
    T best = xp[base];
    int64_t bi = base;
    for (int64_t ky = 0; ky < kh; ++ky)
      for (int64_t kx = (ky == 0 ? 1 : 0); kx < kw; ++kx) {
        const int64_t i = base + ky * g.W + kx;
        max_step(xp[i], i, best, bi);
      }
    yp[oy * g.Wo + ox] = best;
    ip[oy * g.Wo + ox] = bi;
  }
}

// Any window, clipped to the input (padding): torch's loop, from -inf at the first in-range index.
template <class T>
void max_one_clipped(const T* xp, T* yp, int64_t* ip, const PoolGeo& g, int64_t oy, int64_t ox) {
  const int64_t y0 = std::max<int64_t>(oy * g.sh - g.ph, 0), y1 = std::min<int64_t>(oy * g.sh - g.ph + g.kh, g.H);
  const int64_t x0 = std::max<int64_t>(ox * g.sw - g.pw, 0), x1 = std::min<int64_t>(ox * g.sw - g.pw + g.kw, g.W);
  T best = -std::numeric_limits<T>::infinity();
  int64_t bi = y0 * g.W + x0;
  for (int64_t iy = y0; iy < y1; ++iy)
    for (int64_t ix = x0; ix < x1; ++ix) {
      max_step(xp[iy * g.W + ix], iy * g.W + ix, best, bi);
    }
  yp[oy * g.Wo + ox] = best;
  ip[oy * g.Wo + ox] = bi;
}

template <class T, int KH, int KW>
void max_forward_k(const T* x, T* y, int64_t* idx, const PoolGeo& g) {
  // Columns whose window lies inside [0, W): ox sw - pw >= 0 and ox sw - pw + kw <= W.
  const int64_t ox_lo = std::min<int64_t>((g.pw + g.sw - 1) / g.sw, g.Wo);
  const int64_t ox_hi = std::max<int64_t>(ox_lo, std::min<int64_t>(g.Wo, (g.W + g.pw - g.kw) / g.sw + 1));
  parallel_for(0, g.planes, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const T* xp = x + pl * g.H * g.W;
      T* yp = y + pl * g.Ho * g.Wo;
      int64_t* ip = idx + pl * g.Ho * g.Wo;
      for (int64_t oy = 0; oy < g.Ho; ++oy) {
        const bool rows_inside = oy * g.sh - g.ph >= 0 && oy * g.sh - g.ph + g.kh <= g.H;
        if (!rows_inside) {
          for (int64_t ox = 0; ox < g.Wo; ++ox) max_one_clipped<T>(xp, yp, ip, g, oy, ox);
          continue;
        }
        for (int64_t ox = 0; ox < ox_lo; ++ox) max_one_clipped<T>(xp, yp, ip, g, oy, ox);
        max_row_interior<T, KH, KW>(xp, yp, ip, g, oy, ox_lo, ox_hi);
        for (int64_t ox = ox_hi; ox < g.Wo; ++ox) max_one_clipped<T>(xp, yp, ip, g, oy, ox);
      }
    }
  });
}

template <class T>
void max_forward(const T* x, T* y, int64_t* idx, const PoolGeo& g) {
  if (g.kh == 2 && g.kw == 2) max_forward_k<T, 2, 2>(x, y, idx, g);
  else if (g.kh == 3 && g.kw == 3) max_forward_k<T, 3, 3>(x, y, idx, g);
  else max_forward_k<T, 0, 0>(x, y, idx, g);
}

struct MaxPoolNode : autograd::Node {
  PoolGeo g;
  Tensor idx;   // i64 (planes, Ho, Wo): flat index into the plane
  const char* name() const override { return "max_pool2d"; }
  std::vector<Tensor> backward(const Tensor& dout_in) override {
    Tensor dout = dout_in.contiguous();
    Tensor dx = Tensor::zeros(g.in_shape, dout.dtype());
    const int64_t* ip = idx.data<int64_t>();
    ATTN_DISPATCH_FLOAT(dout.dtype(), "max_pool2d", [&] {
      const T* gp = dout.data<T>();
      T* dp = dx.data<T>();
      const int64_t no = g.Ho * g.Wo, ni = g.H * g.W;
      parallel_for(0, g.planes, 1, [&](int64_t p0, int64_t p1) {
        for (int64_t pl = p0; pl < p1; ++pl)
          for (int64_t o = 0; o < no; ++o) dp[pl * ni + ip[pl * no + o]] += gp[pl * no + o];
      });
    });
    return {dx};
  }
  void release() override { idx = Tensor(); }
};

// ---------------------------------------------------------------- avg
// Window of output (oy, ox): clipped bounds and the divisor, as torch's avg_pool2d.
struct AvgWin {
  int64_t y0, y1, x0, x1;
  double div;
};

inline AvgWin avg_window(const PoolGeo& g, int64_t oy, int64_t ox, bool count_include_pad) {
  int64_t y0 = oy * g.sh - g.ph, x0 = ox * g.sw - g.pw;
  int64_t y1 = std::min(y0 + g.kh, g.H + g.ph), x1 = std::min(x0 + g.kw, g.W + g.pw);
  const int64_t padded_size = (y1 - y0) * (x1 - x0);
  y0 = std::max<int64_t>(y0, 0); x0 = std::max<int64_t>(x0, 0);
  y1 = std::min(y1, g.H); x1 = std::min(x1, g.W);
  const int64_t size = std::max<int64_t>(y1 - y0, 0) * std::max<int64_t>(x1 - x0, 0);
  return {y0, y1, x0, x1, double(count_include_pad ? padded_size : size)};
}

template <class T>
void avg_forward(const T* x, T* y, const PoolGeo& g, bool cip) {
  parallel_for(0, g.planes, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const T* xp = x + pl * g.H * g.W;
      T* yp = y + pl * g.Ho * g.Wo;
      for (int64_t oy = 0; oy < g.Ho; ++oy)
        for (int64_t ox = 0; ox < g.Wo; ++ox) {
          const AvgWin w = avg_window(g, oy, ox, cip);
          if (w.y0 >= w.y1 || w.x0 >= w.x1) { yp[oy * g.Wo + ox] = T(0); continue; }
          T acc = 0;   // in T, as torch's CPU kernel (a f32 sum can overflow to inf)
          for (int64_t iy = w.y0; iy < w.y1; ++iy)
            for (int64_t ix = w.x0; ix < w.x1; ++ix) acc += xp[iy * g.W + ix];
          yp[oy * g.Wo + ox] = acc / T(w.div);
        }
    }
  });
}

struct AvgPoolNode : autograd::Node {
  PoolGeo g;
  bool cip = true;
  const char* name() const override { return "avg_pool2d"; }
  std::vector<Tensor> backward(const Tensor& dout_in) override {
    Tensor dout = dout_in.contiguous();
    Tensor dx = Tensor::zeros(g.in_shape, dout.dtype());
    ATTN_DISPATCH_FLOAT(dout.dtype(), "avg_pool2d", [&] {
      const T* gp = dout.data<T>();
      T* dp = dx.data<T>();
      parallel_for(0, g.planes, 1, [&](int64_t p0, int64_t p1) {
        for (int64_t pl = p0; pl < p1; ++pl) {
          const T* gpl = gp + pl * g.Ho * g.Wo;
          T* dpl = dp + pl * g.H * g.W;
          for (int64_t oy = 0; oy < g.Ho; ++oy)
            for (int64_t ox = 0; ox < g.Wo; ++ox) {
              const AvgWin w = avg_window(g, oy, ox, cip);
              const T v = gpl[oy * g.Wo + ox] / T(w.div);
              for (int64_t iy = w.y0; iy < w.y1; ++iy)
                for (int64_t ix = w.x0; ix < w.x1; ++ix) dpl[iy * g.W + ix] += v;
            }
        }
      });
    });
    return {dx};
  }
};

// ---------------------------------------------------------------- adaptive avg
inline int64_t start_index(int64_t o, int64_t out, int64_t in) { return (o * in) / out; }
inline int64_t end_index(int64_t o, int64_t out, int64_t in) { return ((o + 1) * in + out - 1) / out; }

template <class T>
void adaptive_forward(const T* x, T* y, const PoolGeo& g) {
  parallel_for(0, g.planes, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const T* xp = x + pl * g.H * g.W;
      T* yp = y + pl * g.Ho * g.Wo;
      for (int64_t oy = 0; oy < g.Ho; ++oy) {
        const int64_t y0 = start_index(oy, g.Ho, g.H), y1 = end_index(oy, g.Ho, g.H);
        for (int64_t ox = 0; ox < g.Wo; ++ox) {
          const int64_t x0 = start_index(ox, g.Wo, g.W), x1 = end_index(ox, g.Wo, g.W);
          T acc = 0;
          for (int64_t iy = y0; iy < y1; ++iy)
            for (int64_t ix = x0; ix < x1; ++ix) acc += xp[iy * g.W + ix];
          yp[oy * g.Wo + ox] = acc / T((y1 - y0) * (x1 - x0));
        }
      }
    }
  });
}

struct AdaptiveAvgPoolNode : autograd::Node {
  PoolGeo g;
  const char* name() const override { return "adaptive_avg_pool2d"; }
  std::vector<Tensor> backward(const Tensor& dout_in) override {
    Tensor dout = dout_in.contiguous();
    Tensor dx = Tensor::zeros(g.in_shape, dout.dtype());
    ATTN_DISPATCH_FLOAT(dout.dtype(), "adaptive_avg_pool2d", [&] {
      const T* gp = dout.data<T>();
      T* dp = dx.data<T>();
      parallel_for(0, g.planes, 1, [&](int64_t p0, int64_t p1) {
        for (int64_t pl = p0; pl < p1; ++pl) {
          const T* gpl = gp + pl * g.Ho * g.Wo;
          T* dpl = dp + pl * g.H * g.W;
          for (int64_t oy = 0; oy < g.Ho; ++oy) {
            const int64_t y0 = start_index(oy, g.Ho, g.H), y1 = end_index(oy, g.Ho, g.H);
            for (int64_t ox = 0; ox < g.Wo; ++ox) {
              const int64_t x0 = start_index(ox, g.Wo, g.W), x1 = end_index(ox, g.Wo, g.W);
              const T v = gpl[oy * g.Wo + ox] / T((y1 - y0) * (x1 - x0));
              for (int64_t iy = y0; iy < y1; ++iy)
                for (int64_t ix = x0; ix < x1; ++ix) dpl[iy * g.W + ix] += v;
            }
          }
        }
      });
    });
    return {dx};
  }
};

}  // namespace

Tensor max_pool2d(const Tensor& x, Pair kernel, Pair stride, Pair padding) {
  const PoolGeo g = window_geo(x, kernel, stride, padding, "max_pool2d");
  Tensor xc = x.detach().contiguous();
  Tensor out = Tensor::empty(g.out_shape, x.dtype());
  Tensor idx = Tensor::empty({g.planes, g.Ho, g.Wo}, DType::i64);
  ATTN_DISPATCH_FLOAT(x.dtype(), "max_pool2d",
                      [&] { max_forward<T>(xc.data<T>(), out.data<T>(), idx.data<int64_t>(), g); });
  if (autograd::needs_grad({x})) {
    auto n = std::make_shared<MaxPoolNode>();
    n->g = g; n->idx = idx;
    autograd::attach(out, n, {x});
  }
  return out;
}

Tensor avg_pool2d(const Tensor& x, Pair kernel, Pair stride, Pair padding, bool count_include_pad) {
  const PoolGeo g = window_geo(x, kernel, stride, padding, "avg_pool2d");
  Tensor xc = x.detach().contiguous();
  Tensor out = Tensor::empty(g.out_shape, x.dtype());
  ATTN_DISPATCH_FLOAT(x.dtype(), "avg_pool2d", [&] { avg_forward<T>(xc.data<T>(), out.data<T>(), g, count_include_pad); });
  if (autograd::needs_grad({x})) {
    auto n = std::make_shared<AvgPoolNode>();
    n->g = g; n->cip = count_include_pad;
    autograd::attach(out, n, {x});
  }
  return out;
}

Tensor adaptive_avg_pool2d(const Tensor& x, Pair output_size) {
  PoolGeo g = plane_geo(x, "adaptive_avg_pool2d");
  ATTN_CHECK(output_size[0] >= 1 && output_size[1] >= 1, "adaptive_avg_pool2d: expected output_size >= 1, got ",
             pair_shape(output_size));
  g.Ho = output_size[0];
  g.Wo = output_size[1];
  g.out_shape = g.in_shape;
  g.out_shape[g.out_shape.size() - 2] = g.Ho;
  g.out_shape.back() = g.Wo;
  Tensor xc = x.detach().contiguous();
  Tensor out = Tensor::empty(g.out_shape, x.dtype());
  ATTN_DISPATCH_FLOAT(x.dtype(), "adaptive_avg_pool2d", [&] { adaptive_forward<T>(xc.data<T>(), out.data<T>(), g); });
  if (autograd::needs_grad({x})) {
    auto n = std::make_shared<AdaptiveAvgPoolNode>();
    n->g = g;
    autograd::attach(out, n, {x});
  }
  return out;
}

}  // namespace attn

// conv2d geometry, the path switch, and im2col / col2im (f32, f64) for the GEMM path.
#include <atomic>
#include <cstring>

#include "attn/core/parallel.h"
#include "conv_kernels.h"

namespace attn::kernels {

ConvParams conv_params(const Shape& x, const Shape& w, std::array<int64_t, 2> stride,
                       std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation, int64_t groups) {
  ConvParams p;
  p.N = x[0]; p.C = x[1]; p.H = x[2]; p.W = x[3];
  p.O = w[0]; p.kh = w[2]; p.kw = w[3];
  p.sh = stride[0]; p.sw = stride[1];
  p.ph = padding[0]; p.pw = padding[1];
  p.dh = dilation[0]; p.dw = dilation[1];
  p.groups = groups;
  p.Ho = (p.H + 2 * p.ph - p.dh * (p.kh - 1) - 1) / p.sh + 1;
  p.Wo = (p.W + 2 * p.pw - p.dw * (p.kw - 1) - 1) / p.sw + 1;
  return p;
}

namespace {
std::atomic<int> g_path{int(ConvPath::automatic)};

// Column row (c, ky, kx) of image n: rows of all channels are consecutive, so (n, c) owns the
// kh * kw rows starting at (n C + c) kh kw.
template <class T>
void im2col_plane(const T* x, T* col, const ConvParams& p) {
  const int64_t L = p.L();
  for (int64_t ky = 0; ky < p.kh; ++ky)
    for (int64_t kx = 0; kx < p.kw; ++kx) {
      T* dst = col + (ky * p.kw + kx) * L;
      const int64_t xoff = kx * p.dw - p.pw;
      // Output columns ox whose input column ix = ox sw + xoff lies in [0, W).
      int64_t ox0 = 0, ox1 = p.Wo;
      while (ox0 < p.Wo && ox0 * p.sw + xoff < 0) ++ox0;
      while (ox1 > ox0 && (ox1 - 1) * p.sw + xoff >= p.W) --ox1;
      for (int64_t oy = 0; oy < p.Ho; ++oy) {
        T* d = dst + oy * p.Wo;
        const int64_t iy = oy * p.sh - p.ph + ky * p.dh;
        if (iy < 0 || iy >= p.H) {
          std::memset(d, 0, sizeof(T) * size_t(p.Wo));
          continue;
        }
        const T* s = x + iy * p.W;
        for (int64_t ox = 0; ox < ox0; ++ox) d[ox] = T(0);
        if (p.sw == 1) {
          for (int64_t ox = ox0; ox < ox1; ++ox) d[ox] = s[ox + xoff];
        } else {
          for (int64_t ox = ox0; ox < ox1; ++ox) d[ox] = s[ox * p.sw + xoff];
        }
        for (int64_t ox = ox1; ox < p.Wo; ++ox) d[ox] = T(0);
      }
    }
}

template <class T>
void col2im_plane(const T* col, T* x, const ConvParams& p) {
  const int64_t L = p.L();
  std::memset(x, 0, sizeof(T) * size_t(p.H * p.W));
  for (int64_t ky = 0; ky < p.kh; ++ky)
    for (int64_t kx = 0; kx < p.kw; ++kx) {
      const T* src = col + (ky * p.kw + kx) * L;
      const int64_t xoff = kx * p.dw - p.pw;
      int64_t ox0 = 0, ox1 = p.Wo;
      while (ox0 < p.Wo && ox0 * p.sw + xoff < 0) ++ox0;
      while (ox1 > ox0 && (ox1 - 1) * p.sw + xoff >= p.W) --ox1;
      for (int64_t oy = 0; oy < p.Ho; ++oy) {
        const int64_t iy = oy * p.sh - p.ph + ky * p.dh;
        if (iy < 0 || iy >= p.H) continue;
        const T* s = src + oy * p.Wo;
        T* d = x + iy * p.W;
        for (int64_t ox = ox0; ox < ox1; ++ox) d[ox * p.sw + xoff] += s[ox];
      }
    }
}
}  // namespace

void set_conv_path(ConvPath p) { g_path.store(int(p)); }
ConvPath conv_path() { return ConvPath(g_path.load()); }

Tensor im2col(const Tensor& x_in, const ConvParams& p) {
  Tensor x = x_in.contiguous();
  Tensor col = Tensor::empty({p.N, p.groups, p.K(), p.L()}, x.dtype());
  const int64_t plane_in = p.H * p.W, plane_col = p.kh * p.kw * p.L();
  ATTN_DISPATCH_FLOAT(x.dtype(), "conv2d", [&] {
    const T* xp = x.data<T>();
    T* cp = col.data<T>();
    parallel_for(0, p.N * p.C, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) im2col_plane<T>(xp + r * plane_in, cp + r * plane_col, p);
    });
  });
  return col;
}

Tensor col2im(const Tensor& col_in, const ConvParams& p) {
  Tensor col = col_in.contiguous();
  Tensor x = Tensor::empty({p.N, p.C, p.H, p.W}, col.dtype());
  const int64_t plane_in = p.H * p.W, plane_col = p.kh * p.kw * p.L();
  ATTN_DISPATCH_FLOAT(col.dtype(), "conv2d", [&] {
    const T* cp = col.data<T>();
    T* xp = x.data<T>();
    parallel_for(0, p.N * p.C, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) col2im_plane<T>(cp + r * plane_col, xp + r * plane_in, p);
    });
  });
  return x;
}

}  // namespace attn::kernels

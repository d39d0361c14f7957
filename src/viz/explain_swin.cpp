// A Swin block's window attention over the image (see include/attn/viz/explain_swin.h).
#include "attn/viz/explain_swin.h"

#include <algorithm>
#include <vector>

#include "attn/autograd/grad_mode.h"
#include "attn/core/error.h"
#include "attn/data/image.h"

namespace attn::viz {

int64_t window_of(int64_t p, int64_t window, int64_t shift) {
  const int64_t d = p - shift;
  return d >= 0 ? d / window : -((-d + window - 1) / window);
}

namespace {

// Heads fused: (nW, NH, N, N) -> nW * N * N values.
std::vector<double> fuse_heads(const Tensor& probs, HeadFusion fusion) {
  const int64_t nW = probs.size(0), NH = probs.size(1), NN = probs.size(2) * probs.size(3);
  const std::vector<double> a = probs.to_vector<double>();
  std::vector<double> out(size_t(nW * NN));
  for (int64_t w = 0; w < nW; ++w)
    for (int64_t i = 0; i < NN; ++i) {
      double v = 0.0;
      for (int64_t h = 0; h < NH; ++h) {
        const double x = a[size_t((w * NH + h) * NN + i)];
        if (h == 0) v = x;
        else if (fusion == HeadFusion::mean) v += x;
        else if (fusion == HeadFusion::max) v = std::max(v, x);
        else v = std::min(v, x);
      }
      out[size_t(w * NN + i)] = fusion == HeadFusion::mean ? v / double(NH) : v;
    }
  return out;
}

// The token map position (row * W + col) of window w's token t, or -1 for a padding token: the
// windows hold the map padded to Hp x Wp and rolled by -shift (roll_before_pad: rolled, then padded).
int64_t source_of(const models::SwinBlockAttention& a, int64_t w, int64_t t) {
  const int64_t H = a.height, W = a.width, wh = a.window, ww = a.window;
  const int64_t Hp = (H + wh - 1) / wh * wh, Wp = (W + ww - 1) / ww * ww, nww = Wp / ww;
  const int64_t r = (w / nww) * wh + t / ww, c = (w % nww) * ww + t % ww;
  int64_t pr = 0, pc = 0;
  if (a.roll_before_pad) {
    if (r >= H || c >= W) return -1;
    pr = (r + a.shift_h) % H, pc = (c + a.shift_w) % W;
  } else {
    pr = (r + a.shift_h) % Hp, pc = (c + a.shift_w) % Wp;
    if (pr >= H || pc >= W) return -1;
  }
  return pr * W + pc;
}

// The (H, W) token map drawn over `big` (the image upscaled, `cell` pixels per token): nearest cells,
// the window borders in white and (query >= 0) the query's cell outlined in black.
Tensor draw_map(const Tensor& big, const Tensor& map, int64_t cell, const SwinExplanation& e, int64_t query,
                double alpha) {
  const int64_t ph = big.size(0), pw = big.size(1), H = map.size(0), W = map.size(1);
  Tensor m = Tensor::zeros({ph, pw});
  const float* src = map.data<float>();
  float* dst = m.data<float>();
  for (int64_t y = 0; y < std::min(ph, H * cell); ++y)
    for (int64_t x = 0; x < std::min(pw, W * cell); ++x) dst[y * pw + x] = src[(y / cell) * W + x / cell];
  Tensor out = overlay_heatmap(big, m, alpha);
  uint8_t* d = out.data<uint8_t>();
  auto paint = [&](int64_t y, int64_t x, uint8_t v) {
    if (y >= 0 && y < ph && x >= 0 && x < pw) std::fill(d + (y * pw + x) * 3, d + (y * pw + x) * 3 + 3, v);
  };
  for (int64_t r = 1; r < H; ++r)
    if (window_of(r, e.window, e.shift_h) != window_of(r - 1, e.window, e.shift_h))
      for (int64_t x = 0; x < W * cell; ++x) paint(r * cell, x, 255);
  for (int64_t c = 1; c < W; ++c)
    if (window_of(c, e.window, e.shift_w) != window_of(c - 1, e.window, e.shift_w))
      for (int64_t y = 0; y < H * cell; ++y) paint(y, c * cell, 255);
  if (query >= 0) {
    const int64_t y0 = (query / W) * cell, x0 = (query % W) * cell;
    for (int64_t k = 0; k < cell; ++k) {
      paint(y0, x0 + k, 0), paint(y0 + cell - 1, x0 + k, 0);
      paint(y0 + k, x0, 0), paint(y0 + k, x0 + cell - 1, 0);
    }
  }
  return out;
}

}  // namespace

SwinExplanation explain_swin(const models::SwinTransformer& swin, const PreparedImage& p, const SwinExplainOptions& o) {
  ATTN_CHECK(p.input.defined() && p.input.dim() == 4 && p.input.size(0) == 1,
             "explain: expected one prepared image (1, C, S, S), got shape ", p.input.defined() ? p.input.shape() : Shape{});
  ATTN_CHECK(o.min_panel > 0, "explain: expected min_panel > 0, got ", o.min_panel);
  const models::SwinBlockAttention a = swin.attention_of(p.input, o.stage, o.block);
  const int64_t H = a.height, W = a.width, N = a.window * a.window;
  SwinExplanation e;
  e.query_row = o.query_row < 0 ? H / 2 : o.query_row;
  e.query_col = o.query_col < 0 ? W / 2 : o.query_col;
  ATTN_CHECK(e.query_row < H && e.query_col < W, "explain: the query token (", e.query_row, ", ", e.query_col,
             ") is outside stage ", o.stage, "'s ", H, " x ", W, " token map");
  e.window = a.window, e.shift_h = a.shift_h, e.shift_w = a.shift_w;
  e.cell = swin.cfg().patch_size << o.stage;
  const std::vector<double> A = fuse_heads(a.probs.select(0, 0), o.fusion);   // (nW, N, N)
  const int64_t nW = a.probs.size(1), query = e.query_row * W + e.query_col;
  e.query_map = Tensor::zeros({H, W});
  e.received = Tensor::zeros({H, W});
  float* qm = e.query_map.data<float>();
  float* rv = e.received.data<float>();
  std::vector<int64_t> src(static_cast<size_t>(N));
  for (int64_t w = 0; w < nW; ++w) {
    int64_t real = 0, qi = -1;
    for (int64_t t = 0; t < N; ++t) {
      src[size_t(t)] = source_of(a, w, t);
      real += src[size_t(t)] >= 0;
      if (src[size_t(t)] == query) qi = t;
    }
    const double* Aw = &A[size_t(w * N * N)];
    for (int64_t j = 0; j < N; ++j) {
      if (src[size_t(j)] < 0) continue;
      if (qi >= 0) qm[src[size_t(j)]] = float(Aw[qi * N + j]);
      double s = 0.0;
      for (int64_t i = 0; i < N; ++i) s += src[size_t(i)] >= 0 ? Aw[i * N + j] : 0.0;
      rv[src[size_t(j)]] = float(s / double(std::max<int64_t>(real, 1)));
    }
  }
  const Tensor big = upscaled_panel(p.image, o.min_panel);
  const int64_t cell = e.cell * (big.size(0) / p.image.size(0));
  e.panel = side_by_side({big, draw_map(big, e.query_map, cell, e, query, o.alpha),
                          draw_map(big, e.received, cell, e, -1, o.alpha)});
  return e;
}

}  // namespace attn::viz

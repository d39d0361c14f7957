// Shifted-window attention (Swin V1 / V2, torchvision's semantics); see attn/nn/attention/window.h.
#include "attn/nn/attention/window.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "attn/autograd/grad_mode.h"
#include "attn/nn/attention/relative_bias.h"
#include "attn/nn/init.h"
#include "attn/ops/attention.h"
#include "attn/ops/combine.h"
#include "attn/ops/dropout.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/indexing.h"
#include "attn/ops/matmul.h"
#include "attn/ops/reduce.h"
#include "attn/ops/window_attention.h"

namespace attn::nn {

Tensor window_partition(const Tensor& x, int64_t wh, int64_t ww) {
  ATTN_CHECK(x.dim() == 4 && wh > 0 && ww > 0 && x.size(1) % wh == 0 && x.size(2) % ww == 0,
             "window_partition: expected (B, H, W, C) with H, W multiples of the window (", wh, ", ", ww,
             "), got shape ", x.shape());
  const int64_t B = x.size(0), H = x.size(1), W = x.size(2), C = x.size(3);
  return x.view({B, H / wh, wh, W / ww, ww, C}).permute({0, 1, 3, 2, 4, 5}).reshape({-1, wh * ww, C});
}

Tensor window_reverse(const Tensor& windows, int64_t batch, int64_t h, int64_t w, int64_t wh, int64_t ww) {
  ATTN_CHECK(windows.dim() == 3 && h % wh == 0 && w % ww == 0 && windows.size(1) == wh * ww &&
                 windows.size(0) == batch * (h / wh) * (w / ww),
             "window_reverse: expected (", batch * (h / wh) * (w / ww), ", ", wh * ww, ", C) windows of a (", h,
             ", ", w, ") map, got shape ", windows.shape());
  const int64_t C = windows.size(2);
  return windows.view({batch, h / wh, w / ww, wh, ww, C}).permute({0, 1, 3, 2, 4, 5}).reshape({batch, h, w, C});
}

namespace {

Tensor roll_dim(const Tensor& x, int64_t shift, int64_t dim) {
  const int64_t n = x.size(dim);
  const int64_t s = ((shift % n) + n) % n;
  if (s == 0) return x;
  return concat({x.slice(dim, n - s, n), x.slice(dim, 0, n - s)}, dim);
}

// Python's x[a:b] bounds on a dim of size n (b absent: to the end).
std::pair<int64_t, int64_t> py_range(int64_t a, std::optional<int64_t> b, int64_t n) {
  auto norm = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  return {norm(a), b ? norm(*b) : n};
}

// A process-wide cache of what depends on a window geometry alone (the shift mask, the window rows),
// built once per key instead of at every block's forward; bounded (cleared at 64 entries). The
// cached tensors are only read.
template <class V, size_t K>
class GeometryCache {
 public:
  template <class Make>
  V get(const std::array<int64_t, K>& key, Make make) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = map_.find(key);
      if (it != map_.end()) return it->second;
    }
    V v = make();
    std::lock_guard<std::mutex> lk(mu_);
    if (map_.size() >= 64) map_.clear();
    map_.emplace(key, v);
    return v;
  }

 private:
  std::mutex mu_;
  std::map<std::array<int64_t, K>, V> map_;
};

}  // namespace

Tensor roll_hw(const Tensor& x, int64_t sh, int64_t sw) {
  ATTN_CHECK(x.dim() == 4, "roll_hw: expected (B, H, W, C), got shape ", x.shape());
  return roll_dim(roll_dim(x, sh, 1), sw, 2);
}

Tensor swin_shift_mask(int64_t h, int64_t w, int64_t wh, int64_t ww, int64_t sh, int64_t sw) {
  ATTN_CHECK(h % wh == 0 && w % ww == 0, "swin_shift_mask: expected a map (", h, ", ", w,
             ") of whole windows (", wh, ", ", ww, ")");
  // Region ids exactly as torchvision assigns them (later slices overwrite earlier ones).
  std::vector<int64_t> id(size_t(h * w), 0);
  const std::vector<std::pair<int64_t, std::optional<int64_t>>> hs = {{0, -wh}, {-wh, -sh}, {-sh, std::nullopt}},
                                                                     ws = {{0, -ww}, {-ww, -sw}, {-sw, std::nullopt}};
  int64_t count = 0;
  for (const auto& [ha, hb] : hs)
    for (const auto& [wa, wb] : ws) {
      const auto [h0, h1] = py_range(ha, hb, h);
      const auto [w0, w1] = py_range(wa, wb, w);
      for (int64_t i = h0; i < h1; ++i)
        for (int64_t j = w0; j < w1; ++j) id[size_t(i * w + j)] = count;
      ++count;
    }
  const int64_t nwh = h / wh, nww = w / ww, N = wh * ww;
  Tensor m = Tensor::empty({nwh * nww, N, N});
  float* p = m.data<float>();
  std::vector<int64_t> win(static_cast<size_t>(N));
  for (int64_t a = 0; a < nwh; ++a)
    for (int64_t b = 0; b < nww; ++b) {
      for (int64_t t = 0; t < N; ++t) win[size_t(t)] = id[size_t((a * wh + t / ww) * w + b * ww + t % ww)];
      float* q = p + (a * nww + b) * N * N;
      for (int64_t i = 0; i < N; ++i)
        for (int64_t j = 0; j < N; ++j) q[i * N + j] = win[size_t(i)] == win[size_t(j)] ? 0.0f : -100.0f;
    }
  return m;
}

namespace {

// V2's projection: the key's bias is held at zero (its gradient is zero).
Tensor v2_qkv(const Tensor& windows, const Linear& qkv) {
  Tensor b = qkv.bias;
  if (b.defined()) {
    const int64_t C = b.size(0) / 3;
    Tensor keep = Tensor::ones({3, C}, b.dtype());
    keep.select(0, 1).zero_();
    b = b * keep.view({3 * C});
  }
  return linear(windows, qkv.weight, b);
}

}  // namespace

Tensor window_attention(const Tensor& windows, const Linear& qkv, const Linear& proj, const Tensor& bias,
                        int64_t num_heads, const Tensor& logit_scale, double attn_drop, bool training,
                        Generator* g, Tensor* probs) {
  ATTN_CHECK(windows.dim() == 3 && num_heads > 0 && windows.size(2) % num_heads == 0,
             "window_attention: expected windows (B', N, C) with C a multiple of ", num_heads,
             " heads, got shape ", windows.shape());
  const int64_t Bw = windows.size(0), N = windows.size(1), C = windows.size(2), HS = C / num_heads;
  SdpaOptions o;
  o.dropout_p = training ? attn_drop : 0.0;
  o.generator = g;
  o.need_weights = probs != nullptr;
  Tensor out;
  if (!logit_scale.defined() && !probs) {
    o.scale = 1.0 / std::sqrt(double(HS));
    out = scaled_dot_product_attention_packed(qkv.forward(windows), num_heads, bias, o);
  } else if (!logit_scale.defined()) {   // the probabilities asked for: q, k, v apart
    o.scale = 1.0 / std::sqrt(double(HS));
    Tensor h = qkv.forward(windows).view({Bw, N, 3, num_heads, HS}).permute({2, 0, 3, 1, 4});
    SdpaResult r = scaled_dot_product_attention(h.select(0, 0), h.select(0, 1), h.select(0, 2), bias, o);
    *probs = r.weights;
    out = r.out.transpose(1, 2).reshape({Bw, N, C});
  } else {
    Tensor h = v2_qkv(windows, qkv).view({Bw, N, 3, num_heads, HS}).permute({2, 0, 3, 1, 4});
    // F.normalize: x / max(|x|, 1e-12), clamped before the root so that an all-zero row (a padded
    // token's key) has a zero gradient, as torch's norm gives it, not 0 * inf.
    auto normalize = [](const Tensor& x) { return x / sqrt(clamp(sum(x * x, {-1}, true), 1e-24, INFINITY)); };
    const Tensor scale = exp(clamp(logit_scale, -INFINITY, std::log(100.0)));   // (NH, 1, 1)
    const Tensor q = normalize(h.select(0, 0)) * scale, k = normalize(h.select(0, 1));
    o.scale = 1.0;
    SdpaResult r = scaled_dot_product_attention(q, k, h.select(0, 2), bias, o);
    if (probs) *probs = r.weights;
    out = r.out.transpose(1, 2).reshape({Bw, N, C});
  }
  return proj.forward(out);
}

// ---- module ----

namespace {

const ShiftedWindowAttentionOptions& checked_window_options(const ShiftedWindowAttentionOptions& o) {
  ATTN_CHECK(o.dim > 0 && o.num_heads > 0 && o.dim % o.num_heads == 0, "ShiftedWindowAttention: expected dim (",
             o.dim, ") a positive multiple of num_heads (", o.num_heads, ")");
  ATTN_CHECK(o.window_h > 0 && o.window_w > 0 && o.shift_h >= 0 && o.shift_w >= 0 && o.shift_h < o.window_h &&
                 o.shift_w < o.window_w,
             "ShiftedWindowAttention: expected a positive window and shifts in [0, window), got window (",
             o.window_h, ", ", o.window_w, ") and shift (", o.shift_h, ", ", o.shift_w, ")");
  auto pretrained_ok = [](int64_t p) { return p == 0 || p >= 2; };
  ATTN_CHECK(pretrained_ok(o.pretrained_window_h) && pretrained_ok(o.pretrained_window_w),
             "ShiftedWindowAttention: expected a pretrained window of 0 (none) or at least 2, got (",
             o.pretrained_window_h, ", ", o.pretrained_window_w, ")");
  return o;
}

// torchvision's relative_coords_table: (1, 2wh-1, 2ww-1, 2), log-spaced; offsets divided by ph - 1,
// pw - 1 (the pretrained window) when those are set, else by the window's - 1 (none for a window of 1).
Tensor swin_coords_table(int64_t wh, int64_t ww, int64_t ph, int64_t pw) {
  Tensor t = Tensor::empty({1, 2 * wh - 1, 2 * ww - 1, 2});
  if (t.is_shapes_only()) return t;   // a model built with shapes only (models::parameter_count)
  float* p = t.data<float>();
  auto f = [](int64_t d, int64_t w) {
    float v = float(d);
    if (w > 1) v /= float(w - 1);   // as torch: f32 division, then * 8, then the log
    v *= 8.0f;
    const float s = v > 0 ? 1.0f : (v < 0 ? -1.0f : 0.0f);
    return s * std::log2(std::abs(v) + 1.0f) / 3.0f;
  };
  for (int64_t i = 0; i < 2 * wh - 1; ++i)
    for (int64_t j = 0; j < 2 * ww - 1; ++j) {
      p[(i * (2 * ww - 1) + j) * 2] = f(i - (wh - 1), ph > 0 ? ph : wh);
      p[(i * (2 * ww - 1) + j) * 2 + 1] = f(j - (ww - 1), pw > 0 ? pw : ww);
    }
  return t;
}

}  // namespace

ShiftedWindowAttention::ShiftedWindowAttention(const ShiftedWindowAttentionOptions& o, Generator& g)
    : opt_(checked_window_options(o)), bias_cache_(std::make_shared<BiasCache>()) {
  qkv = register_module("qkv", std::make_shared<Linear>(o.dim, 3 * o.dim, o.qkv_bias, g));
  proj = register_module("proj", std::make_shared<Linear>(o.dim, o.dim, o.proj_bias, g));
  const int64_t wh = o.window_h, ww = o.window_w;
  if (!o.v2) {
    table_ = &register_parameter("relative_position_bias_table", Tensor::zeros({(2 * wh - 1) * (2 * ww - 1), o.num_heads}));
    init::trunc_normal_(*table_, g, 0.0, 0.02);
  } else {
    coords_table_ = &register_buffer("relative_coords_table",
                                     swin_coords_table(wh, ww, o.pretrained_window_h, o.pretrained_window_w));
  }
  index_ = &register_buffer("relative_position_index", swin_relative_position_index(wh, ww).view({wh * ww * wh * ww}));
  if (o.v2) {
    logit_scale_ = &register_parameter("logit_scale", Tensor::full({o.num_heads, 1, 1}, std::log(10.0)));
    cpb_mlp = register_module("cpb_mlp", std::make_shared<Sequential>());
    cpb_mlp->push_back(std::make_shared<Linear>(2, 512, true, g));
    cpb_mlp->push_back(std::make_shared<Lambda>([](const Tensor& x) { return relu(x); }));
    cpb_mlp->push_back(std::make_shared<Linear>(512, o.num_heads, false, g));
  }
}

struct ShiftedWindowAttention::BiasCache {
  std::mutex m;
  Tensor table, bias;   // a copy of the table's values, and the bias gathered from them
};

Tensor ShiftedWindowAttention::relative_position_bias() const {
  const int64_t N = opt_.window_h * opt_.window_w;
  const Tensor table = opt_.v2 ? cpb_mlp->forward(*coords_table_).view({-1, opt_.num_heads}) : *table_;
  auto gather = [&] {
    return embedding(table, *index_).view({N, N, opt_.num_heads}).permute({2, 0, 1}).contiguous();
  };
  if (opt_.v2) return sigmoid(gather()) * 16.0;
  if (grad_enabled() || table.dtype() != DType::f32 || !table.is_contiguous()) return gather();
  // Inference: a gather and a transposing copy per block and pass saved, checked against the table's
  // values (a few KB), so a table changed in place (an optimizer step, loaded weights) is seen.
  BiasCache& c = *bias_cache_;
  const std::lock_guard<std::mutex> lock(c.m);
  const size_t bytes = size_t(table.numel()) * sizeof(float);
  if (!c.table.defined() || c.table.shape() != table.shape() ||
      std::memcmp(c.table.data<float>(), table.data<float>(), bytes) != 0) {
    c.table = table.clone();
    c.bias = gather();
  }
  return c.bias;
}

std::pair<int64_t, int64_t> ShiftedWindowAttention::effective_shift(int64_t h, int64_t w, bool shift) const {
  const int64_t wh = opt_.window_h, ww = opt_.window_w;
  const int64_t Hp = (h + wh - 1) / wh * wh, Wp = (w + ww - 1) / ww * ww;
  const bool keep = opt_.roll_before_pad || opt_.hf_v2;   // the shift, whatever the map
  return {!shift || (!keep && wh >= Hp) ? 0 : opt_.shift_h, !shift || (!keep && ww >= Wp) ? 0 : opt_.shift_w};
}

namespace {

// source: window row r (windows of the padded map rolled by (-sh, -sw), raster order, tokens in raster order
// within each) -> its pixel of the padded (B, Hp, Wp) map; back: pixel (b, i, j), i < H, j < W, -> its row.
struct WindowRows {
  Tensor source, back;
};
WindowRows window_rows(int64_t B, int64_t H, int64_t W, int64_t Hp, int64_t Wp, int64_t wh, int64_t ww, int64_t sh,
                       int64_t sw) {
  const int64_t nwh = Hp / wh, nww = Wp / ww, N = wh * ww;
  std::vector<int64_t> src(size_t(B * Hp * Wp)), back(size_t(B * H * W));
  for (int64_t r = 0; r < B * Hp * Wp; ++r) {
    const int64_t t = r % N, win = r / N, b = win / (nwh * nww), a = win / nww % nwh, c = win % nww;
    const int64_t i = (a * wh + t / ww + sh) % Hp, j = (c * ww + t % ww + sw) % Wp;
    src[size_t(r)] = (b * Hp + i) * Wp + j;
    if (i < H && j < W) back[size_t((b * H + i) * W + j)] = r;
  }
  return {Tensor::from_vector(src, {B * Hp * Wp}), Tensor::from_vector(back, {B * H * W})};
}

}  // namespace

// The windows' attention and projection, (B nW, N, C) -> (B nW, N, C), of a padded Hp x Wp map
// shifted by (sh, sw). f32 without attention dropout: the fused op (bias and shift mask added in its
// kernel, never expanded to the windows); otherwise window_attention with the expanded bias.
Tensor ShiftedWindowAttention::attend(const Tensor& windows, int64_t Hp, int64_t Wp, int64_t sh, int64_t sw,
                                      Tensor* weights) const {
  const int64_t wh = opt_.window_h, ww = opt_.window_w, B = windows.size(0) / ((Hp / wh) * (Wp / ww));
  const int64_t NH = opt_.num_heads, N = wh * ww, nW = (Hp / wh) * (Wp / ww);
  const bool shifted = sh + sw > 0, dropout = is_training() && opt_.attn_drop > 0;
  static GeometryCache<Tensor, 7> masks;
  // bf16 windows (a bf16 layer norm's, for a packed bf16 qkv) take the f32 path's fused op, f32 masks.
  const bool bf16_in = windows.dtype() == DType::bf16 && linear_reads_bf16(qkv->weight);
  const DType mdt = bf16_in ? DType::f32 : windows.dtype();
  Tensor mask = shifted ? masks.get({Hp, Wp, wh, ww, sh, sw, int64_t(mdt)}, [&] {
                  return swin_shift_mask(Hp, Wp, wh, ww, sh, sw).to(mdt);
                })
                        : Tensor();   // (nW, N, N)
  if (shifted && opt_.hf_v2) mask = mask * 2.0;   // transformers' Swin V2 adds its mask twice
  if ((windows.dtype() == DType::f32 || bf16_in) && !dropout) {
    WindowAttentionOptions o;
    if (logit_scale_) o.logit_scale = *logit_scale_;
    o.need_weights = weights != nullptr;
    // A bf16 model's V1 attention in inference: the projection's result in bf16, the attention in bf16.
    const bool bf16 = !opt_.v2 && !o.need_weights && qkv->weight.dtype() == DType::bf16 && !grad_enabled();
    const Tensor y = opt_.v2 ? v2_qkv(windows, *qkv)
                             : bf16 ? linear_bf16_out(windows, qkv->weight, qkv->bias) : qkv->forward(windows);
    WindowAttentionResult r = window_attention_packed(y, NH, relative_position_bias(), mask, o);
    if (weights) *weights = r.weights;
    return proj->forward(r.out);
  }
  Tensor bias = relative_position_bias().unsqueeze(0);   // (1, NH, N, N)
  if (shifted) bias = (bias + mask.unsqueeze(1)).expand({B, nW, NH, N, N}).reshape({B * nW, NH, N, N});
  return window_attention(windows, *qkv, *proj, bias, NH, logit_scale_ ? *logit_scale_ : Tensor(), opt_.attn_drop,
                          is_training(), nullptr, weights);
}

ShiftedWindowAttention::RowMap ShiftedWindowAttention::row_map(int64_t batch, int64_t h, int64_t w,
                                                               bool shift) const {
  const int64_t wh = opt_.window_h, ww = opt_.window_w;
  if (opt_.roll_before_pad || h % wh != 0 || w % ww != 0) return {};
  const auto [sh, sw] = effective_shift(h, w, shift);
  static GeometryCache<WindowRows, 9> cache;
  const WindowRows r = cache.get({batch, h, w, h, w, wh, ww, sh, sw},
                                 [&, sh = sh, sw = sw] { return window_rows(batch, h, w, h, w, wh, ww, sh, sw); });
  return {r.source, r.back};
}

Tensor ShiftedWindowAttention::attend_windows(const Tensor& windows, int64_t h, int64_t w, bool shift) const {
  const int64_t wh = opt_.window_h, ww = opt_.window_w;
  ATTN_CHECK(!opt_.roll_before_pad && h % wh == 0 && w % ww == 0 && windows.dim() == 3 &&
                 windows.size(1) == wh * ww && windows.size(2) == opt_.dim && windows.size(0) % ((h / wh) * (w / ww)) == 0,
             "ShiftedWindowAttention::attend_windows: expected (B nW, ", wh * ww, ", ", opt_.dim, ") windows of a ",
             h, " x ", w, " map of whole ", wh, " x ", ww, " windows (pad, then roll), got shape ", windows.shape());
  const auto [sh, sw] = effective_shift(h, w, shift);
  return attend(windows, h, w, sh, sw, nullptr);
}

Tensor ShiftedWindowAttention::forward(const Tensor& x, bool shift, Tensor* weights) const {
  ATTN_CHECK(x.dim() == 4 && x.size(3) == opt_.dim, "ShiftedWindowAttention: expected (B, H, W, ", opt_.dim,
             "), got shape ", x.shape());
  const int64_t B = x.size(0), H = x.size(1), W = x.size(2), wh = opt_.window_h, ww = opt_.window_w;
  const int64_t ph = (wh - H % wh) % wh, pw = (ww - W % ww) % ww, Hp = H + ph, Wp = W + pw;
  const bool timm = opt_.roll_before_pad;
  const auto [sh, sw] = effective_shift(H, W, shift);
  const bool shifted = sh + sw > 0;
  Tensor h = x;
  if (timm && shifted) h = roll_hw(h, -sh, -sw);
  if (ph > 0) h = concat({h, Tensor::zeros({B, ph, W, opt_.dim}, x.dtype())}, 1);
  if (pw > 0) h = concat({h, Tensor::zeros({B, Hp, pw, opt_.dim}, x.dtype())}, 2);
  if (!timm) {   // roll + partition in one row gather, reverse + roll back + crop in another
    static GeometryCache<WindowRows, 9> cache;
    const WindowRows rows =
        cache.get({B, H, W, Hp, Wp, wh, ww, sh, sw},
                  [&, sh = sh, sw = sw] { return window_rows(B, H, W, Hp, Wp, wh, ww, sh, sw); });
    const int64_t C = opt_.dim;
    Tensor o = attend(index_select(h.reshape({B * Hp * Wp, C}), 0, rows.source).view({-1, wh * ww, C}), Hp, Wp, sh,
                      sw, weights);
    if (is_training() && opt_.proj_drop > 0) o = dropout(o, opt_.proj_drop, true);
    return index_select(o.view({-1, C}), 0, rows.back).view({B, H, W, C});
  }
  Tensor o = attend(window_partition(h, wh, ww), Hp, Wp, sh, sw, weights);
  if (is_training() && opt_.proj_drop > 0) o = dropout(o, opt_.proj_drop, true);
  h = window_reverse(o, B, Hp, Wp, wh, ww);
  if (!timm && shifted) h = roll_hw(h, sh, sw);
  if (ph > 0 || pw > 0) h = h.slice(1, 0, H).slice(2, 0, W).contiguous();
  if (timm && shifted) h = roll_hw(h, sh, sw);
  return h;
}

int64_t ShiftedWindowAttention::macs(int64_t hp, int64_t wp) const {
  const int64_t C = opt_.dim, N = opt_.window_h * opt_.window_w;
  return hp * wp * (3 * C * C + 2 * N * C + C * C);   // qkv, q kᵀ and P v, proj
}

}  // namespace attn::nn

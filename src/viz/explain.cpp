// Attention rollout, class-token maps, heat-map overlays and image preprocessing; see
// attn/viz/explain.h.
#include "attn/viz/explain.h"

#include <algorithm>
#include <cmath>

#include "attn/autograd/grad_mode.h"
#include "attn/data/image.h"

namespace attn::viz {
namespace {

void check_maps(const Tensor& maps, const char* op) {
  ATTN_CHECK(maps.defined() && maps.dim() == 5 && maps.size(3) == maps.size(4) &&
                 (maps.dtype() == DType::f32 || maps.dtype() == DType::f64),
             op, ": expected attention maps (L, B, NH, T, T) f32 or f64, got ",
             maps.defined() ? dtype_name(maps.dtype()) : "undefined", " of shape ", maps.defined() ? maps.shape() : Shape{});
  ATTN_CHECK(maps.size(0) > 0 && maps.size(2) > 0 && maps.size(3) > 0, op,
             ": expected at least one layer, head and token, got shape ", maps.shape());
}

void check_prefix(const Tensor& maps, int64_t num_prefix, const char* op) {
  ATTN_CHECK(num_prefix >= 1 && num_prefix < maps.size(3), op, ": expected 1 <= num_prefix < T = ", maps.size(3),
             ", got ", num_prefix);
}

// (grid, grid) from a (N) row when N is a square.
Tensor square(const Tensor& row, const char* op) {
  const int64_t n = row.numel();
  const int64_t g = int64_t(std::llround(std::sqrt(double(n))));
  ATTN_CHECK(g * g == n, op, ": expected a square number of patch tokens, got ", n);
  return row.reshape({g, g}).contiguous();
}

// jet: piecewise linear, blue -> cyan -> yellow -> red.
void jet(double v, uint8_t rgb[3]) {
  auto ch = [](double x) { return uint8_t(std::lround(255.0 * std::clamp(1.5 - std::fabs(x), 0.0, 1.0))); };
  const double t = 4.0 * std::clamp(v, 0.0, 1.0);
  rgb[0] = ch(t - 3.0);
  rgb[1] = ch(t - 2.0);
  rgb[2] = ch(t - 1.0);
}

}  // namespace

HeadFusion parse_head_fusion(const std::string& name) {
  if (name == "mean") return HeadFusion::mean;
  if (name == "max") return HeadFusion::max;
  if (name == "min") return HeadFusion::min;
  fail("explain: unknown head fusion '", name, "' (known: mean, max, min)");
}

Tensor attention_rollout(const Tensor& maps, HeadFusion fusion) {
  check_maps(maps, "attention_rollout");
  const int64_t L = maps.size(0), B = maps.size(1), H = maps.size(2), T = maps.size(3);
  const std::vector<double> a = maps.to_vector<double>();
  std::vector<double> out(size_t(B * T * T)), layer(size_t(T * T)), next(size_t(T * T));
  for (int64_t b = 0; b < B; ++b) {
    double* r = &out[size_t(b * T * T)];
    for (int64_t l = 0; l < L; ++l) {
      // Fused heads + identity, rows renormalised.
      for (int64_t i = 0; i < T; ++i) {
        double row_sum = 0.0;
        for (int64_t j = 0; j < T; ++j) {
          double v = 0.0;
          for (int64_t h = 0; h < H; ++h) {
            const double x = a[size_t((((l * B + b) * H + h) * T + i) * T + j)];
            if (h == 0) v = x;
            else if (fusion == HeadFusion::mean) v += x;
            else if (fusion == HeadFusion::max) v = std::max(v, x);
            else v = std::min(v, x);
          }
          if (fusion == HeadFusion::mean) v /= double(H);
          v += i == j ? 1.0 : 0.0;
          layer[size_t(i * T + j)] = v;
          row_sum += v;
        }
        for (int64_t j = 0; j < T; ++j) layer[size_t(i * T + j)] /= row_sum;
      }
      if (l == 0) {
        std::copy(layer.begin(), layer.end(), r);
        continue;
      }
      // R = A'_l R
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          double s = 0.0;
          for (int64_t k = 0; k < T; ++k) s += layer[size_t(i * T + k)] * r[k * T + j];
          next[size_t(i * T + j)] = s;
        }
      std::copy(next.begin(), next.end(), r);
    }
  }
  return Tensor::from_vector<double>(out, {B, T, T}).to(maps.dtype());
}

Tensor cls_rollout(const Tensor& maps, int64_t num_prefix, HeadFusion fusion) {
  check_maps(maps, "cls_rollout");
  check_prefix(maps, num_prefix, "cls_rollout");
  const int64_t T = maps.size(3);
  return attention_rollout(maps, fusion).select(1, 0).slice(1, num_prefix, T).contiguous();
}

Tensor last_layer_cls_attention(const Tensor& maps, int64_t num_prefix) {
  check_maps(maps, "last_layer_cls_attention");
  check_prefix(maps, num_prefix, "last_layer_cls_attention");
  const int64_t L = maps.size(0), B = maps.size(1), H = maps.size(2), T = maps.size(3);
  Tensor last = maps.select(0, L - 1).contiguous();   // (B, NH, T, T)
  const std::vector<double> a = last.to_vector<double>();
  const int64_t n = T - num_prefix;
  std::vector<double> out(size_t(B * n), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (int64_t h = 0; h < H; ++h) s += a[size_t(((b * H + h) * T + 0) * T + num_prefix + j)];
      out[size_t(b * n + j)] = s / double(H);
    }
  return Tensor::from_vector<double>(out, {B, n}).to(maps.dtype());
}

PreparedImage prepare_image(const std::string& path, const data::Preprocess& pre) {
  PreparedImage p;
  p.image = data::eval_crop(data::read_image(path, pre.channels), pre).contiguous();
  p.input = data::normalize_crop(p.image, pre).unsqueeze(0).contiguous();   // = preprocess_file(path, pre)
  return p;
}

PreparedImage prepare_image(const std::string& path, int64_t image_size, int64_t channels,
                            const std::vector<float>& mean, const std::vector<float>& std) {
  ATTN_CHECK(image_size > 0 && (channels == 1 || channels == 3), "prepare_image: expected image_size > 0 and 1 or 3 "
             "channels, got ", image_size, " and ", channels);
  ATTN_CHECK((mean.size() == 1 || int64_t(mean.size()) == channels) && mean.size() == std.size(),
             "prepare_image: expected 1 or ", channels, " values of mean and std, got ", mean.size(), " and ", std.size());
  data::Preprocess pre;   // attn's training transform as an eval transform: squash to the size, no crop
  pre.resize_size = pre.crop_size = image_size;
  pre.squash = true;
  pre.interpolation = data::Resample::bilinear;
  pre.mean = mean;
  pre.std = std;
  pre.channels = channels;
  return prepare_image(path, pre);
}

Tensor colorize(const Tensor& map) {
  ATTN_CHECK(map.defined() && map.dim() == 2, "colorize: expected a (H, W) map, got shape ",
             map.defined() ? map.shape() : Shape{});
  const int64_t h = map.size(0), w = map.size(1);
  const std::vector<double> v = map.to_vector<double>();
  double lo = INFINITY, hi = -INFINITY;
  for (double x : v)
    if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
  Tensor out = Tensor::empty({h, w, 3}, DType::u8);
  uint8_t* d = out.data<uint8_t>();
  for (int64_t i = 0; i < h * w; ++i) {
    const double x = v[size_t(i)];
    const double t = !std::isfinite(x) || !(hi > lo) ? 0.0 : (x - lo) / (hi - lo);
    jet(t, d + 3 * i);
  }
  return out;
}

Tensor overlay_heatmap(const Tensor& image, const Tensor& map, double alpha) {
  ATTN_CHECK(image.defined() && image.dim() == 3 && image.dtype() == DType::u8 &&
                 (image.size(2) == 1 || image.size(2) == 3),
             "overlay_heatmap: expected a u8 (H, W, 1 or 3) image, got ",
             image.defined() ? image.shape() : Shape{});
  ATTN_CHECK(map.defined() && map.dim() == 2, "overlay_heatmap: expected a (h, w) map, got shape ",
             map.defined() ? map.shape() : Shape{});
  ATTN_CHECK(alpha >= 0 && alpha <= 1, "overlay_heatmap: expected alpha in [0, 1], got ", alpha);
  const int64_t h = image.size(0), w = image.size(1);
  Tensor rgb = data::convert_channels(image, 3);
  Tensor m = data::resize(map.to(DType::f32).contiguous().unsqueeze(0), h, w, data::Resample::bilinear).select(0, 0);
  Tensor heat = colorize(m);
  Tensor out = Tensor::empty({h, w, 3}, DType::u8);
  const uint8_t* a = rgb.data<uint8_t>();
  const uint8_t* b = heat.data<uint8_t>();
  uint8_t* d = out.data<uint8_t>();
  for (int64_t i = 0; i < h * w * 3; ++i)
    d[i] = uint8_t(std::lround(std::clamp((1.0 - alpha) * a[i] + alpha * b[i], 0.0, 255.0)));
  return out;
}

Tensor upscaled_panel(const Tensor& image, int64_t min_panel) {
  const int64_t s = image.size(0), w = image.size(1);
  const int64_t factor = std::max<int64_t>(1, (min_panel + std::max(s, w) - 1) / std::max(s, w));
  return data::resize(data::convert_channels(image, 3), s * factor, w * factor, data::Resample::nearest);
}

Tensor side_by_side(const std::vector<Tensor>& panels) {
  ATTN_CHECK(!panels.empty(), "side_by_side: expected at least one panel");
  const int64_t ph = panels[0].size(0), pw = panels[0].size(1), n = int64_t(panels.size());
  for (const Tensor& p : panels)
    ATTN_CHECK(p.dtype() == DType::u8 && p.shape() == Shape({ph, pw, 3}), "side_by_side: expected u8 (", ph, ", ", pw,
               ", 3) panels, got ", p.shape());
  Tensor out = Tensor::empty({ph, n * pw, 3}, DType::u8);
  uint8_t* d = out.data<uint8_t>();
  for (int64_t k = 0; k < n; ++k) {
    const Tensor c = panels[size_t(k)].contiguous();
    const uint8_t* src = c.data<uint8_t>();
    for (int64_t y = 0; y < ph; ++y)
      std::copy(src + y * pw * 3, src + (y + 1) * pw * 3, d + (y * n * pw + k * pw) * 3);
  }
  return out;
}

Explanation explain(const models::VisionTransformer& vit, const PreparedImage& p, HeadFusion fusion, int64_t min_panel,
                    double alpha) {
  ATTN_CHECK(p.input.defined() && p.input.dim() == 4 && p.input.size(0) == 1,
             "explain: expected one prepared image (1, C, S, S), got shape ", p.input.defined() ? p.input.shape() : Shape{});
  ATTN_CHECK(min_panel > 0, "explain: expected min_panel > 0, got ", min_panel);
  NoGradGuard ng;
  Tensor maps = vit.attention_maps(p.input);   // (L, 1, NH, T, T)
  const int64_t prefix = vit.num_prefix_tokens();
  Explanation e;
  e.rollout = square(cls_rollout(maps, prefix, fusion).select(0, 0).to(DType::f32), "explain");
  e.last_cls = square(last_layer_cls_attention(maps, prefix).select(0, 0).to(DType::f32), "explain");
  const Tensor big = upscaled_panel(p.image, min_panel);
  e.panel = side_by_side({big, overlay_heatmap(big, e.rollout, alpha), overlay_heatmap(big, e.last_cls, alpha)});
  return e;
}

}  // namespace attn::viz

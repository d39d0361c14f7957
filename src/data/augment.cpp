// RandAugment (torchvision 0.14 semantics on u8 images), Mixup/CutMix (timm), repeated
// augmentation order; see attn/data/augment.h. The ops work on raw contiguous u8 (C, H, W)
// buffers with plain loops (no OpenMP) so the DataLoader's background thread can call them.
#include "attn/data/augment.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

namespace attn::data {
namespace {

constexpr double kPi = 3.14159265358979323846;
// Python's math.radians / math.degrees.
double radians(double x) { return x * (kPi / 180.0); }
double degrees(double x) { return x * (180.0 / kPi); }

// torch.linspace(start, end, steps) in float32 as torch 1.13's CPU kernel computes it (AVX2 build,
// GCC contracting a * b + c into FMA): the first floor(steps / 16) * 16 values in 8-wide vector
// chunks (base + k * step, base from the scalar formula), the rest scalar; below steps / 2
// fma(step, i, start), from there fma(-step, steps - 1 - i, end). Checked against torch in
// tests/data/augment_test.cpp (RandAugment magnitude tables).
std::vector<float> torch_linspace_f32(double start_d, double end_d, int64_t steps) {
  std::vector<float> out(static_cast<size_t>(std::max<int64_t>(steps, 0)));
  if (steps <= 0) return out;
  const float start = float(start_d), end = float(end_d);
  if (steps == 1) {
    out[0] = start;
    return out;
  }
  const float step = (end - start) / float(steps - 1);
  const int64_t halfway = steps / 2;
  auto scalar = [&](int64_t i) {
    return i < halfway ? std::fma(step, float(i), start) : std::fma(-step, float(steps - i - 1), end);
  };
  const int64_t vec = 8, nvec = (steps / (2 * vec)) * (2 * vec);
  for (int64_t idx = 0; idx < nvec; idx += vec) {
    const float base = scalar(idx);
    for (int64_t k = 0; k < vec; ++k) {
      const float ks = float(k) * step;   // kept apart: no contraction here
      out[size_t(idx + k)] = base + ks;
    }
  }
  for (int64_t i = nvec; i < steps; ++i) out[size_t(i)] = scalar(i);
  return out;
}

inline uint8_t to_u8_trunc(float v) {
  // clamp(0, 255) then .to(uint8) (truncation toward zero); NaN cannot occur here.
  v = std::min(std::max(v, 0.0f), 255.0f);
  return uint8_t(v);
}

// torchvision's _blend(img1, img2, ratio) for u8: (ratio * a + (1 - ratio) * b) in float32.
inline uint8_t blend(uint8_t a, float b, double ratio) {
  const float r = float(ratio), r1 = float(1.0 - ratio);
  return to_u8_trunc(r * float(a) + r1 * b);
}

// rgb_to_grayscale for u8: (0.2989 r + 0.587 g + 0.114 b) in float32, truncated.
void grayscale(const uint8_t* img, int64_t hw, uint8_t* out) {
  const float wr = float(0.2989), wg = float(0.587), wb = float(0.114);
  for (int64_t i = 0; i < hw; ++i)
    out[i] = to_u8_trunc(wr * float(img[i]) + wg * float(img[hw + i]) + wb * float(img[2 * hw + i]));
}

// _get_inverse_affine_matrix(center, angle, translate, scale = 1, shear), in double as Python does.
std::array<double, 6> inverse_affine(double cx, double cy, double angle, double tx, double ty, double shx, double shy) {
  const double rot = radians(angle), sx = radians(shx), sy = radians(shy);
  const double a = std::cos(rot - sy) / std::cos(sy);
  const double b = -std::cos(rot - sy) * std::tan(sx) / std::cos(sy) - std::sin(rot);
  const double c = std::sin(rot - sy) / std::cos(sy);
  const double d = -std::sin(rot - sy) * std::tan(sx) / std::cos(sy) + std::cos(rot);
  std::array<double, 6> m = {d, -b, 0.0, -c, a, 0.0};
  for (double& v : m) v = v / 1.0;
  m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
  m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
  m[2] += cx;
  m[5] += cy;
  return m;
}

// F_t.affine / F_t.rotate with nearest sampling and zero fill: the float32 grid of _gen_affine_grid,
// then grid_sample(mode="nearest", padding_mode="zeros", align_corners=False).
void affine_nearest(const uint8_t* src, uint8_t* dst, int64_t c, int64_t h, int64_t w, const std::array<double, 6>& m) {
  const float sw = float(0.5 * double(w)), sh = float(0.5 * double(h));
  const float r00 = float(m[0]) / sw, r10 = float(m[1]) / sw, r20 = float(m[2]) / sw;
  const float r01 = float(m[3]) / sh, r11 = float(m[4]) / sh, r21 = float(m[5]) / sh;
  const std::vector<float> xs = torch_linspace_f32(-double(w) * 0.5 + 0.5, double(w) * 0.5 + 0.5 - 1, w);
  const std::vector<float> ys = torch_linspace_f32(-double(h) * 0.5 + 0.5, double(h) * 0.5 + 0.5 - 1, h);
  const float half_w = float(w) / 2.0f, half_h = float(h) / 2.0f;
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x) {
      const float gx = xs[size_t(x)] * r00 + ys[size_t(y)] * r10 + r20;
      const float gy = xs[size_t(x)] * r01 + ys[size_t(y)] * r11 + r21;
      const float fx = std::nearbyint((gx + 1.0f) * half_w - 0.5f);
      const float fy = std::nearbyint((gy + 1.0f) * half_h - 0.5f);
      const bool in = fx >= 0 && fx <= float(w - 1) && fy >= 0 && fy <= float(h - 1);
      const int64_t sx = in ? int64_t(fx) : 0, sy = in ? int64_t(fy) : 0;
      for (int64_t ci = 0; ci < c; ++ci)
        dst[(ci * h + y) * w + x] = in ? src[(ci * h + sy) * w + sx] : 0;
    }
}

// torchvision's equalize on each channel of a u8 (C, H*W) buffer, in place.
void equalize_u8(uint8_t* img, int64_t c, int64_t hw) {
  for (int64_t ci = 0; ci < c; ++ci) {
    uint8_t* p = img + ci * hw;
    std::array<int64_t, 256> hist{};
    for (int64_t i = 0; i < hw; ++i) ++hist[p[i]];
    // step = sum of the non-zero bins but the last one, // 255.
    int64_t last = 255;
    while (last > 0 && hist[size_t(last)] == 0) --last;
    int64_t total = 0;
    for (int64_t v = 0; v < last; ++v) total += hist[size_t(v)];
    const int64_t step = total / 255;
    if (step == 0) continue;
    std::array<uint8_t, 256> lut{};
    int64_t cum = 0;
    lut[0] = 0;
    for (int64_t v = 0; v < 255; ++v) {
      cum += hist[size_t(v)];
      lut[size_t(v + 1)] = uint8_t(std::min<int64_t>(255, (cum + step / 2) / step));
    }
    for (int64_t i = 0; i < hw; ++i) p[i] = lut[p[i]];
  }
}

// torchvision's adjust_sharpness(1 + mag) of a u8 (C, H, W) buffer, in place (tmp: C*H*W bytes).
void sharpen_u8(uint8_t* img, int64_t c, int64_t h, int64_t w, double mag, std::vector<uint8_t>& tmp) {
  const int64_t hw = h * w, n = c * hw;
  if (w <= 2 || h <= 2) return;
  const double f = 1.0 + mag;
  const float k1 = 1.0f / 13.0f, k5 = 5.0f / 13.0f;
  std::memcpy(tmp.data(), img, size_t(n));   // degenerate image: borders are the original
  for (int64_t ci = 0; ci < c; ++ci) {
    const uint8_t* p = img + ci * hw;
    for (int64_t y = 1; y < h - 1; ++y)
      for (int64_t x = 1; x < w - 1; ++x) {
        float s = 0.0f;
        for (int64_t dy = -1; dy <= 1; ++dy)
          for (int64_t dx = -1; dx <= 1; ++dx)
            s += float(p[(y + dy) * w + x + dx]) * (dy == 0 && dx == 0 ? k5 : k1);
        tmp[size_t(ci * hw + y * w + x)] = uint8_t(std::nearbyint(s));
      }
  }
  for (int64_t i = 0; i < n; ++i) img[i] = blend(img[i], float(tmp[size_t(i)]), f);
}

// One op on a contiguous u8 (C, H, W) buffer, in place (tmp: scratch of C*H*W bytes).
void apply_op_u8(uint8_t* img, int64_t c, int64_t h, int64_t w, AugOp op, double mag, std::vector<uint8_t>& tmp) {
  const int64_t hw = h * w, n = c * hw;
  tmp.resize(size_t(n));
  switch (op) {
    case AugOp::identity: return;
    case AugOp::shear_x:
    case AugOp::shear_y:
    case AugOp::translate_x:
    case AugOp::translate_y:
    case AugOp::rotate: {
      std::array<double, 6> m{};
      if (op == AugOp::shear_x || op == AugOp::shear_y) {
        const double deg = degrees(std::atan(mag));
        // center=[0, 0] in pixels -> [-w/2, -h/2] relative to the image centre.
        m = inverse_affine(0.0 - double(w) * 0.5, 0.0 - double(h) * 0.5, 0.0, 0.0, 0.0,
                           op == AugOp::shear_x ? deg : 0.0, op == AugOp::shear_y ? deg : 0.0);
      } else if (op == AugOp::rotate) {
        m = inverse_affine(0.0, 0.0, -mag, 0.0, 0.0, 0.0, 0.0);
      } else {
        const double t = double(int64_t(mag));   // Python int(): toward zero
        m = inverse_affine(0.0, 0.0, 0.0, op == AugOp::translate_x ? t : 0.0, op == AugOp::translate_y ? t : 0.0, 0.0,
                           0.0);
      }
      affine_nearest(img, tmp.data(), c, h, w, m);
      std::memcpy(img, tmp.data(), size_t(n));
      return;
    }
    case AugOp::brightness: {
      const double f = 1.0 + mag;
      for (int64_t i = 0; i < n; ++i) img[i] = blend(img[i], 0.0f, f);
      return;
    }
    case AugOp::color: {
      if (c == 1) return;   // torchvision: saturation of a 1-channel image is the image
      const double f = 1.0 + mag;
      grayscale(img, hw, tmp.data());
      for (int64_t ci = 0; ci < c; ++ci)
        for (int64_t i = 0; i < hw; ++i) img[ci * hw + i] = blend(img[ci * hw + i], float(tmp[size_t(i)]), f);
      return;
    }
    case AugOp::contrast: {
      const double f = 1.0 + mag;
      const uint8_t* g = img;
      if (c == 3) {
        grayscale(img, hw, tmp.data());
        g = tmp.data();
      }
      // torch.mean on CPU: the sum (exact: integers below 2^24) divided by the count, in float32.
      int64_t sum = 0;
      for (int64_t i = 0; i < hw; ++i) sum += g[i];
      const float mean = float(sum) / float(hw);
      for (int64_t i = 0; i < n; ++i) img[i] = blend(img[i], mean, f);
      return;
    }
    case AugOp::sharpness:
      sharpen_u8(img, c, h, w, mag, tmp);
      return;
    case AugOp::posterize: {
      const int bits = int(mag);
      const uint8_t mask = uint8_t((-(int64_t(1) << (8 - bits))) & 0xFF);
      for (int64_t i = 0; i < n; ++i) img[i] &= mask;
      return;
    }
    case AugOp::solarize: {
      const float th = float(mag);
      for (int64_t i = 0; i < n; ++i)
        if (float(img[i]) >= th) img[i] = uint8_t(255 - img[i]);
      return;
    }
    case AugOp::autocontrast: {
      for (int64_t ci = 0; ci < c; ++ci) {
        uint8_t* p = img + ci * hw;
        const auto [mn_it, mx_it] = std::minmax_element(p, p + hw);
        // bound / (max - min) is Tensor.__rtruediv__: reciprocal, then times 255.
        float mn = float(*mn_it), scale = (1.0f / (float(*mx_it) - mn)) * 255.0f;
        if (!std::isfinite(scale)) {
          mn = 0.0f;
          scale = 1.0f;
        }
        for (int64_t i = 0; i < hw; ++i) p[i] = to_u8_trunc((float(p[i]) - mn) * scale);
      }
      return;
    }
    case AugOp::equalize:
      equalize_u8(img, c, hw);
      return;
  }
}

void check_u8_chw(const Tensor& img, const char* op) {
  ATTN_CHECK(img.defined() && img.dim() == 3 && img.dtype() == DType::u8 && (img.size(0) == 1 || img.size(0) == 3),
             op, ": expected a u8 (C, H, W) image with C = 1 or 3, got ",
             img.defined() ? dtype_name(img.dtype()) : "undefined", " of shape ", img.defined() ? img.shape() : Shape{});
}

void check_options(const RandAugmentOptions& opt) {
  ATTN_CHECK(opt.num_bins >= 2 && opt.magnitude >= 0 && opt.magnitude < opt.num_bins && opt.num_ops >= 0,
             "rand_augment: expected num_ops >= 0, num_bins >= 2 and 0 <= magnitude < num_bins, got num_ops ", opt.num_ops,
             ", magnitude ", opt.magnitude, ", num_bins ", opt.num_bins);
}

// The RandAugment loop on a u8 buffer.
void rand_augment_u8(uint8_t* img, int64_t c, int64_t h, int64_t w, const RandAugmentOptions& opt, Generator& g) {
  const auto& ops = rand_augment_ops();
  std::vector<uint8_t> tmp;
  for (int64_t k = 0; k < opt.num_ops; ++k) {
    const AugOp op = ops[size_t(std::floor(g.uniform() * double(ops.size())))];
    double mag = aug_op_magnitude(op, opt.magnitude, opt.num_bins, h, w);
    if (aug_op_signed(op) && int64_t(std::floor(g.uniform() * 2.0)) == 1) mag *= -1.0;
    apply_op_u8(img, c, h, w, op, mag, tmp);
  }
}

// Marsaglia & Tsang (2000) gamma(a, 1); for a < 1 the boost gamma(a + 1) * U^(1/a).
double sample_gamma(double a, Generator& g) {
  if (a < 1.0) {
    const double u = g.uniform();
    return sample_gamma(a + 1.0, g) * std::pow(u, 1.0 / a);
  }
  const double d = a - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = g.normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = g.uniform();
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (u > 0.0 && std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

}  // namespace

// ---- RandAugment ----

const std::vector<AugOp>& rand_augment_ops() {
  static const std::vector<AugOp> ops = {AugOp::identity,   AugOp::shear_x,    AugOp::shear_y,   AugOp::translate_x,
                                         AugOp::translate_y, AugOp::rotate,     AugOp::brightness, AugOp::color,
                                         AugOp::contrast,   AugOp::sharpness,  AugOp::posterize, AugOp::solarize,
                                         AugOp::autocontrast, AugOp::equalize};
  return ops;
}

const char* aug_op_name(AugOp op) {
  switch (op) {
    case AugOp::identity: return "Identity";
    case AugOp::shear_x: return "ShearX";
    case AugOp::shear_y: return "ShearY";
    case AugOp::translate_x: return "TranslateX";
    case AugOp::translate_y: return "TranslateY";
    case AugOp::rotate: return "Rotate";
    case AugOp::brightness: return "Brightness";
    case AugOp::color: return "Color";
    case AugOp::contrast: return "Contrast";
    case AugOp::sharpness: return "Sharpness";
    case AugOp::posterize: return "Posterize";
    case AugOp::solarize: return "Solarize";
    case AugOp::autocontrast: return "AutoContrast";
    case AugOp::equalize: return "Equalize";
  }
  return "?";
}

AugOp parse_aug_op(const std::string& name) {
  std::string known;
  for (AugOp op : rand_augment_ops()) {
    if (name == aug_op_name(op)) return op;
    known += (known.empty() ? "" : ", ") + std::string(aug_op_name(op));
  }
  fail("rand_augment: unknown op '", name, "' (known: ", known, ")");
}

bool aug_op_signed(AugOp op) {
  switch (op) {
    case AugOp::shear_x: case AugOp::shear_y: case AugOp::translate_x: case AugOp::translate_y:
    case AugOp::rotate: case AugOp::brightness: case AugOp::color: case AugOp::contrast: case AugOp::sharpness:
      return true;
    default: return false;
  }
}

double aug_op_magnitude(AugOp op, int64_t bin, int64_t num_bins, int64_t h, int64_t w) {
  ATTN_CHECK(num_bins >= 2 && bin >= 0 && bin < num_bins, "rand_augment: expected num_bins >= 2 and 0 <= magnitude < "
             "num_bins, got magnitude ", bin, " of ", num_bins, " bins");
  auto lin = [&](double a, double b) { return double(torch_linspace_f32(a, b, num_bins)[size_t(bin)]); };
  switch (op) {
    case AugOp::shear_x: case AugOp::shear_y: return lin(0.0, 0.3);
    case AugOp::translate_x: return lin(0.0, 150.0 / 331.0 * double(w));
    case AugOp::translate_y: return lin(0.0, 150.0 / 331.0 * double(h));
    case AugOp::rotate: return lin(0.0, 30.0);
    case AugOp::brightness: case AugOp::color: case AugOp::contrast: case AugOp::sharpness: return lin(0.0, 0.9);
    case AugOp::posterize: {
      // 8 - (arange(num_bins) / ((num_bins - 1) / 4)).round().int(), the division in float32.
      const float q = float(double(bin)) / float(double(num_bins - 1) / 4.0);
      return double(8 - int64_t(std::nearbyint(q)));
    }
    case AugOp::solarize: return lin(255.0, 0.0);
    default: return 0.0;
  }
}

Tensor apply_aug_op(const Tensor& img, AugOp op, double magnitude) {
  check_u8_chw(img, "apply_aug_op");
  if (op == AugOp::posterize)
    ATTN_CHECK(magnitude >= 0 && magnitude <= 8, "apply_aug_op: Posterize expects bits in [0, 8], got ", magnitude);
  if (op == AugOp::brightness || op == AugOp::color || op == AugOp::contrast || op == AugOp::sharpness)
    ATTN_CHECK(1.0 + magnitude >= 0, "apply_aug_op: ", aug_op_name(op), " expects a factor 1 + magnitude >= 0, got ",
               1.0 + magnitude);
  Tensor out = img.contiguous().clone();
  std::vector<uint8_t> tmp;
  apply_op_u8(out.data<uint8_t>(), out.size(0), out.size(1), out.size(2), op, magnitude, tmp);
  return out;
}

Tensor rand_augment(const Tensor& img, const RandAugmentOptions& opt, Generator& g) {
  check_options(opt);
  ATTN_CHECK(img.defined() && img.dim() == 3 && (img.dtype() == DType::u8 || img.dtype() == DType::f32) &&
                 (img.size(0) == 1 || img.size(0) == 3),
             "rand_augment: expected a u8 or f32 (C, H, W) image with C = 1 or 3, got ",
             img.defined() ? dtype_name(img.dtype()) : "undefined", " of shape ", img.defined() ? img.shape() : Shape{});
  Tensor out = img.contiguous().clone();
  if (img.dtype() == DType::u8)
    rand_augment_u8(out.data<uint8_t>(), out.size(0), out.size(1), out.size(2), opt, g);
  else
    rand_augment_inplace(out.data<float>(), out.size(0), out.size(1), out.size(2), opt, g);
  return out;
}

void rand_augment_inplace(float* img, int64_t c, int64_t h, int64_t w, const RandAugmentOptions& opt, Generator& g) {
  check_options(opt);
  ATTN_CHECK(c == 1 || c == 3, "rand_augment: expected C = 1 or 3, got ", c);
  const int64_t n = c * h * w;
  std::vector<uint8_t> u(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float v = img[i];
    u[size_t(i)] = std::isnan(v) ? 0 : uint8_t(std::lround(double(std::clamp(v, 0.0f, 1.0f)) * 255.0));
  }
  rand_augment_u8(u.data(), c, h, w, opt, g);
  for (int64_t i = 0; i < n; ++i) img[i] = float(u[size_t(i)]) / 255.0f;
}

// ---- Mixup / CutMix ----

double sample_beta(double a, double b, Generator& g) {
  ATTN_CHECK(a > 0 && b > 0, "sample_beta: expected a > 0 and b > 0, got ", a, " and ", b);
  const double x = sample_gamma(a, g), y = sample_gamma(b, g);
  return x + y > 0 ? x / (x + y) : 0.5;
}

MixupParams cutmix_box(double lam, int64_t h, int64_t w, int64_t cy, int64_t cx, bool correct_lam) {
  ATTN_CHECK(lam >= 0 && lam <= 1, "cutmix_box: expected lam in [0, 1], got ", lam);
  const double ratio = std::sqrt(1.0 - lam);
  const int64_t cut_h = int64_t(double(h) * ratio), cut_w = int64_t(double(w) * ratio);
  MixupParams p;
  p.cutmix = true;
  p.yl = std::clamp<int64_t>(cy - cut_h / 2, 0, h);
  p.yh = std::clamp<int64_t>(cy + cut_h / 2, 0, h);
  p.xl = std::clamp<int64_t>(cx - cut_w / 2, 0, w);
  p.xh = std::clamp<int64_t>(cx + cut_w / 2, 0, w);
  p.lam = correct_lam ? 1.0 - double((p.yh - p.yl) * (p.xh - p.xl)) / double(h * w) : lam;
  return p;
}

MixupParams mixup_params(const MixupOptions& opt, int64_t h, int64_t w, Generator& g) {
  ATTN_CHECK(opt.mixup_alpha >= 0 && opt.cutmix_alpha >= 0 && (opt.mixup_alpha > 0 || opt.cutmix_alpha > 0),
             "mixup: expected mixup_alpha or cutmix_alpha > 0, got ", opt.mixup_alpha, " and ", opt.cutmix_alpha);
  MixupParams p;
  if (!(g.uniform() < opt.prob)) return p;
  bool use_cutmix = false;
  double lam;
  if (opt.mixup_alpha > 0 && opt.cutmix_alpha > 0) {
    use_cutmix = g.uniform() < opt.switch_prob;
    lam = use_cutmix ? sample_beta(opt.cutmix_alpha, opt.cutmix_alpha, g) : sample_beta(opt.mixup_alpha, opt.mixup_alpha, g);
  } else if (opt.mixup_alpha > 0) {
    lam = sample_beta(opt.mixup_alpha, opt.mixup_alpha, g);
  } else {
    use_cutmix = true;
    lam = sample_beta(opt.cutmix_alpha, opt.cutmix_alpha, g);
  }
  if (lam == 1.0) return p;
  if (!use_cutmix) {
    p.lam = lam;
    return p;
  }
  const int64_t cy = g.randint(h), cx = g.randint(w);
  return cutmix_box(lam, h, w, cy, cx, opt.correct_lam);
}

Tensor mixup_target(const Tensor& labels, int64_t num_classes, double lam, double smoothing) {
  ATTN_CHECK(labels.defined() && labels.dim() == 1, "mixup_target: expected labels of shape (B), got ",
             labels.defined() ? labels.shape() : Shape{});
  ATTN_CHECK(num_classes > 0, "mixup_target: expected num_classes > 0, got ", num_classes);
  const std::vector<int64_t> y = labels.to_vector<int64_t>();
  const int64_t b = int64_t(y.size());
  for (int64_t v : y)
    ATTN_CHECK(v >= 0 && v < num_classes, "mixup_target: label ", v, " is outside [0, ", num_classes, ")");
  const double off_d = smoothing / double(num_classes);
  const float off = float(off_d), on = float(1.0 - smoothing + off_d);
  const float l = float(lam), l1 = float(1.0 - lam);
  Tensor out = Tensor::empty({b, num_classes}, DType::f32);
  float* t = out.data<float>();
  for (int64_t i = 0; i < b; ++i) {
    const int64_t a = y[size_t(i)], f = y[size_t(b - 1 - i)];
    for (int64_t k = 0; k < num_classes; ++k)
      t[i * num_classes + k] = (k == a ? on : off) * l + (k == f ? on : off) * l1;
  }
  return out;
}

MixedBatch apply_mixup(const Tensor& images, const Tensor& labels, const MixupParams& p, const MixupOptions& opt) {
  ATTN_CHECK(images.defined() && images.dim() == 4 && images.dtype() == DType::f32,
             "mixup: expected images (B, C, H, W) f32, got ", images.defined() ? dtype_name(images.dtype()) : "undefined",
             " of shape ", images.defined() ? images.shape() : Shape{});
  const int64_t b = images.size(0), c = images.size(1), h = images.size(2), w = images.size(3);
  ATTN_CHECK(b % 2 == 0, "mixup: expected an even batch size, got ", b);
  ATTN_CHECK(labels.defined() && labels.dim() == 1 && labels.size(0) == b, "mixup: expected labels of shape [", b,
             "], got ", labels.defined() ? labels.shape() : Shape{});
  if (p.cutmix)
    ATTN_CHECK(0 <= p.yl && p.yl <= p.yh && p.yh <= h && 0 <= p.xl && p.xl <= p.xh && p.xh <= w,
               "mixup: CutMix box rows [", p.yl, ", ", p.yh, ") columns [", p.xl, ", ", p.xh,
               ") does not fit an image of ", Shape{h, w});
  MixedBatch mb;
  mb.params = p;
  Tensor src = images.contiguous();
  mb.images = src.clone();
  const int64_t per = c * h * w;
  const float* s = src.data<float>();
  float* d = mb.images.data<float>();
  if (p.lam != 1.0) {
    if (p.cutmix) {
      for (int64_t i = 0; i < b; ++i)
        for (int64_t ci = 0; ci < c; ++ci)
          for (int64_t y = p.yl; y < p.yh; ++y)
            for (int64_t x = p.xl; x < p.xh; ++x)
              d[i * per + (ci * h + y) * w + x] = s[(b - 1 - i) * per + (ci * h + y) * w + x];
    } else {
      const float l = float(p.lam), l1 = float(1.0 - p.lam);
      for (int64_t i = 0; i < b; ++i)
        for (int64_t k = 0; k < per; ++k) d[i * per + k] = s[i * per + k] * l + s[(b - 1 - i) * per + k] * l1;
    }
  }
  mb.targets = mixup_target(labels, opt.num_classes, p.lam, opt.label_smoothing);
  return mb;
}

MixedBatch mixup(const Tensor& images, const Tensor& labels, const MixupOptions& opt, Generator& g) {
  ATTN_CHECK(images.defined() && images.dim() == 4, "mixup: expected images (B, C, H, W) f32, got shape ",
             images.defined() ? images.shape() : Shape{});
  const MixupParams p = mixup_params(opt, images.size(2), images.size(3), g);
  return apply_mixup(images, labels, p, opt);
}

// ---- repeated augmentation ----

int64_t repeated_augmentation_length(int64_t n) { return n >= 256 ? n / 256 * 256 : n; }

std::vector<int64_t> repeated_augmentation_order(int64_t n, int64_t repeats, Generator& g, bool shuffle) {
  ATTN_CHECK(n >= 0 && repeats >= 1, "repeated_augmentation_order: expected n >= 0 and repeats >= 1, got n ", n,
             ", repeats ", repeats);
  std::vector<int64_t> base(static_cast<size_t>(n));
  if (shuffle && n > 0) {
    const Tensor perm = randperm(n, g);   // copied by hand: the loader's thread opens no OpenMP region
    const int64_t* p = perm.data<int64_t>();
    base.assign(p, p + n);
  } else {
    for (int64_t i = 0; i < n; ++i) base[size_t(i)] = i;
  }
  const int64_t keep = repeated_augmentation_length(n);
  std::vector<int64_t> out;
  out.reserve(size_t(keep));
  for (int64_t i = 0; i < n && int64_t(out.size()) < keep; ++i)
    for (int64_t r = 0; r < repeats && int64_t(out.size()) < keep; ++r) out.push_back(base[size_t(i)]);
  return out;
}

}  // namespace attn::data

// Image transforms (torchvision semantics and draw order); see attn/data/transforms.h.
#include "attn/data/transforms.h"

#include <cmath>
#include <cstring>

namespace attn::data {
namespace {

// The three kinds of torch draws torchvision's transforms make, one g.uniform() each.
double draw_rand(Generator& g) { return g.uniform(); }
int64_t draw_randint(Generator& g, int64_t lo, int64_t hi) {
  const double u = g.uniform();
  return lo + int64_t(std::floor(u * double(hi - lo)));
}
float draw_uniform_f32(Generator& g, double a, double b) { return float(a + (b - a) * g.uniform()); }

// (C, H, W) f32, made contiguous.
Tensor check_image(const Tensor& img, const char* op) {
  ATTN_CHECK(img.defined(), op, ": expected a (C, H, W) f32 image, got an undefined tensor");
  ATTN_CHECK(img.dim() == 3 && img.dtype() == DType::f32, op, ": expected a (C, H, W) f32 image, got a ",
             dtype_name(img.dtype()), " tensor of shape ", img.shape());
  return img.contiguous();
}

}  // namespace

// ---- crop ----

CropParams crop_params(int64_t h, int64_t w, int64_t out_h, int64_t out_w, int64_t padding, Generator& g) {
  ATTN_CHECK(padding >= 0, "random_crop: expected padding >= 0, got ", padding);
  ATTN_CHECK(out_h > 0 && out_w > 0, "random_crop: expected a positive crop size, got ", Shape{out_h, out_w});
  const int64_t ph = h + 2 * padding, pw = w + 2 * padding;
  ATTN_CHECK(ph >= out_h && pw >= out_w, "random_crop: crop size ", Shape{out_h, out_w},
             " is larger than the padded image ", Shape{ph, pw});
  if (ph == out_h && pw == out_w) return {};
  CropParams p;
  p.top = draw_randint(g, 0, ph - out_h + 1);
  p.left = draw_randint(g, 0, pw - out_w + 1);
  return p;
}

void pad_crop_into(const float* src, int64_t c, int64_t h, int64_t w, int64_t padding, int64_t top,
                   int64_t left, int64_t out_h, int64_t out_w, float* dst) {
  for (int64_t ch = 0; ch < c; ++ch) {
    const float* s = src + ch * h * w;
    float* d = dst + ch * out_h * out_w;
    for (int64_t y = 0; y < out_h; ++y) {
      const int64_t sy = top + y - padding;
      float* drow = d + y * out_w;
      if (sy < 0 || sy >= h) {
        std::memset(drow, 0, size_t(out_w) * sizeof(float));
        continue;
      }
      for (int64_t x = 0; x < out_w; ++x) {
        const int64_t sx = left + x - padding;
        drow[x] = (sx >= 0 && sx < w) ? s[sy * w + sx] : 0.0f;
      }
    }
  }
}

Tensor pad_crop(const Tensor& img, int64_t padding, int64_t top, int64_t left, int64_t out_h, int64_t out_w) {
  Tensor x = check_image(img, "pad_crop");
  ATTN_CHECK(padding >= 0, "pad_crop: expected padding >= 0, got ", padding);
  ATTN_CHECK(out_h >= 0 && out_w >= 0, "pad_crop: expected a non-negative crop size, got ", Shape{out_h, out_w});
  const int64_t c = x.size(0), h = x.size(1), w = x.size(2);
  Tensor out = Tensor::empty({c, out_h, out_w});
  pad_crop_into(x.data<float>(), c, h, w, padding, top, left, out_h, out_w, out.data<float>());
  return out;
}

Tensor random_crop(const Tensor& img, int64_t out_h, int64_t out_w, int64_t padding, Generator& g) {
  Tensor x = check_image(img, "random_crop");
  const CropParams p = crop_params(x.size(1), x.size(2), out_h, out_w, padding, g);
  return pad_crop(x, padding, p.top, p.left, out_h, out_w);
}

// ---- flip ----

void hflip_inplace(float* img, int64_t c, int64_t h, int64_t w) {
  for (int64_t r = 0; r < c * h; ++r) {
    float* row = img + r * w;
    for (int64_t a = 0, b = w - 1; a < b; ++a, --b) std::swap(row[a], row[b]);
  }
}

Tensor hflip(const Tensor& img) {
  Tensor out = check_image(img, "hflip").clone();
  hflip_inplace(out.data<float>(), out.size(0), out.size(1), out.size(2));
  return out;
}

bool hflip_param(double p, Generator& g) {
  ATTN_CHECK(p >= 0.0 && p <= 1.0, "random_hflip: expected p in [0, 1], got ", p);
  return draw_rand(g) < p;
}

Tensor random_hflip(const Tensor& img, double p, Generator& g) {
  Tensor x = check_image(img, "random_hflip");
  if (hflip_param(p, g)) return hflip(x);
  return x.clone();
}

// ---- erasing ----

EraseParams erasing_params(int64_t h, int64_t w, const ErasingOptions& opt, Generator& g) {
  ATTN_CHECK(opt.p >= 0.0 && opt.p <= 1.0, "random_erasing: expected p in [0, 1], got ", opt.p);
  ATTN_CHECK(opt.scale_lo >= 0.0 && opt.scale_lo <= opt.scale_hi && opt.scale_hi <= 1.0,
             "random_erasing: expected 0 <= scale_lo <= scale_hi <= 1, got scale (", opt.scale_lo, ", ",
             opt.scale_hi, ")");
  ATTN_CHECK(opt.ratio_lo > 0.0 && opt.ratio_lo <= opt.ratio_hi,
             "random_erasing: expected 0 < ratio_lo <= ratio_hi, got ratio (", opt.ratio_lo, ", ", opt.ratio_hi, ")");
  EraseParams e;
  if (!(draw_rand(g) < opt.p)) return e;
  const double area = double(h * w);
  // torch.log(torch.tensor(ratio)): f32 logs.
  const float lr0 = std::log(float(opt.ratio_lo)), lr1 = std::log(float(opt.ratio_hi));
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double erase_area = area * double(draw_uniform_f32(g, opt.scale_lo, opt.scale_hi));
    const double aspect = double(std::exp(draw_uniform_f32(g, double(lr0), double(lr1))));
    // Python's round(): half to even, which nearbyint does in the default rounding mode.
    const int64_t eh = int64_t(std::nearbyint(std::sqrt(erase_area * aspect)));
    const int64_t ew = int64_t(std::nearbyint(std::sqrt(erase_area / aspect)));
    if (!(eh < h && ew < w)) continue;
    e.erase = true;
    e.h = eh;
    e.w = ew;
    e.top = draw_randint(g, 0, h - eh + 1);
    e.left = draw_randint(g, 0, w - ew + 1);
    return e;
  }
  return e;  // torchvision returns the image unchanged
}

void erase_inplace(float* img, int64_t c, int64_t h, int64_t w, const EraseParams& box, float value) {
  if (!box.erase) return;
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t y = box.top; y < box.top + box.h; ++y) {
      float* row = img + (ch * h + y) * w;
      for (int64_t x = box.left; x < box.left + box.w; ++x) row[x] = value;
    }
}

Tensor erase(const Tensor& img, int64_t top, int64_t left, int64_t h, int64_t w, float value) {
  Tensor out = check_image(img, "erase").clone();
  const int64_t H = out.size(1), W = out.size(2);
  ATTN_CHECK(top >= 0 && left >= 0 && h >= 0 && w >= 0 && top + h <= H && left + w <= W,
             "erase: expected the box (top ", top, ", left ", left, ", h ", h, ", w ", w,
             ") inside the image of size ", Shape{H, W});
  erase_inplace(out.data<float>(), out.size(0), H, W, EraseParams{true, top, left, h, w}, value);
  return out;
}

Tensor random_erasing(const Tensor& img, Generator& g, const ErasingOptions& opt) {
  Tensor out = check_image(img, "random_erasing").clone();
  const EraseParams e = erasing_params(out.size(1), out.size(2), opt, g);
  erase_inplace(out.data<float>(), out.size(0), out.size(1), out.size(2), e, opt.value);
  return out;
}

// ---- normalize ----

static void check_norm_params(int64_t c, const std::vector<float>& mean, const std::vector<float>& std) {
  ATTN_CHECK(mean.size() == 1 || int64_t(mean.size()) == c, "normalize: expected 1 or ", c,
             " mean values, got ", mean.size());
  ATTN_CHECK(std.size() == 1 || int64_t(std.size()) == c, "normalize: expected 1 or ", c, " std values, got ",
             std.size());
  for (size_t i = 0; i < std.size(); ++i)
    ATTN_CHECK(std[i] != 0.0f, "normalize: expected non-zero std, got std[", i, "] = 0");
}

void normalize_inplace(float* img, int64_t c, int64_t h, int64_t w, const std::vector<float>& mean,
                       const std::vector<float>& std) {
  for (int64_t ch = 0; ch < c; ++ch) {
    const float m = mean.size() == 1 ? mean[0] : mean[size_t(ch)];
    const float s = std.size() == 1 ? std[0] : std[size_t(ch)];
    float* p = img + ch * h * w;
    for (int64_t i = 0; i < h * w; ++i) p[i] = (p[i] - m) / s;   // as torchvision: sub_ then div_
  }
}

Tensor normalize(const Tensor& img, const std::vector<float>& mean, const std::vector<float>& std) {
  Tensor out = check_image(img, "normalize").clone();
  check_norm_params(out.size(0), mean, std);
  normalize_inplace(out.data<float>(), out.size(0), out.size(1), out.size(2), mean, std);
  return out;
}

}  // namespace attn::data

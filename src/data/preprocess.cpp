// Eval preprocessing presets (torchvision, timm, Hugging Face) and the pipeline resize -> center crop
// -> ToTensor -> Normalize, as torchvision 0.14 runs it on PIL images. See attn/data/preprocess.h.
#include "attn/data/preprocess.h"

#include <cfenv>
#include <cmath>
#include <cstring>
#include <sstream>

#include "attn/core/error.h"
#include "attn/core/parallel.h"
#include "attn/data/transforms.h"

namespace attn::data {

namespace {


std::string floats(const std::vector<float>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

const char* resample_name(Resample r) {
  switch (r) {
    case Resample::nearest: return "nearest";
    case Resample::bilinear: return "bilinear";
    case Resample::bicubic: return "bicubic";
  }
  return "?";
}

void check_norm(const std::vector<float>& v, int64_t channels, const char* what) {
  ATTN_CHECK(v.size() == 1 || int64_t(v.size()) == channels, "preprocess: expected 1 or ", channels, " values of ",
             what, ", got ", v.size(), " (", floats(v), ")");
  if (std::string(what) == "std")
    for (float s : v) ATTN_CHECK(s != 0.0f && std::isfinite(s), "preprocess: expected non-zero finite std, got ", floats(v));
}

// Python's round() on a multiple of 0.5: half to even.
int64_t round_half_even(double x) { return int64_t(std::nearbyint(x)); }

}  // namespace

std::string Preprocess::describe() const {
  std::ostringstream os;
  os << (squash ? "resize " + std::to_string(resize_size) + "x" + std::to_string(resize_size)
                : "resize shorter side " + std::to_string(resize_size))
     << " " << resample_name(interpolation) << ", center crop " << crop_size << ", mean " << floats(mean) << ", std "
     << floats(std);
  return os.str();
}

WeightSource parse_weight_source(const std::string& s) {
  if (s == "torchvision") return WeightSource::torchvision;
  if (s == "timm") return WeightSource::timm;
  if (s == "hf") return WeightSource::hf;
  fail("preprocess: unknown weight source '", s, "' (known: torchvision, timm, hf)");
}

int64_t resize_for_crop_pct(int64_t crop_size, double crop_pct) {
  ATTN_CHECK(crop_size > 0, "preprocess: expected a positive crop size, got ", crop_size);
  ATTN_CHECK(crop_pct > 0 && crop_pct <= 1, "preprocess: expected crop_pct in (0, 1], got ", crop_pct);
  return int64_t(std::floor(double(crop_size) / crop_pct));
}

Preprocess imagenet_eval_preset() { return Preprocess{}; }

Preprocess preset_for(const std::string& model, WeightSource source, int64_t image_size) {
  ATTN_CHECK(image_size >= 0, "preprocess: expected image_size >= 0, got ", image_size);
  const int64_t s = image_size > 0 ? image_size : 224;
  const bool deit = model.starts_with("deit");
  const bool vit = model.starts_with("vit");
  const bool swin = model.starts_with("swin");
  Preprocess p;
  p.crop_size = s;
  switch (source) {
    case WeightSource::torchvision: {
      // torchvision.models.vision_transformer: ImageClassification(crop_size=224[, resize_size=...]).
      int64_t resize224 = 256, native = 224;
      if (model == "vit_large_patch16_224") resize224 = 242;     // ViT_L_16_Weights.IMAGENET1K_V1
      if (model == "vit_huge_patch14_224") {                     // ViT_H_14_Weights.IMAGENET1K_SWAG_LINEAR_V1
        resize224 = 224;
        p.interpolation = Resample::bicubic;
      }
      // torchvision.models.swin_transformer: Swin_*_Weights.IMAGENET1K_V1, bicubic.
      const std::vector<std::pair<std::string, int64_t>> swin = {
          {"swin_t", 232}, {"swin_s", 246}, {"swin_b", 238}, {"swin_v2_t", 260}, {"swin_v2_s", 260},
          {"swin_v2_b", 272}};
      for (const auto& [name, resize] : swin)
        if (model == name) {
          resize224 = resize;   // at the weights' own crop
          native = name.starts_with("swin_v2") ? 256 : 224;
          p.interpolation = Resample::bicubic;
        }
      p.resize_size = s * resize224 / native;
      break;
    }
    case WeightSource::timm:
      // vision_transformer.py / deit.py _cfg: crop_pct 0.9, bicubic; ViT: Inception mean/std (0.5),
      // DeiT: ImageNet's. Other families: timm's resolve_data_config defaults (0.875, bilinear).
      // swin_transformer.py _cfg: crop_pct 0.9, bicubic, ImageNet mean/std.
      if (vit || deit || swin) {
        p.interpolation = Resample::bicubic;
        p.resize_size = resize_for_crop_pct(s, 0.9);
        if (vit) p.mean = kInceptionMean, p.std = kInceptionStd;
      } else {
        p.resize_size = resize_for_crop_pct(s, 0.875);
      }
      break;
    case WeightSource::hf:
      // transformers' ViTImageProcessor (size 224, BILINEAR, mean = std = 0.5, no crop) and
      // DeiTImageProcessor (size 256, BICUBIC, center crop 224, ImageNet mean/std).
      // Swin (microsoft/swin-*): ViTFeatureExtractor, size 224 BICUBIC (resample 3), ImageNet mean/std.
      p.squash = true;
      if (swin) {
        p.interpolation = Resample::bicubic;
        p.resize_size = s;
      } else if (deit) {
        p.interpolation = Resample::bicubic;
        p.resize_size = s * 256 / 224;
      } else {
        p.resize_size = s;
        p.mean = kInceptionMean, p.std = kInceptionStd;
      }
      break;
  }
  return p;
}

Preprocess apply_overrides(Preprocess p, const PreprocessOverrides& o) {
  if (o.resize_size) ATTN_CHECK(*o.resize_size > 0, "preprocess: expected --resize > 0, got ", *o.resize_size);
  if (o.crop_size) ATTN_CHECK(*o.crop_size > 0, "preprocess: expected --crop > 0, got ", *o.crop_size);
  if (o.crop_pct)
    ATTN_CHECK(*o.crop_pct > 0 && *o.crop_pct <= 1, "preprocess: expected --crop-pct in (0, 1], got ", *o.crop_pct);
  const int64_t old_crop = p.crop_size, old_resize = p.resize_size;
  if (o.crop_size) p.crop_size = *o.crop_size;
  if (o.resize_size)
    p.resize_size = *o.resize_size;
  else if (o.crop_pct)
    p.resize_size = resize_for_crop_pct(p.crop_size, *o.crop_pct);
  else if (p.crop_size != old_crop)
    p.resize_size = p.crop_size * old_resize / old_crop;   // keep the preset's crop fraction
  if (o.interpolation) p.interpolation = parse_resample(*o.interpolation);
  if (o.mean) p.mean = *o.mean;
  if (o.std) p.std = *o.std;
  check_norm(p.mean, p.channels, "mean");
  check_norm(p.std, p.channels, "std");
  return p;
}

std::pair<int64_t, int64_t> resized_shorter_side(int64_t h, int64_t w, int64_t size) {
  ATTN_CHECK(h > 0 && w > 0 && size > 0, "preprocess: expected positive sizes, got image ", h, "x", w, " and size ",
             size);
  // torchvision's _compute_resized_output_size: new_long = int(size * long / short) (truncated).
  const int64_t shorter = std::min(h, w), longer = std::max(h, w);
  const int64_t new_long = int64_t(double(size * longer) / double(shorter));
  return w <= h ? std::pair{new_long, size} : std::pair{size, new_long};
}

Tensor center_crop(const Tensor& img, int64_t crop_h, int64_t crop_w) {
  ATTN_CHECK(img.defined() && img.dim() == 3 && img.dtype() == DType::u8,
             "center_crop: expected a u8 (H, W, C) image, got ",
             img.defined() ? std::string(dtype_name(img.dtype())) : std::string("an undefined tensor"), " of shape ",
             img.defined() ? img.shape() : Shape{});
  ATTN_CHECK(crop_h > 0 && crop_w > 0, "center_crop: expected a positive crop size, got ", crop_h, "x", crop_w);
  const Tensor src = img.contiguous();
  const int64_t h = src.size(0), w = src.size(1), c = src.size(2);
  // torchvision pads (left/top get the smaller half) when the crop is larger, then crops at
  // round((H - crop) / 2) of the padded image.
  const int64_t pad_t = crop_h > h ? (crop_h - h) / 2 : 0, pad_b = crop_h > h ? (crop_h - h + 1) / 2 : 0;
  const int64_t pad_l = crop_w > w ? (crop_w - w) / 2 : 0, pad_r = crop_w > w ? (crop_w - w + 1) / 2 : 0;
  const int64_t hp = h + pad_t + pad_b, wp = w + pad_l + pad_r;
  const int64_t top = round_half_even(double(hp - crop_h) / 2.0), left = round_half_even(double(wp - crop_w) / 2.0);
  Tensor out = Tensor::zeros({crop_h, crop_w, c}, DType::u8);
  const uint8_t* s = src.data<uint8_t>();
  uint8_t* d = out.data<uint8_t>();
  for (int64_t y = 0; y < crop_h; ++y) {
    const int64_t sy = top + y - pad_t;
    if (sy < 0 || sy >= h) continue;
    for (int64_t x = 0; x < crop_w; ++x) {
      const int64_t sx = left + x - pad_l;
      if (sx < 0 || sx >= w) continue;
      std::memcpy(d + (y * crop_w + x) * c, s + (sy * w + sx) * c, size_t(c));
    }
  }
  return out;
}

namespace {
void check_sizes(const Preprocess& p) {
  ATTN_CHECK(p.channels == 1 || p.channels == 3, "preprocess: expected 1 or 3 channels, got ", p.channels);
  ATTN_CHECK(p.resize_size > 0 && p.crop_size > 0, "preprocess: expected positive resize and crop sizes, got ",
             p.resize_size, " and ", p.crop_size);
}
}  // namespace

Tensor eval_crop(const Tensor& img, const Preprocess& p) {
  check_sizes(p);
  ATTN_CHECK(img.defined() && img.dim() == 3 && img.dtype() == DType::u8,
             "preprocess: expected a u8 (H, W, C) image, got shape ", img.defined() ? img.shape() : Shape{});
  Tensor x = img.size(2) == p.channels ? img : convert_channels(img, p.channels);
  const int64_t h = x.size(0), w = x.size(1);
  const auto [rh, rw] = p.squash ? std::pair{p.resize_size, p.resize_size} : resized_shorter_side(h, w, p.resize_size);
  if (rh != h || rw != w) x = resize(x, rh, rw, p.interpolation);
  return center_crop(x, p.crop_size, p.crop_size);
}

Tensor normalize_crop(const Tensor& crop, const Preprocess& p) {
  check_norm(p.mean, p.channels, "mean");
  check_norm(p.std, p.channels, "std");
  Tensor chw = to_chw_f32(crop);
  normalize_inplace(chw.data<float>(), chw.size(0), chw.size(1), chw.size(2), p.mean, p.std);
  return chw;
}

Tensor preprocess(const Tensor& img, const Preprocess& p) {
  check_sizes(p);   // every setting before the image, as the messages have always come
  check_norm(p.mean, p.channels, "mean");
  check_norm(p.std, p.channels, "std");
  return normalize_crop(eval_crop(img, p), p);
}

Tensor preprocess_file(const std::string& path, const Preprocess& p) { return preprocess(read_image(path, p.channels), p); }

std::vector<Tensor> preprocess_files(const std::vector<std::string>& paths, const Preprocess& p,
                                     std::vector<std::string>& errors) {
  std::vector<Tensor> out(paths.size());
  errors.assign(paths.size(), std::string());
  parallel_for(0, int64_t(paths.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      try {   // no exception may leave the parallel region
        out[size_t(i)] = preprocess_file(paths[size_t(i)], p);
      } catch (const std::exception& ex) {
        errors[size_t(i)] = ex.what();
      }
    }
  });
  return out;
}

}  // namespace attn::data

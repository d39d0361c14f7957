// Image transforms on (C, H, W) f32 images, as torchvision defines them, with explicit generators.
//
//   attn::Generator g(7);
//   Tensor x = attn::data::random_crop(img, 28, 28, /*padding=*/4, g);   // RandomCrop(28, padding=4)
//   x = attn::data::random_hflip(x, 0.5, g);                             // RandomHorizontalFlip(0.5)
//   x = attn::data::normalize(x, {0.2860f}, {0.3530f});                   // Normalize(mean, std)
//   x = attn::data::random_erasing(x, g, {});                            // RandomErasing(0.5, value=0)
//
// Random decisions follow torchvision 0.14's draw order exactly; each draw consumes ONE
// g.uniform() = u in [0, 1) (53 bits) and maps it as:
//   torch.rand(1)                    -> u                         (compared with p: u < p)
//   torch.randint(lo, hi, (1,))      -> lo + floor(u * (hi - lo))
//   torch.empty(1).uniform_(a, b)    -> float32(a + (b - a) * u)
// so feeding the same u's to torchvision's own classes reproduces these results exactly (that is
// how tests/data/transforms_test.cpp checks them).
//
// Every function returns a new contiguous tensor; the input is never modified. The *_into kernels
// work on raw contiguous buffers (no allocation, no OpenMP) for the DataLoader's background thread.
#pragma once
#include <cstdint>
#include <vector>

#include "attn/core/rng.h"
#include "attn/core/tensor.h"

namespace attn::data {

// ---- random crop (torchvision RandomCrop(size, padding), zero fill, constant padding) ----
struct CropParams {
  int64_t top = 0, left = 0;   // in the coordinates of the padded image
};
// Draws (top, left) for an (out_h, out_w) crop of an (h, w) image padded by `padding`: no draw
// when the padded image already has the crop's size, else randint for top, then for left.
CropParams crop_params(int64_t h, int64_t w, int64_t out_h, int64_t out_w, int64_t padding, Generator& g);
// TF.crop(TF.pad(img, padding), top, left, out_h, out_w); the region may extend past the padded
// image (torchvision pads that with zeros too).
Tensor pad_crop(const Tensor& img, int64_t padding, int64_t top, int64_t left, int64_t out_h, int64_t out_w);
Tensor random_crop(const Tensor& img, int64_t out_h, int64_t out_w, int64_t padding, Generator& g);

// ---- horizontal flip (RandomHorizontalFlip(p)): one draw, flips when u < p ----
bool hflip_param(double p, Generator& g);   // the flip decision: g.uniform() < p
Tensor hflip(const Tensor& img);
Tensor random_hflip(const Tensor& img, double p, Generator& g);

// ---- random erasing (RandomErasing(p, scale, ratio, value)) ----
struct ErasingOptions {
  double p = 0.5;
  double scale_lo = 0.02, scale_hi = 0.33;   // erased fraction of the area
  double ratio_lo = 0.3, ratio_hi = 3.3;     // aspect ratio h / w, drawn log-uniformly
  float value = 0.0f;
};
struct EraseParams {
  bool erase = false;                        // false: p not drawn, or no box fitted in 10 attempts
  int64_t top = 0, left = 0, h = 0, w = 0;
};
// One draw against p; then up to 10 attempts of (scale, log-ratio) draws until a box with
// h < H and w < W fits, then randint for top, then for left.
EraseParams erasing_params(int64_t h, int64_t w, const ErasingOptions& opt, Generator& g);
// TF.erase: img[:, top:top+h, left:left+w] = value.
Tensor erase(const Tensor& img, int64_t top, int64_t left, int64_t h, int64_t w, float value);
Tensor random_erasing(const Tensor& img, Generator& g, const ErasingOptions& opt = {});

// ---- normalize (Normalize(mean, std)): (x - mean[c]) / std[c] in f32; 1 or C values each ----
Tensor normalize(const Tensor& img, const std::vector<float>& mean, const std::vector<float>& std);

// ---- raw kernels on contiguous (C, H, W) f32 buffers (plain loops) ----
void pad_crop_into(const float* src, int64_t c, int64_t h, int64_t w, int64_t padding, int64_t top,
                   int64_t left, int64_t out_h, int64_t out_w, float* dst);
void hflip_inplace(float* img, int64_t c, int64_t h, int64_t w);
void erase_inplace(float* img, int64_t c, int64_t h, int64_t w, const EraseParams& box, float value);
void normalize_inplace(float* img, int64_t c, int64_t h, int64_t w, const std::vector<float>& mean,
                       const std::vector<float>& std);

}  // namespace attn::data

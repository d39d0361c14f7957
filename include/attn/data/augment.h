// DeiT-recipe augmentations: RandAugment (torchvision 0.14's, on u8 images), Mixup / CutMix
// (timm's Mixup, mode "batch") with label-smoothed soft targets, and DeiT's repeated-augmentation
// order. Every random decision takes an explicit attn::Generator&.
//
//   attn::Generator g(7);
//   Tensor u = attn::data::rand_augment(img_u8_chw, {.num_ops = 2, .magnitude = 9}, g);   // u8 (C, H, W)
//   Tensor f = attn::data::rand_augment(img_f32_chw, {}, g);      // f32 in [0, 1]: via round(255 x)
//   attn::data::MixupOptions mo;  mo.mixup_alpha = 0.8;  mo.cutmix_alpha = 1.0;  mo.num_classes = 10;
//   attn::data::MixedBatch mb = attn::data::mixup(batch.images, batch.labels, mo, g);
//   Tensor loss = attn::cross_entropy(model(mb.images), mb.targets);   // soft targets (B, classes)
//
// RandAugment: per op, op = randint(14) over torchvision's list (Identity, ShearX, ShearY,
// TranslateX, TranslateY, Rotate, Brightness, Color, Contrast, Sharpness, Posterize, Solarize,
// AutoContrast, Equalize), then for signed ops randint(2) == 1 negates the magnitude; each draw is
// ONE g.uniform() u mapped as floor(u * n) (as attn/data/transforms.h). Ops follow
// torchvision.transforms.functional on u8 tensors exactly (geometric ops: nearest sampling, fill 0,
// float32 grid as torchvision's affine_grid + grid_sample; colour ops in float32, truncated to u8).
// Color (saturation) leaves 1-channel images unchanged, as torchvision. Magnitude tables are
// torchvision's (float32 linspace computed as torch 1.13 does on an AVX2 CPU).
//
// Mixup (timm.data.Mixup, mode "batch", batch size even): with probability `prob` mixing happens;
// if both alphas > 0, CutMix is chosen with probability switch_prob; lam ~ Beta(alpha, alpha). Mixup:
// x = lam x + (1 - lam) x.flip(0). CutMix: a box of sqrt(1 - lam) of each side centred at
// (randint(H), randint(W)), clipped, pasted from x.flip(0); lam corrected to 1 - box area / (H W).
// Targets: lam * smooth(y) + (1 - lam) * smooth(y.flip(0)), smooth = one-hot with on
// 1 - s + s/K, off s/K.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "attn/core/rng.h"
#include "attn/core/tensor.h"

namespace attn::data {

// ---- RandAugment ----
enum class AugOp {
  identity, shear_x, shear_y, translate_x, translate_y, rotate, brightness, color, contrast, sharpness,
  posterize, solarize, autocontrast, equalize
};
// torchvision's op list, in its order (14 ops).
const std::vector<AugOp>& rand_augment_ops();
const char* aug_op_name(AugOp op);              // torchvision's name: "ShearX", "AutoContrast", ...
AugOp parse_aug_op(const std::string& name);     // the inverse; throws naming the known ops
bool aug_op_signed(AugOp op);
// The op's magnitude at `bin` of `num_bins` for an (h, w) image (torchvision's _augmentation_space;
// 0 for the ops without one), before the random sign.
double aug_op_magnitude(AugOp op, int64_t bin, int64_t num_bins, int64_t h, int64_t w);

// torchvision's _apply_op(img, op, magnitude, NEAREST, fill=None) on a u8 (C, H, W) image, C in {1, 3}.
Tensor apply_aug_op(const Tensor& img, AugOp op, double magnitude);

struct RandAugmentOptions {
  int64_t num_ops = 2;
  int64_t magnitude = 9;       // bin index in [0, num_bins)
  int64_t num_bins = 31;
};
// u8 (C, H, W) -> u8; f32 (C, H, W) in [0, 1] -> f32 (through u8 = round(255 clamp(x, 0, 1))).
Tensor rand_augment(const Tensor& img, const RandAugmentOptions& opt, Generator& g);
// The same on a raw contiguous f32 (C, H, W) buffer, in place (no OpenMP; for the loader thread).
void rand_augment_inplace(float* img, int64_t c, int64_t h, int64_t w, const RandAugmentOptions& opt, Generator& g);

// ---- Mixup / CutMix ----
struct MixupOptions {
  double mixup_alpha = 0.8;    // 0: no mixup
  double cutmix_alpha = 1.0;   // 0: no cutmix
  double prob = 1.0;           // probability of mixing a batch
  double switch_prob = 0.5;    // probability of CutMix when both are enabled
  bool correct_lam = true;     // CutMix: lam = 1 - clipped box area / image area
  double label_smoothing = 0.1;
  int64_t num_classes = 10;
};
struct MixupParams {
  double lam = 1.0;            // 1: the batch is left as it is
  bool cutmix = false;
  int64_t yl = 0, yh = 0, xl = 0, xh = 0;   // CutMix box rows [yl, yh), columns [xl, xh)
};
// Beta(a, b) from two Marsaglia-Tsang gamma draws (a, b > 0).
double sample_beta(double a, double b, Generator& g);
// Draws: u < prob; if both alphas: u < switch_prob; then lam ~ Beta; for CutMix cy = randint(h), cx = randint(w).
MixupParams mixup_params(const MixupOptions& opt, int64_t h, int64_t w, Generator& g);
// timm's rand_bbox + cutmix_bbox_and_lam for a given lam and centre.
MixupParams cutmix_box(double lam, int64_t h, int64_t w, int64_t cy, int64_t cx, bool correct_lam = true);
// Soft targets (B, num_classes) f32 from labels (B) (timm's mixup_target).
Tensor mixup_target(const Tensor& labels, int64_t num_classes, double lam, double smoothing);

struct MixedBatch {
  Tensor images;               // (B, C, H, W) f32, mixed (a new tensor)
  Tensor targets;              // (B, num_classes) f32
  MixupParams params;
};
// images (B, C, H, W) f32 with B even, labels (B) integer.
MixedBatch apply_mixup(const Tensor& images, const Tensor& labels, const MixupParams& p, const MixupOptions& opt);
MixedBatch mixup(const Tensor& images, const Tensor& labels, const MixupOptions& opt, Generator& g);

// ---- repeated augmentation (DeiT's RASampler, one process) ----
// Each index of a permutation (randperm(n, g); 0..n-1 when !shuffle) repeated `repeats` times in a
// row, cut to floor(n / 256) * 256 entries (all n when n < 256), as RASampler with one replica.
std::vector<int64_t> repeated_augmentation_order(int64_t n, int64_t repeats, Generator& g, bool shuffle = true);
// Its length: floor(n / 256) * 256 when n >= 256, else n (the loader's epoch length).
int64_t repeated_augmentation_length(int64_t n);

}  // namespace attn::data

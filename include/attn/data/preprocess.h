// Eval-time image preprocessing as the weights' source defines it, and the ImageNet-1k class names.
//
//   data::Preprocess p = data::preset_for("vit_base_patch16_224", data::WeightSource::timm);
//   // p: resize shorter side to 248 (floor(224 / 0.9)), bicubic; center crop 224; mean = std = 0.5
//   Tensor x = data::preprocess_file("cat.jpg", p);                // f32 (3, 224, 224)
//   const std::string& name = data::imagenet_class_names()[281];   // "tabby"
//
// The pipeline is torchvision 0.14's on a PIL image (timm's transforms_imagenet_eval is the same):
//   Resize(resize_size)          shorter side -> resize_size, longer side int(resize_size * long / short),
//                                PIL's antialiased filter (data::resize); skipped when the size is already
//                                right. With `squash` (Hugging Face's processors): both sides -> resize_size.
//   CenterCrop(crop_size)        top = round_half_even((H - crop) / 2), likewise left; zero padding first
//                                when the image is smaller than the crop, as torchvision pads.
//   ToTensor, Normalize          x / 255, then (x - mean[c]) / std[c] in f32.
//
// Presets (each checked against the project's own source):
//   torchvision  ImageClassification(crop_size=224): resize 256 bilinear, crop 224, ImageNet mean/std;
//                vit_l_16 IMAGENET1K_V1: resize 242; vit_h_14 IMAGENET1K_SWAG_LINEAR_V1: resize 224 bicubic.
//   timm         default_cfgs of vision_transformer.py (augreg ViTs): bicubic, crop_pct 0.9,
//                mean = std = 0.5; deit.py: bicubic, crop_pct 0.9, ImageNet mean/std. The resize size is
//                floor(crop / crop_pct) (timm's transforms_factory), i.e. 248 for 224.
//   hf           ViTImageProcessor (google/vit-*): squash to 224 bilinear, mean = std = 0.5;
//                DeiTImageProcessor (facebook/deit-*): squash to 256 bicubic, crop 224, ImageNet mean/std.
//   (DeiT's own repository evaluates with resize int(224 / 0.875) = 256 bicubic; use --crop-pct 0.875.)
// A model whose image size is not 224 keeps the preset's crop fraction: crop = image size,
// resize = floor(crop / (224 / preset resize)).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attn/core/tensor.h"
#include "attn/data/image.h"

namespace attn::data {

inline const std::vector<float> kImagenetMean = {0.485f, 0.456f, 0.406f};
inline const std::vector<float> kImagenetStd = {0.229f, 0.224f, 0.225f};
inline const std::vector<float> kInceptionMean = {0.5f, 0.5f, 0.5f};
inline const std::vector<float> kInceptionStd = {0.5f, 0.5f, 0.5f};

struct Preprocess {
  int64_t resize_size = 256;          // the shorter side after resizing (both sides with `squash`)
  bool squash = false;                // resize to resize_size x resize_size, ignoring the aspect ratio
  int64_t crop_size = 224;            // the center crop (square)
  Resample interpolation = Resample::bilinear;
  std::vector<float> mean = kImagenetMean, std = kImagenetStd;   // 1 or `channels` values each
  int64_t channels = 3;               // PIL's convert: 1 = L, 3 = RGB

  double crop_pct() const { return double(crop_size) / double(resize_size); }
  std::string describe() const;       // "resize 248 bicubic, crop 224, mean [...], std [...]"
};

// Where the weights come from: it decides the preset.
enum class WeightSource { torchvision, timm, hf };
WeightSource parse_weight_source(const std::string& s);   // "torchvision" | "timm" | "hf"

// floor(crop / crop_pct), as timm computes its scale size; crop_pct in (0, 1].
int64_t resize_for_crop_pct(int64_t crop_size, double crop_pct);

// torchvision's ImageNet eval transform: resize 256 bilinear, center crop 224, ImageNet mean/std.
Preprocess imagenet_eval_preset();
// The eval transform of `model` (a registry name, e.g. "deit_small_patch16_224") as its source
// publishes it; image_size > 0 (and != 224) scales the crop keeping the crop fraction.
Preprocess preset_for(const std::string& model, WeightSource source, int64_t image_size = 0);

// Overrides, as the CLI flags give them (unset = keep the preset). A new crop without a new
// resize or crop_pct keeps the preset's crop fraction.
struct PreprocessOverrides {
  std::optional<int64_t> resize_size = {}, crop_size = {};
  std::optional<double> crop_pct = {};
  std::optional<std::string> interpolation = {};   // "bilinear" | "bicubic" | "nearest"
  std::optional<std::vector<float>> mean = {}, std = {};
};
Preprocess apply_overrides(Preprocess p, const PreprocessOverrides& o);

// torchvision's Resize(size) output (height, width) for an (h, w) image: the shorter side becomes `size`.
std::pair<int64_t, int64_t> resized_shorter_side(int64_t h, int64_t w, int64_t size);
// torchvision's CenterCrop on a u8 (H, W, C) image: zero-padded first when smaller than the crop.
Tensor center_crop(const Tensor& img, int64_t crop_h, int64_t crop_w);

// u8 (H, W, C) image (any channel count read_image gives) -> f32 (channels, crop, crop).
Tensor preprocess(const Tensor& img, const Preprocess& p);
// The same in two steps: the u8 (crop, crop, channels) image the model sees (channels converted,
// resized, center-cropped), then ToTensor + Normalize of that crop. preprocess = normalize_crop(eval_crop).
Tensor eval_crop(const Tensor& img, const Preprocess& p);
Tensor normalize_crop(const Tensor& crop, const Preprocess& p);
// read_image(path) then preprocess; decoding errors name the file.
Tensor preprocess_file(const std::string& path, const Preprocess& p);
// preprocess_file of each path, decoded in parallel (one image per task), in order. A file that
// cannot be read leaves its tensor undefined and its message in errors[i] (resized to paths.size()).
std::vector<Tensor> preprocess_files(const std::vector<std::string>& paths, const Preprocess& p,
                                     std::vector<std::string>& errors);

// The 1,000 ImageNet-1k class names in class-index order (torchvision's list; generated by
// tools/gen_imagenet_classes.py into src/data/imagenet_classes.cpp).
const std::vector<std::string>& imagenet_class_names();
// Their WordNet IDs ("n01440764", ...), the same order (sorted): the names of ImageNet's class
// folders (src/data/imagenet_wnids.cpp).
const std::vector<std::string>& imagenet_wnids();

}  // namespace attn::data

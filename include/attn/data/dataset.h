// Datasets of labelled images: the interface the DataLoader reads, and an in-memory implementation.
//
//   auto ds = std::make_shared<attn::data::TensorDataset>(images, labels);   // (N, C, H, W), (N)
//   attn::data::Example ex = ds->get(3);    // ex.image: (C, H, W) f32, ex.label: int64
//
// Images come out as f32 (C, H, W). u8 images are scaled by 1/255 into [0, 1] (torchvision's
// ToTensor), f32 images are returned as stored.
//
//   auto [mean, std] = attn::data::dataset_normalization("fashion-mnist");   // {0.2860}, {0.3530}
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "attn/core/tensor.h"

namespace attn::data {

// The normalisation constants (per-channel mean, std; one value for all channels) attn trains a
// dataset with: "fashion-mnist": mean 0.2860, std 0.3530; any other name (an image folder): 0.5 / 0.5.
std::pair<std::vector<float>, std::vector<float>> dataset_normalization(const std::string& data);

struct Example {
  Tensor image;     // (C, H, W) f32
  int64_t label = 0;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // (C, H, W) of every image.
  virtual Shape image_shape() const = 0;
  // Writes image i (C*H*W f32 values, row-major) to `out` and returns its label. Implementations
  // must be thread-safe and must not open OpenMP parallel regions: the DataLoader calls this from
  // its background thread while the training step uses the cores.
  virtual int64_t read(int64_t i, float* out) const = 0;
  // Convenience: allocates the image tensor. Throws attn::Error for i outside [0, size()).
  Example get(int64_t i) const;
};

// Images and labels held in memory.
class TensorDataset : public Dataset {
 public:
  // images: (N, C, H, W) or (N, H, W) (one channel), f32 or u8; labels: (N) of any integer dtype.
  TensorDataset(const Tensor& images, const Tensor& labels);
  int64_t size() const override { return n_; }
  Shape image_shape() const override { return {c_, h_, w_}; }
  int64_t read(int64_t i, float* out) const override;

  const Tensor& images() const { return images_; }   // (N, C, H, W), contiguous, as given (f32 or u8)
  const Tensor& labels() const { return labels_; }   // (N) i64
  // All images as f32 (N, C, H, W) (u8 scaled by 1/255).
  Tensor images_f32() const;

 protected:
  TensorDataset() = default;
  void set(const Tensor& images, const Tensor& labels, const char* who);

 private:
  Tensor images_, labels_;
  int64_t n_ = 0, c_ = 0, h_ = 0, w_ = 0;
};

}  // namespace attn::data

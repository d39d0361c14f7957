// Dataset::get and TensorDataset (images + labels in memory).
#include "attn/data/dataset.h"

namespace attn::data {

std::pair<std::vector<float>, std::vector<float>> dataset_normalization(const std::string& data) {
  if (data == "fashion-mnist") return {{0.2860f}, {0.3530f}};
  return {{0.5f}, {0.5f}};
}

Example Dataset::get(int64_t i) const {
  ATTN_CHECK(i >= 0 && i < size(), "Dataset::get: index ", i, " is out of range for a dataset of ", size(),
             " examples");
  Example ex;
  ex.image = Tensor::empty(image_shape(), DType::f32);
  ex.label = read(i, ex.image.data<float>());
  return ex;
}

TensorDataset::TensorDataset(const Tensor& images, const Tensor& labels) { set(images, labels, "TensorDataset"); }

void TensorDataset::set(const Tensor& images, const Tensor& labels, const char* who) {
  ATTN_CHECK(images.defined() && labels.defined(), who, ": expected images and labels, got an undefined tensor");
  ATTN_CHECK(images.dtype() == DType::f32 || images.dtype() == DType::u8, who,
             ": expected f32 or u8 images, got ", dtype_name(images.dtype()));
  ATTN_CHECK(images.dim() == 3 || images.dim() == 4, who, ": expected images of shape (N, C, H, W) or (N, H, W), got ",
             images.shape());
  ATTN_CHECK(labels.dim() == 1, who, ": expected labels of shape (N), got ", labels.shape());
  ATTN_CHECK(labels.dtype() == DType::i64 || labels.dtype() == DType::i32 || labels.dtype() == DType::u8, who,
             ": expected integer labels, got ", dtype_name(labels.dtype()));
  ATTN_CHECK(labels.size(0) == images.size(0), who, ": expected ", images.size(0), " labels (one per image), got ",
             labels.size(0));
  images_ = images.dim() == 3 ? images.unsqueeze(1).contiguous() : images.contiguous();
  labels_ = labels.dtype() == DType::i64 ? labels.contiguous() : labels.to(DType::i64).contiguous();
  n_ = images_.size(0);
  c_ = images_.size(1);
  h_ = images_.size(2);
  w_ = images_.size(3);
}

int64_t TensorDataset::read(int64_t i, float* out) const {
  ATTN_CHECK(i >= 0 && i < n_, "TensorDataset::read: index ", i, " is out of range for a dataset of ", n_,
             " examples");
  const int64_t m = c_ * h_ * w_;
  if (images_.dtype() == DType::u8) {
    const uint8_t* src = images_.data<uint8_t>() + i * m;
    for (int64_t k = 0; k < m; ++k) out[k] = float(src[k]) / 255.0f;   // ToTensor: div(255)
  } else {
    const float* src = images_.data<float>() + i * m;
    for (int64_t k = 0; k < m; ++k) out[k] = src[k];
  }
  return labels_.data<int64_t>()[i];
}

Tensor TensorDataset::images_f32() const {
  if (images_.dtype() == DType::f32) return images_;
  Tensor out = Tensor::empty(images_.shape(), DType::f32);
  const uint8_t* src = images_.data<uint8_t>();
  float* dst = out.data<float>();
  const int64_t n = images_.numel();
  for (int64_t k = 0; k < n; ++k) dst[k] = float(src[k]) / 255.0f;
  return out;
}

}  // namespace attn::data

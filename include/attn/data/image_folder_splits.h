// Train / validation / test splits of an image-folder dataset, for `attn train --data DIR` and
// `attn eval CKPT --data DIR`.
//
//   DIR/train/<class>/*.png|jpg|jpeg     required
//   DIR/test/<class>/...                 the test split; without it, DIR/val is the test split
//   DIR/val/<class>/...                  the validation split when DIR/test exists too
//
//   auto s = attn::data::load_image_folder_splits("photos", /*image_size=*/28, /*channels=*/1);
//   s.classes;                 // {"cat", "dog"}: DIR/train's subfolders, sorted (torchvision's order)
//   s.train->size();           // DIR/train's images, minus the held-out validation images (if any)
//
// Without both val/ and test/, the validation split (model selection: the per-epoch numbers) is
// held out of DIR/train: a fixed 10% (at least 1 image), chosen by a permutation with a constant
// seed, so every run and every machine sees the same split, whatever --seed is (as Fashion-MNIST's).
// Every split must have exactly train/'s classes; images of another size or channel count are
// converted (PIL's "L" / "RGB") and resized (PIL's antialiased bilinear) to image_size x image_size
// (data::ImageFolder).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "attn/data/dataset.h"

namespace attn::data {

// The images of `base` at `indices`, in that order.
class SubsetDataset : public Dataset {
 public:
  SubsetDataset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices);
  int64_t size() const override { return int64_t(indices_.size()); }
  Shape image_shape() const override { return base_->image_shape(); }
  int64_t read(int64_t i, float* out) const override;
  const std::vector<int64_t>& indices() const { return indices_; }

 private:
  std::shared_ptr<const Dataset> base_;
  std::vector<int64_t> indices_;
};

struct ImageFolderSplits {
  std::shared_ptr<Dataset> train, val, test;
  std::vector<std::string> classes;
  std::string val_from, test_from;   // where each came from, for messages: "DIR/val", "held out of DIR/train"
};

constexpr uint64_t kImageFolderValSeed = 20170825;

// The class names of DIR/train (ImageFolder::find_classes: lists folders, reads no image). Throws
// attn::Error, saying which layout is expected and what was found, when DIR is not such a dataset.
std::vector<std::string> image_folder_classes(const std::string& dir);

ImageFolderSplits load_image_folder_splits(const std::string& dir, int64_t image_size, int64_t channels);

}  // namespace attn::data

// A folder of labelled images, as torchvision's ImageFolder: one subfolder per class.
//
//   root/Bag/0001.png, root/Bag/more/0002.jpg, root/Sandal/x.JPEG, ...
//   attn::data::ImageFolder ds("root", /*image_size=*/28, /*channels=*/1);
//   ds.classes();               // {"Bag", "Sandal"}: subfolder names, sorted (byte order, as Python's sorted)
//   ds.size();                  // every .png / .jpg / .jpeg file (any letter case) under them
//   Example ex = ds.get(0);     // ex.image: (1, 28, 28) f32 in [0, 1], ex.label: 0
//
// Order: classes sorted; within a class, files by (folder path, file name), sorted, walking
// subfolders recursively (torchvision's make_dataset: sorted(os.walk(...)), then sorted(fnames)).
// Hidden entries are not skipped (torchvision does not either); other file types are ignored.
// Each read decodes the file (attn/data/image.h), converts it to `channels` as PIL's convert
// ("L" / "RGB"), and resizes it to image_size x image_size with PIL's antialiased bilinear filter
// when it is not that size already — torchvision's
//   ImageFolder(root, transform=Compose([Grayscale() if channels == 1, Resize((S, S)), ToTensor()])).
// read() is thread-safe (no shared mutable state). A file that cannot be decoded throws
// attn::Error naming it.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "attn/data/dataset.h"

namespace attn::data {

class ImageFolder : public Dataset {
 public:
  // channels: 1 or 3. Throws when `root` is not a folder, has no class subfolders, or a class has
  // no image file.
  ImageFolder(const std::string& root, int64_t image_size, int64_t channels = 3);

  int64_t size() const override { return int64_t(samples_.size()); }
  Shape image_shape() const override { return {channels_, image_size_, image_size_}; }
  int64_t read(int64_t i, float* out) const override;

  // The class names under `root`: its subfolders, sorted (torchvision's find_classes); lists folders
  // only, without walking the images. Throws when `root` is not a folder or has no subfolder.
  static std::vector<std::string> find_classes(const std::string& root);

  const std::vector<std::string>& classes() const { return classes_; }
  const std::map<std::string, int64_t>& class_to_idx() const { return class_to_idx_; }
  // (path, label) of every image, in dataset order.
  const std::vector<std::pair<std::string, int64_t>>& samples() const { return samples_; }
  // Every label, in dataset order (i64).
  Tensor labels() const;

 private:
  std::string root_;
  int64_t image_size_ = 0, channels_ = 3;
  std::vector<std::string> classes_;
  std::map<std::string, int64_t> class_to_idx_;
  std::vector<std::pair<std::string, int64_t>> samples_;
};

}  // namespace attn::data

// Fashion-MNIST (Xiao et al. 2017) from Debian's dataset-fashion-mnist package.
//
//   auto train = attn::data::FashionMnist::load(attn::data::FashionMnist::kDefaultDir, attn::data::Split::train);
//   train.size();                 // 55000
//   train.images();               // (55000, 1, 28, 28) u8;   train.images_f32(): f32 in [0, 1]
//   train.labels();               // (55000) i64 in [0, 10)
//   FashionMnist::class_names()[size_t(train.labels().at({0}))];
//
// Splits. The package ships 60,000 training and 10,000 test images. We hold out a FIXED
// validation set from the training file:
//   perm = attn::randperm(60000, attn::Generator(kValSeed))     (Philox, seed 20170825)
//   val   = perm[55000:60000], sorted ascending  (5,000 images)
//   train = perm[0:55000],     sorted ascending  (55,000 images)
//   test  = the 10,000 images of the test file, in file order.
// source_indices() gives, for each example, its index in the file it came from. The split does
// not depend on anything but these constants, so every run and every machine sees the same one.
//
// Files looked for in `dir`: {train,t10k}-{images-idx3,labels-idx1}-ubyte, each with ".gz" or
// without. A missing directory throws "Fashion-MNIST not found in <dir>: install it with
// `apt-get install dataset-fashion-mnist`".
#pragma once
#include <string>
#include <vector>

#include "attn/data/dataset.h"

namespace attn::data {

enum class Split { train, val, test };
Split parse_split(const std::string& name);   // "train" | "val" | "test"
const char* split_name(Split s);

class FashionMnist : public TensorDataset {
 public:
  static constexpr const char* kDefaultDir = "/usr/share/datasets/fashion-mnist";
  static constexpr int64_t kTrainFileSize = 60000;
  static constexpr int64_t kValSize = 5000;
  static constexpr uint64_t kValSeed = 20170825;
  static constexpr int64_t kNumClasses = 10;

  static FashionMnist load(const std::string& dir = kDefaultDir, Split split = Split::train);
  // "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"
  static const std::vector<std::string>& class_names();
  // Indices of the training file in `split` (train or val), ascending; see the header comment.
  static std::vector<int64_t> split_indices(Split split);

  Split split() const { return split_; }
  const std::vector<int64_t>& source_indices() const { return source_; }

 private:
  Split split_ = Split::train;
  std::vector<int64_t> source_;
};

}  // namespace attn::data

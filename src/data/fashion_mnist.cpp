// Fashion-MNIST loader: the package's IDX files, the fixed train/val split, class names.
#include "attn/data/fashion_mnist.h"

#include <sys/stat.h>

#include <algorithm>

#include "attn/core/rng.h"
#include "attn/data/idx.h"

namespace attn::data {
namespace {

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool is_file(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// dir/name.gz, or dir/name uncompressed.
std::string find_file(const std::string& dir, const std::string& name) {
  const std::string base = dir + "/" + name;
  if (is_file(base + ".gz")) return base + ".gz";
  if (is_file(base)) return base;
  fail("Fashion-MNIST: ", base, ".gz not found (nor ", name,
       "): install it with `apt-get install dataset-fashion-mnist`");
}

// images (N, 28, 28) u8 and labels (N) u8 of one file pair, validated.
void load_pair(const std::string& dir, const std::string& prefix, int64_t expect_n, Tensor& images, Tensor& labels) {
  const std::string ip = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::string lp = find_file(dir, prefix + "-labels-idx1-ubyte");
  images = read_idx(ip);
  labels = read_idx(lp);
  ATTN_CHECK(images.dtype() == DType::u8 && images.dim() == 3 && images.size(0) == expect_n && images.size(1) == 28 &&
                 images.size(2) == 28,
             "Fashion-MNIST: expected ", ip, " to hold u8 images of shape ", Shape{expect_n, 28, 28}, ", got ",
             dtype_name(images.dtype()), " ", images.shape());
  ATTN_CHECK(labels.dtype() == DType::u8 && labels.dim() == 1 && labels.size(0) == expect_n,
             "Fashion-MNIST: expected ", lp, " to hold u8 labels of shape ", Shape{expect_n}, ", got ",
             dtype_name(labels.dtype()), " ", labels.shape());
  const uint8_t* l = labels.data<uint8_t>();
  for (int64_t i = 0; i < expect_n; ++i)
    ATTN_CHECK(l[i] < FashionMnist::kNumClasses, "Fashion-MNIST: ", lp, ": label ", int(l[i]), " at index ", i,
               " is not in [0, 10)");
}

}  // namespace

Split parse_split(const std::string& name) {
  if (name == "train") return Split::train;
  if (name == "val") return Split::val;
  if (name == "test") return Split::test;
  fail("Fashion-MNIST: unknown split \"", name, "\" (expected train, val or test)");
}

const char* split_name(Split s) {
  switch (s) {
    case Split::train: return "train";
    case Split::val: return "val";
    case Split::test: return "test";
  }
  return "?";
}

const std::vector<std::string>& FashionMnist::class_names() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

std::vector<int64_t> FashionMnist::split_indices(Split split) {
  ATTN_CHECK(split != Split::test, "FashionMnist::split_indices: the test split is the whole test file");
  Generator g(kValSeed);
  const std::vector<int64_t> perm = randperm(kTrainFileSize, g).to_vector<int64_t>();
  const int64_t cut = kTrainFileSize - kValSize;
  std::vector<int64_t> out = split == Split::val ? std::vector<int64_t>(perm.begin() + cut, perm.end())
                                                 : std::vector<int64_t>(perm.begin(), perm.begin() + cut);
  std::sort(out.begin(), out.end());
  return out;
}

FashionMnist FashionMnist::load(const std::string& dir, Split split) {
  if (!is_dir(dir))
    fail("Fashion-MNIST not found in ", dir, ": install it with `apt-get install dataset-fashion-mnist`");
  FashionMnist ds;
  ds.split_ = split;
  Tensor images, labels;
  if (split == Split::test) {
    load_pair(dir, "t10k", 10000, images, labels);
    ds.source_.resize(10000);
    for (int64_t i = 0; i < 10000; ++i) ds.source_[size_t(i)] = i;
    ds.set(images, labels, "Fashion-MNIST");
    return ds;
  }
  load_pair(dir, "train", kTrainFileSize, images, labels);
  ds.source_ = split_indices(split);
  const int64_t n = int64_t(ds.source_.size()), m = 28 * 28;
  Tensor sel_images = Tensor::empty({n, 1, 28, 28}, DType::u8);
  Tensor sel_labels = Tensor::empty({n}, DType::i64);
  const uint8_t* si = images.data<uint8_t>();
  const uint8_t* sl = labels.data<uint8_t>();
  uint8_t* di = sel_images.data<uint8_t>();
  int64_t* dl = sel_labels.data<int64_t>();
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = ds.source_[size_t(k)];
    std::copy(si + i * m, si + (i + 1) * m, di + k * m);
    dl[k] = sl[i];
  }
  ds.set(sel_images, sel_labels, "Fashion-MNIST");
  return ds;
}

}  // namespace attn::data

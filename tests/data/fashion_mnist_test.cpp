// Fashion-MNIST: the package's files against torchvision's readers, the fixed train/val split,
// class names, [0, 1] scaling as ToTensor, the loader over the real data, and missing-data errors.
// Tests that need /usr/share/datasets/fashion-mnist skip when it is not installed.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <set>

#include "attn/attn.h"
#include "attn/data/fashion_mnist.h"
#include "attn/data/idx.h"
#include "attn/data/loader.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using data::FashionMnist;
using data::Split;
using test::torch_ref;

namespace {

bool installed() {
  struct stat st;
  return ::stat((std::string(FashionMnist::kDefaultDir) + "/train-images-idx3-ubyte.gz").c_str(), &st) == 0;
}

#define REQUIRE_DATA() \
  if (!installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed"

// torchvision's read of the training or test file pair: images (N, 28, 28) u8, labels (N) i64.
const test::Tensors& torchvision_files(const std::string& prefix) {
  static std::map<std::string, test::Tensors> cache;
  auto it = cache.find(prefix);
  if (it == cache.end())
    it = cache.emplace(prefix, torch_ref("data.fashion_files", {}, {{"dir", FashionMnist::kDefaultDir}, {"prefix", prefix}}))
             .first;
  return it->second;
}

// Rows `idx` of a (N, ...) tensor.
Tensor rows(const Tensor& t, const std::vector<int64_t>& idx) {
  std::vector<Tensor> parts;
  Shape s = t.shape();
  s[0] = int64_t(idx.size());
  Tensor out = Tensor::empty(s, t.dtype());
  const int64_t m = t.numel() / t.size(0), es = int64_t(t.element_size());
  const auto* src = static_cast<const uint8_t*>(t.contiguous().raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (size_t k = 0; k < idx.size(); ++k) std::memcpy(dst + k * m * es, src + idx[k] * m * es, size_t(m * es));
  return out;
}

}  // namespace

TEST(FashionMnist, MissingDirectorySaysHowToInstall) {
  char tmpl[] = "/tmp/attn_fmnist_XXXXXX";
  const std::string tmp = ::mkdtemp(tmpl);
  const std::string missing = tmp + "/fashion-mnist";
  EXPECT_EQ(error_of([&] { FashionMnist::load(missing, Split::train); }),
            "Fashion-MNIST not found in " + missing + ": install it with `apt-get install dataset-fashion-mnist`");
  // An existing directory without the files names the file.
  EXPECT_EQ(error_of([&] { FashionMnist::load(tmp, Split::test); }),
            "Fashion-MNIST: " + tmp + "/t10k-images-idx3-ubyte.gz not found (nor t10k-images-idx3-ubyte): install it "
            "with `apt-get install dataset-fashion-mnist`");
  ::rmdir(tmp.c_str());
  EXPECT_EQ(error_of([] { data::parse_split("valid"); }),
            "Fashion-MNIST: unknown split \"valid\" (expected train, val or test)");
  EXPECT_EQ(data::parse_split("val"), Split::val);
  EXPECT_STREQ(data::split_name(Split::test), "test");
}

TEST(FashionMnist, IdxFilesMatchTorchvision) {
  REQUIRE_DATA();
  for (const char* prefix : {"t10k", "train"}) {
    const auto& ref = torchvision_files(prefix);
    const std::string dir = FashionMnist::kDefaultDir;
    Tensor images = data::read_idx(dir + "/" + prefix + "-images-idx3-ubyte.gz");
    Tensor labels = data::read_idx(dir + "/" + prefix + "-labels-idx1-ubyte.gz");
    ASSERT_EQ(images.dtype(), DType::u8);
    EXPECT_TENSOR_NEAR(images, ref.at("images"), 0.0, 0.0) << prefix;
    EXPECT_TENSOR_NEAR(labels.to(DType::i64), ref.at("labels"), 0.0, 0.0) << prefix;
  }
}

TEST(FashionMnist, TestSplitIsTheTestFile) {
  REQUIRE_DATA();
  const auto& ref = torchvision_files("t10k");
  FashionMnist test = FashionMnist::load(FashionMnist::kDefaultDir, Split::test);
  EXPECT_EQ(test.size(), 10000);
  EXPECT_EQ(test.split(), Split::test);
  EXPECT_EQ(test.image_shape(), (Shape{1, 28, 28}));
  EXPECT_TENSOR_NEAR(test.images(), ref.at("images").unsqueeze(1), 0.0, 0.0);
  EXPECT_TENSOR_NEAR(test.labels(), ref.at("labels"), 0.0, 0.0);
  // ToTensor's scaling: u8 / 255 in f32.
  Tensor f = test.images_f32();
  EXPECT_TENSOR_NEAR(f, torch_ref("data.to_tensor", {{"images", ref.at("images")}}).at("out").unsqueeze(1), 0.0, 0.0);
  data::Example ex = test.get(1234);
  EXPECT_TENSOR_NEAR(ex.image, f.select(0, 1234), 0.0, 0.0);
  EXPECT_EQ(ex.label, int64_t(ref.at("labels").at({1234})));
}

TEST(FashionMnist, TrainAndValAreAFixedPartitionOfTheTrainingFile) {
  REQUIRE_DATA();
  const auto& ref = torchvision_files("train");
  FashionMnist train = FashionMnist::load(FashionMnist::kDefaultDir, Split::train);
  FashionMnist val = FashionMnist::load(FashionMnist::kDefaultDir, Split::val);
  EXPECT_EQ(train.size(), 55000);
  EXPECT_EQ(val.size(), 5000);
  std::set<int64_t> all(train.source_indices().begin(), train.source_indices().end());
  for (int64_t i : val.source_indices()) EXPECT_TRUE(all.insert(i).second) << "index " << i << " in both";
  EXPECT_EQ(all.size(), 60000u);
  EXPECT_EQ(*all.begin(), 0);
  EXPECT_EQ(*all.rbegin(), 59999);
  EXPECT_TRUE(std::is_sorted(val.source_indices().begin(), val.source_indices().end()));
  // The documented rule: the last 5,000 of randperm(60000, Generator(kValSeed)).
  Generator g(FashionMnist::kValSeed);
  std::vector<int64_t> perm = randperm(60000, g).to_vector<int64_t>();
  std::vector<int64_t> want(perm.begin() + 55000, perm.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(val.source_indices(), want);
  EXPECT_EQ(FashionMnist::split_indices(Split::val), want);
  // Rows are the training file's rows.
  EXPECT_TENSOR_NEAR(val.images(), rows(ref.at("images"), val.source_indices()).unsqueeze(1), 0.0, 0.0);
  EXPECT_TENSOR_NEAR(val.labels(), rows(ref.at("labels"), val.source_indices()), 0.0, 0.0);
  EXPECT_TENSOR_NEAR(train.images(), rows(ref.at("images"), train.source_indices()).unsqueeze(1), 0.0, 0.0);
  EXPECT_TENSOR_NEAR(train.labels(), rows(ref.at("labels"), train.source_indices()), 0.0, 0.0);
  // Every class is in the validation set.
  std::set<int64_t> classes;
  for (int64_t l : val.labels().to_vector<int64_t>()) classes.insert(l);
  EXPECT_EQ(classes.size(), 10u);
}

TEST(FashionMnist, ClassNamesAsTorchvision) {
  const Tensor bytes = torch_ref("data.fashion_classes", {}).at("out");
  const auto v = bytes.to_vector<uint8_t>();
  std::string joined;
  for (size_t i = 0; i < FashionMnist::class_names().size(); ++i)
    joined += (i ? "\n" : "") + FashionMnist::class_names()[i];
  EXPECT_EQ(joined, std::string(v.begin(), v.end()));
  EXPECT_EQ(int64_t(FashionMnist::class_names().size()), FashionMnist::kNumClasses);
}

TEST(FashionMnist, LoaderEpochOverTheTrainingSplit) {
  REQUIRE_DATA();
  auto t0 = std::chrono::steady_clock::now();
  auto train = std::make_shared<FashionMnist>(FashionMnist::load(FashionMnist::kDefaultDir, Split::train));
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  data::LoaderOptions o;
  o.batch_size = 128;
  o.seed = 1;
  o.mean = {0.2860f};
  o.std = {0.3530f};
  o.augment.crop_padding = 4;
  o.augment.hflip_p = 0.5;
  o.augment.erase_p = 0.25;
  data::DataLoader loader(train, o);
  EXPECT_EQ(loader.batches_per_epoch(), 430);   // ceil(55000 / 128)
  std::vector<int64_t> counts(10, 0);
  t0 = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < loader.batches_per_epoch(); ++s) {
    data::Batch b = loader.next();
    for (int64_t l : b.labels.to_vector<int64_t>()) counts[size_t(l)]++;
  }
  const double epoch_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<int64_t> want(10, 0);
  for (int64_t l : train->labels().to_vector<int64_t>()) want[size_t(l)]++;
  EXPECT_EQ(counts, want);
  std::printf("[ measure  ] Fashion-MNIST train load %.3f s; one augmented epoch (430 batches of 128) %.3f s "
              "(%.0f images/s)\n",
              load_s, epoch_s, 55000 / epoch_s);
}

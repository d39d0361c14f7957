// Training and evaluating on an image folder (`attn train --data DIR`): the splits (train/ + test/,
// val/ used when both exist, otherwise a fixed 10% of train/ held out for validation), their
// errors, and a short run on a synthetic three-class folder that learns it, sets the class count
// from the folder and records the class names in the checkpoint.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "attn/attn.h"
#include "attn/data/image.h"
#include "attn/data/image_folder_splits.h"
#include "attn/io/checkpoint.h"
#include "attn/train/tasks/image_classification.h"
#include "attn/train/trainer.h"
#include "attn/viz/explain.h"
#include "errors.h"
#include "attn/models/pretrained.h"
#include "torch_ref.h"
#include "train_checks.h"

using namespace attn;
using test::error_of;
namespace fs = std::filesystem;

namespace {

// A 28 x 28 gray image of class k in {0, 1, 2}: a bright horizontal band in the top, middle or bottom
// third, on noise; every fifth image is written 32 x 32 RGB instead (resized and converted on read).
void write_example(const std::string& path, int k, Generator& g) {
  const bool odd = g.randint(5) == 0;
  const int64_t s = odd ? 32 : 28, c = odd ? 3 : 1;
  Tensor img = Tensor::empty({s, s, c}, DType::u8);
  uint8_t* p = img.data<uint8_t>();
  for (int64_t y = 0; y < s; ++y)
    for (int64_t x = 0; x < s; ++x) {
      const bool band = y * 3 / s == k;
      const int v = (band ? 170 : 20) + int(g.randint(60));
      for (int64_t ch = 0; ch < c; ++ch) p[(y * s + x) * c + ch] = uint8_t(v);
    }
  fs::create_directories(fs::path(path).parent_path());
  data::write_png(path, img);
}

const std::vector<std::string> kClasses = {"bottom", "middle", "top"};   // sorted; labels 0, 1, 2
// Class name -> band index (k above): "top" is band 0.
int band_of(const std::string& name) { return name == "top" ? 0 : name == "middle" ? 1 : 2; }

void write_split(const std::string& dir, int per_class, uint64_t seed) {
  Generator g(seed);
  for (const auto& name : kClasses)
    for (int i = 0; i < per_class; ++i)
      write_example(dir + "/" + name + "/" + std::to_string(i) + ".png", band_of(name), g);
}

std::string fresh(const std::string& name) { return test::fresh_tmp_dir("attn_folder_data_test", name); }

}  // namespace

TEST(FolderSplits, TrainAndTestHoldOutAFixedTenthForValidation) {
  const std::string d = fresh("tt");
  write_split(d + "/train", 20, 1);   // 60 images: 6 held out
  write_split(d + "/test", 5, 2);
  const data::ImageFolderSplits s = data::load_image_folder_splits(d, 28, 1);
  EXPECT_EQ(s.classes, kClasses);
  EXPECT_EQ(s.train->size(), 54);
  EXPECT_EQ(s.val->size(), 6);
  EXPECT_EQ(s.test->size(), 15);
  EXPECT_EQ(s.test_from, d + "/test");
  // Disjoint, together all of train/, and the same on every load (no dependence on the global seed).
  auto idx = [](const std::shared_ptr<data::Dataset>& ds) {
    return dynamic_cast<const data::SubsetDataset&>(*ds).indices();
  };
  std::set<int64_t> all;
  for (int64_t i : idx(s.train)) all.insert(i);
  for (int64_t i : idx(s.val)) EXPECT_TRUE(all.insert(i).second) << i;
  EXPECT_EQ(all.size(), 60u);
  manual_seed(12345);
  const data::ImageFolderSplits again = data::load_image_folder_splits(d, 28, 1);
  EXPECT_EQ(idx(again.val), idx(s.val));
  // A held-out image is the folder's image: same pixels and label.
  data::ImageFolder whole(d + "/train", 28, 1);
  const int64_t j = idx(s.val)[3];
  const data::Example a = s.val->get(3), b = whole.get(j);
  EXPECT_EQ(a.label, b.label);
  EXPECT_TENSOR_NEAR(a.image, b.image, 0, 0);
  fs::remove_all(d);
}

TEST(FolderSplits, ValFolderIsValidationWhenTestExistsElseTheTestSplit) {
  const std::string d = fresh("tvt");
  write_split(d + "/train", 10, 1);
  write_split(d + "/val", 4, 3);
  write_split(d + "/test", 5, 2);
  data::ImageFolderSplits s = data::load_image_folder_splits(d, 16, 3);   // resized, converted
  EXPECT_EQ(s.train->size(), 30);
  EXPECT_EQ(s.val->size(), 12);
  EXPECT_EQ(s.test->size(), 15);
  EXPECT_EQ(s.val_from, d + "/val");
  EXPECT_EQ(s.train->image_shape(), (Shape{3, 16, 16}));
  fs::remove_all(d + "/test");
  s = data::load_image_folder_splits(d, 28, 1);   // train/ + val/: val/ is the test split
  EXPECT_EQ(s.test->size(), 12);
  EXPECT_EQ(s.test_from, d + "/val");
  EXPECT_EQ(s.val->size(), 3);
  EXPECT_EQ(s.train->size(), 27);
  fs::remove_all(d);
}

TEST(FolderSplits, Errors) {
  const std::string d = fresh("errors");
  EXPECT_EQ(error_of([&] { data::load_image_folder_splits(d + "/nope", 28, 1); }),
            "data: '" + d + "/nope' is not a folder (expected fashion-mnist or a folder holding train/ and test/ or "
            "val/, one subfolder per class)");
  write_split(d + "/train", 1, 1);
  EXPECT_EQ(error_of([&] { data::image_folder_classes(d); }),
            "data: expected '" + d + "' to hold train/ and test/ (or val/), each with one subfolder per class; "
            "found train/");
  // A test split with other classes.
  Generator g(4);
  write_example(d + "/test/top/0.png", 0, g);
  write_example(d + "/test/left/0.png", 1, g);
  EXPECT_EQ(error_of([&] { data::load_image_folder_splits(d, 28, 1); }),
            "data: the classes of '" + d + "/test' (left, top) differ from those of '" + d +
                "/train' (bottom, middle, top)");
  fs::remove_all(d + "/test/left");
  write_example(d + "/test/bottom/0.png", 2, g);
  write_example(d + "/test/middle/0.png", 1, g);
  EXPECT_EQ(data::load_image_folder_splits(d, 28, 1).val->size(), 1);   // 3 training images: 1 held out
  // A corrupt image names its file when read.
  {
    std::ofstream(d + "/train/top/bad.png", std::ios::binary) << "not a png";
  }
  const data::ImageFolderSplits s = data::load_image_folder_splits(d, 28, 1);
  std::vector<float> buf(28 * 28);
  const std::string err = error_of([&] {   // the first read that fails, in either split
    for (int64_t i = 0; i < s.train->size(); ++i) s.train->read(i, buf.data());
    for (int64_t i = 0; i < s.val->size(); ++i) s.val->read(i, buf.data());
  });
  EXPECT_NE(err.find("bad.png"), std::string::npos) << err;
  fs::remove_all(d);
}

TEST(FolderTraining, LearnsAThreeClassFolderAndKeepsItsClassNames) {
  const std::string d = fresh("train");
  write_split(d + "/train", 60, 1);
  write_split(d + "/test", 20, 2);
  auto cfg = test::quiet<train::TrainConfig>(d + "/run");
  cfg.model = "vit_fmnist_demo";
  cfg.data = d;
  cfg.epochs = 4;
  cfg.image.batch = 32;
  cfg.lr = 2e-3;
  cfg.warmup_epochs = 0.5;
  cfg.seed = 3;
  const train::TrainResult r = train::train(cfg);
  EXPECT_EQ(r.steps, 4 * (162 / 32));   // 180 images, 18 held out
  EXPECT_GE(r.metric("test_accuracy"), 0.9) << "an easy three-class problem";
  // The class count came from the folder; the names are in the checkpoint for predict / explain / eval.
  const auto meta = io::read_checkpoint_metadata(r.checkpoint);
  EXPECT_EQ(meta.at("config").at("num_classes"), 3);
  EXPECT_EQ(meta.at("train_state").at("class_names").get<std::vector<std::string>>(), kClasses);
  const models::CheckpointInputs in = models::checkpoint_inputs(r.checkpoint);
  EXPECT_EQ(in.class_names, kClasses);
  EXPECT_EQ(in.data, d);
  // Evaluating the checkpoint on the folder's test split gives the trainer's figure.
  auto model = models::load_classifier_checkpoint(r.checkpoint);
  const data::ImageFolderSplits s = data::load_image_folder_splits(d, 28, 1);
  EXPECT_DOUBLE_EQ(train::evaluate(*model, *s.test, in.mean, in.std).accuracy, r.metric("test_accuracy"));
  // A model whose class count is set to something else is refused before training.
  cfg.model_config = {{"num_classes", 10}};
  cfg.out = d + "/run10";
  EXPECT_EQ(error_of([&] { train::train(cfg); }),
            "train: the model vit_fmnist_demo predicts 10 classes, but '" + d + "' has 3");
  fs::remove_all(d);
}

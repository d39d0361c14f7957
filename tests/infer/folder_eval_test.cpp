// Scoring a classifier on a folder of labelled images (infer/folder_eval.h): the ImageNet-1k WordNet
// IDs, the three ways folders map to classes and their errors, and top-1 / top-5 / loss against
// torchvision's transforms and VisionTransformer on the same weights and image files
// (tests/golden/gen/folder_eval.py), with an undecodable file reported and skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include "attn/attn.h"
#include "attn/data/image_folder.h"
#include "attn/data/preprocess.h"
#include "attn/infer/folder_eval.h"
#include "attn/io/safetensors.h"
#include "attn/infer/folder_eval.h"
#include "errors.h"
#include "files.h"
#include "attn/models/name_maps.h"
#include "torch_ref.h"
#include "train_checks.h"

using namespace attn;
using test::write_bytes;
using test::error_of;
namespace fs = std::filesystem;

namespace {


}  // namespace

TEST(ImagenetWnids, SortedUniqueAndAnchored) {
  const auto& ids = data::imagenet_wnids();
  ASSERT_EQ(ids.size(), 1000u);
  const std::regex wnid("n[0-9]{8}");
  for (size_t k = 0; k < ids.size(); ++k) {
    EXPECT_TRUE(std::regex_match(ids[k], wnid)) << k << ": " << ids[k];
    if (k) EXPECT_LT(ids[k - 1], ids[k]) << "not strictly sorted at " << k;
  }
  // Indices known from the published class lists (timm's / Keras' imagenet_class_index).
  EXPECT_EQ(ids[0], "n01440764");     // tench
  EXPECT_EQ(ids[1], "n01443537");     // goldfish
  EXPECT_EQ(ids[207], "n02099601");   // golden retriever
  EXPECT_EQ(ids[281], "n02123045");   // tabby cat
  EXPECT_EQ(ids[404], "n02690373");   // airliner
  EXPECT_EQ(ids[970], "n09193705");   // alp
  EXPECT_EQ(ids[999], "n15075141");   // toilet tissue
  EXPECT_EQ(data::imagenet_class_names()[281], "tabby");   // torchvision's name
}

TEST(FolderLabelMap, WordnetNameAndIndexRules) {
  const std::vector<std::string> names = {"cat", "dog", "fish"};
  // A subset of ImageNet by WordNet ID (unsorted input; the folders are sorted as ImageFolder sorts them).
  infer::FolderLabelMap m = infer::map_folder_classes({"n15075141", "n02123045", "n01440764"}, 1000, {});
  EXPECT_EQ(m.rule, "wnid");
  EXPECT_EQ(m.folders, (std::vector<std::string>{"n01440764", "n02123045", "n15075141"}));
  EXPECT_EQ(m.model_class, (std::vector<int64_t>{0, 281, 999}));
  // The model's class names (fewer folders than classes).
  m = infer::map_folder_classes({"fish", "cat"}, 3, names);
  EXPECT_EQ(m.rule, "name");
  EXPECT_EQ(m.model_class, (std::vector<int64_t>{0, 2}));
  // As many folders as classes: sorted order.
  m = infer::map_folder_classes({"b", "a", "c"}, 3, names);
  EXPECT_EQ(m.rule, "index");
  EXPECT_EQ(m.model_class, (std::vector<int64_t>{0, 1, 2}));
  // All 1,000 WordNet IDs: the ID rule, which equals sorted order.
  m = infer::map_folder_classes(data::imagenet_wnids(), 1000, data::imagenet_class_names());
  EXPECT_EQ(m.rule, "wnid");
  for (int64_t k = 0; k < 1000; ++k) ASSERT_EQ(m.model_class[size_t(k)], k);

  EXPECT_EQ(error_of([] { infer::map_folder_classes({"n01440764", "n00000001"}, 1000, {}); }),
            "evaluate_folder: the subfolders are named by WordNet ID, but 1 of them are not among ImageNet-1k's "
            "1,000 classes: 'n00000001' (expected IDs such as 'n01440764', the tench)");
  EXPECT_EQ(error_of([&] { infer::map_folder_classes({"cat", "horse"}, 3, names); }),
            "evaluate_folder: cannot tell which of the model's 3 classes each of the 2 subfolders is: expected 3 "
            "subfolders (sorted order = class index), or subfolders named after the model's classes; these fit "
            "none of that: 'horse'");
  // WordNet IDs do not name the classes of a 10-class model.
  EXPECT_NE(error_of([] { infer::map_folder_classes({"n01440764"}, 10, {}); })
                .find("cannot tell which of the model's 10 classes each of the 1 subfolders is"),
            std::string::npos);
  EXPECT_EQ(error_of([] { infer::map_folder_classes({}, 10, {}); }),
            "evaluate_folder: expected at least one class subfolder, found none");
}

TEST(FolderEval, MatchesTorchvisionValidation) {
  const int64_t n = 30;
  const data::Preprocess pre = data::preset_for("vit", data::WeightSource::torchvision, 32);   // 36 -> 32
  ASSERT_EQ(pre.crop_size, 32);
  ASSERT_EQ(pre.resize_size, 36);
  const nlohmann::json args = {{"seed", 5}, {"n", n}, {"resize", pre.resize_size}, {"crop", pre.crop_size},
                               {"interpolation", "bilinear"}, {"mean", pre.mean}, {"std", pre.std}};
  const test::Tensors ref = test::torch_ref("folder_eval.reference", {}, args);
  const std::string dir = test::fresh_tmp_dir("attn_folder_eval_test", "match");
  const auto labels = ref.at("labels").to_vector<int64_t>();
  const auto jpeg = ref.at("jpeg").to_vector<int64_t>();
  for (int64_t k = 0; k < n; ++k) {
    const Tensor& b = ref.at("img_" + std::to_string(k));
    const std::string path = dir + "/val/" + data::imagenet_wnids()[size_t(labels[size_t(k)])] + "/img_" +
                             std::to_string(k) + (jpeg[size_t(k)] ? ".jpg" : ".png");
    write_bytes(path, b.data<uint8_t>(), size_t(b.numel()));
  }
  // One file that is not an image, in the first class folder: reported, not scored.
  const std::string bad = dir + "/val/" + data::imagenet_wnids()[size_t(labels[0])] + "/zz_broken.jpg";
  write_bytes(bad, "not a jpeg");

  const Tensor file = ref.at("file");
  models::ForeignVitOptions o;
  o.model = "vit";
  o.format = models::WeightFormat::torchvision;
  o.overrides = {{"image_size", 32}, {"patch_size", 8}, {"in_channels", 3}, {"num_classes", 1000},
                 {"dim", 32},        {"depth", 2},      {"heads", 2},       {"mlp_ratio", 2.0}};
  auto model = models::load_foreign_vit(io::parse_safetensors(file.data<uint8_t>(), size_t(file.numel()), "<torch>").tensors, o)
                   .model;
  const infer::FolderLabelMap map = infer::map_folder_classes(data::ImageFolder::find_classes(dir + "/val"), 1000, {});
  EXPECT_EQ(map.rule, "wnid");
  infer::FolderEvalOptions opt;
  opt.pre = pre;
  opt.batch = 7;   // batches that do not divide the folder, one holding the broken file
  const infer::FolderEvalResult r = infer::evaluate_folder(*model, dir + "/val", map, opt);

  const int64_t top1 = ref.at("top1").to_vector<int64_t>()[0], top5 = ref.at("top5").to_vector<int64_t>()[0];
  const double loss = ref.at("loss").to_vector<double>()[0];
  std::printf("  torchvision: top-1 %lld, top-5 %lld of %lld, loss %.6f; attn: %.0f, %.0f of %lld, loss %.6f\n",
              (long long)top1, (long long)top5, (long long)n, loss, r.top1 * double(r.count), r.top5 * double(r.count),
              (long long)r.count, r.loss);
  ASSERT_GE(top1, 5) << "the reference should make some top-1 hits";
  ASSERT_GT(top5, top1) << "and some top-5 hits that are not top-1";
  EXPECT_EQ(r.count, n);
  EXPECT_EQ(std::llround(r.top1 * double(r.count)), top1);
  EXPECT_EQ(std::llround(r.top5 * double(r.count)), top5);
  EXPECT_NEAR(r.loss, loss, 1e-4 * std::max(1.0, std::abs(loss)));
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find("zz_broken.jpg"), std::string::npos) << r.errors[0];
  int64_t sum = 0, sum1 = 0;
  for (const auto& c : r.per_class) {
    sum += c.count;
    sum1 += c.top1;
    EXPECT_EQ(c.model_class, map.model_class[size_t(&c - r.per_class.data())]);
  }
  EXPECT_EQ(sum, n);
  EXPECT_EQ(sum1, top1);

  // --limit: N images spread over the sorted list (so over the classes), not the first N.
  opt.limit = 10;
  const infer::FolderEvalResult l = infer::evaluate_folder(*model, dir + "/val", map, opt);
  EXPECT_EQ(l.count + int64_t(l.errors.size()), 10);
  int64_t classes_hit = 0;
  for (const auto& c : l.per_class) classes_hit += c.count > 0;
  EXPECT_GE(classes_hit, 5);

  // A label map made for another folder is refused.
  infer::FolderLabelMap other = map;
  other.folders.pop_back();
  other.model_class.pop_back();
  EXPECT_NE(error_of([&] { infer::evaluate_folder(*model, dir + "/val", other, opt); })
                .find("evaluate_folder: the label map was made for "),
            std::string::npos);
  fs::remove_all(dir);
}

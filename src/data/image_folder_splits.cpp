// Image-folder splits for training and evaluation; see attn/data/image_folder_splits.h.
#include "attn/data/image_folder_splits.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "attn/core/error.h"
#include "attn/core/rng.h"
#include "attn/data/image_folder.h"

namespace attn::data {

namespace fs = std::filesystem;

SubsetDataset::SubsetDataset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {
  ATTN_CHECK(base_, "SubsetDataset: expected a dataset, got none");
  for (int64_t i : indices_)
    ATTN_CHECK(i >= 0 && i < base_->size(), "SubsetDataset: index ", i, " is outside [0, ", base_->size(), ")");
}

int64_t SubsetDataset::read(int64_t i, float* out) const {
  ATTN_CHECK(i >= 0 && i < size(), "SubsetDataset: index ", i, " is outside [0, ", size(), ")");
  return base_->read(indices_[size_t(i)], out);
}

namespace {

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

// "a, b, c" of what a folder holds (for messages), at most 8 names.
std::string listing(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::error_code de;
    names.push_back(e.path().filename().string() + (e.is_directory(de) ? "/" : ""));
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) return "nothing";
  std::string s;
  for (size_t i = 0; i < names.size() && i < 8; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > 8) s += ", ... (" + std::to_string(names.size()) + " entries)";
  return s;
}

void check_layout(const std::string& dir) {
  ATTN_CHECK(is_dir(dir), "data: '", dir, "' is not a folder (expected fashion-mnist or a folder holding train/ ",
             "and test/ or val/, one subfolder per class)");
  ATTN_CHECK(is_dir(fs::path(dir) / "train") && (is_dir(fs::path(dir) / "test") || is_dir(fs::path(dir) / "val")),
             "data: expected '", dir, "' to hold train/ and test/ (or val/), each with one subfolder per class; ",
             "found ", listing(dir));
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

}  // namespace

std::vector<std::string> image_folder_classes(const std::string& dir) {
  check_layout(dir);
  return ImageFolder::find_classes((fs::path(dir) / "train").string());
}

ImageFolderSplits load_image_folder_splits(const std::string& dir, int64_t image_size, int64_t channels) {
  check_layout(dir);
  const fs::path root(dir);
  const bool has_test = is_dir(root / "test"), has_val = is_dir(root / "val");
  auto train_all = std::make_shared<ImageFolder>((root / "train").string(), image_size, channels);
  ImageFolderSplits s;
  s.classes = train_all->classes();
  auto other = [&](const char* name) {
    auto f = std::make_shared<ImageFolder>((root / name).string(), image_size, channels);
    ATTN_CHECK(f->classes() == s.classes, "data: the classes of '", (root / name).string(), "' (", join(f->classes()),
               ") differ from those of '", (root / "train").string(), "' (", join(s.classes), ")");
    return f;
  };
  s.test = other(has_test ? "test" : "val");
  s.test_from = (root / (has_test ? "test" : "val")).string();
  if (has_test && has_val) {
    s.val = other("val");
    s.val_from = (root / "val").string();
    s.train = train_all;
    return s;
  }
  // Hold out a fixed 10% of train/ (at least one image) for validation.
  const int64_t n = train_all->size();
  ATTN_CHECK(n >= 2, "data: '", (root / "train").string(), "' has ", n,
             " image; at least 2 are needed to hold one out for validation (or add a val/ folder beside test/)");
  const int64_t n_val = std::max<int64_t>(1, n / 10);
  Generator g(kImageFolderValSeed);
  const Tensor perm = randperm(n, g);
  const int64_t* p = perm.data<int64_t>();
  std::vector<int64_t> val(p + (n - n_val), p + n), train(p, p + (n - n_val));
  std::sort(val.begin(), val.end());
  std::sort(train.begin(), train.end());
  s.val = std::make_shared<SubsetDataset>(train_all, val);
  s.train = std::make_shared<SubsetDataset>(train_all, train);
  s.val_from = "held out of " + (root / "train").string();
  return s;
}

}  // namespace attn::data

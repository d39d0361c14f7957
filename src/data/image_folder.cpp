// ImageFolder: torchvision's folder-per-class layout and order; see attn/data/image_folder.h.
#include "attn/data/image_folder.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "attn/data/image.h"

namespace attn::data {
namespace {

namespace fs = std::filesystem;

bool is_image_file(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  for (const char* ext : {".png", ".jpg", ".jpeg"}) {
    const size_t n = std::strlen(ext);
    if (lower.size() >= n && lower.compare(lower.size() - n, n, ext) == 0) return true;
  }
  return false;
}

// Every image file under `dir` as (folder, name), sorted as torchvision's make_dataset visits them
// (follows links, as os.walk(followlinks=True)).
std::vector<std::pair<std::string, std::string>> walk(const fs::path& dir) {
  std::vector<std::pair<std::string, std::string>> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, ec), end;
  ATTN_CHECK(!ec, "image_folder: cannot list '", dir.string(), "': ", ec.message());
  for (; it != end; it.increment(ec)) {
    ATTN_CHECK(!ec, "image_folder: cannot list '", dir.string(), "': ", ec.message());
    std::error_code fe;
    if (it->is_directory(fe)) continue;
    const std::string name = it->path().filename().string();
    if (is_image_file(name)) files.emplace_back(it->path().parent_path().string(), name);
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::vector<std::string> ImageFolder::find_classes(const std::string& root) {
  std::error_code ec;
  ATTN_CHECK(fs::is_directory(root, ec), "image_folder: '", root, "' is not a folder");
  std::vector<std::string> classes;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (std::error_code de; e.is_directory(de)) classes.push_back(e.path().filename().string());
  ATTN_CHECK(!ec, "image_folder: cannot list '", root, "': ", ec.message());
  std::sort(classes.begin(), classes.end());
  ATTN_CHECK(!classes.empty(), "image_folder: found no class folders in '", root, "'");
  return classes;
}

ImageFolder::ImageFolder(const std::string& root, int64_t image_size, int64_t channels)
    : root_(root), image_size_(image_size), channels_(channels) {
  ATTN_CHECK(image_size > 0, "image_folder: expected image_size > 0, got ", image_size);
  ATTN_CHECK(channels == 1 || channels == 3, "image_folder: expected channels 1 or 3, got ", channels);
  classes_ = find_classes(root);
  std::vector<std::string> empty;
  for (size_t k = 0; k < classes_.size(); ++k) {
    class_to_idx_[classes_[k]] = int64_t(k);
    const auto files = walk(fs::path(root) / classes_[k]);
    if (files.empty()) empty.push_back(classes_[k]);
    for (const auto& [folder, name] : files) samples_.emplace_back((fs::path(folder) / name).string(), int64_t(k));
  }
  if (!empty.empty()) {
    std::string list;
    for (const auto& c : empty) list += (list.empty() ? "" : ", ") + c;
    fail("image_folder: found no .png/.jpg/.jpeg file for the classes ", list, " in '", root, "'");
  }
}

int64_t ImageFolder::read(int64_t i, float* out) const {
  ATTN_CHECK(i >= 0 && i < size(), "image_folder: index ", i, " is outside [0, ", size(), ")");
  const auto& [path, label] = samples_[size_t(i)];
  Tensor img = read_image(path, channels_);
  if (img.size(0) != image_size_ || img.size(1) != image_size_)
    img = resize(img, image_size_, image_size_, Resample::bilinear);
  const uint8_t* s = img.data<uint8_t>();
  const int64_t hw = image_size_ * image_size_;
  for (int64_t c = 0; c < channels_; ++c)
    for (int64_t p = 0; p < hw; ++p) out[c * hw + p] = float(s[p * channels_ + c]) / 255.0f;
  return label;
}

Tensor ImageFolder::labels() const {
  std::vector<int64_t> y;
  y.reserve(samples_.size());
  for (const auto& s : samples_) y.push_back(s.second);
  return Tensor::from_vector<int64_t>(y, {int64_t(y.size())});
}

}  // namespace attn::data

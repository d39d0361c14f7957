#include "attn/infer/folder_eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "attn/autograd/grad_mode.h"
#include "attn/core/error.h"
#include "attn/data/image_folder.h"
#include "attn/ops/combine.h"
#include "attn/core/progress.h"

namespace attn::infer {

namespace {

bool is_wnid(const std::string& s) {
  if (s.size() != 9 || s[0] != 'n') return false;
  return std::all_of(s.begin() + 1, s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string first_names(const std::vector<std::string>& names, size_t n = 3) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < n; ++i) s += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > n) s += ", ...";
  return s;
}

}  // namespace

FolderLabelMap map_folder_classes(const std::vector<std::string>& folders, int64_t num_classes,
                                  const std::vector<std::string>& class_names) {
  ATTN_CHECK(!folders.empty(), "evaluate_folder: expected at least one class subfolder, found none");
  ATTN_CHECK(num_classes > 0, "evaluate_folder: expected a model with at least one class, got ", num_classes);
  FolderLabelMap m;
  m.folders = folders;
  std::sort(m.folders.begin(), m.folders.end());

  // WordNet IDs of ImageNet-1k (a subset is fine) scored against a 1,000-way output.
  if (num_classes == 1000 && std::all_of(m.folders.begin(), m.folders.end(), is_wnid)) {
    const auto& ids = data::imagenet_wnids();
    std::vector<std::string> unknown;
    for (const auto& f : m.folders) {
      const auto it = std::lower_bound(ids.begin(), ids.end(), f);   // the list is sorted
      if (it == ids.end() || *it != f) {
        unknown.push_back(f);
        continue;
      }
      m.model_class.push_back(int64_t(it - ids.begin()));
    }
    ATTN_CHECK(unknown.empty(), "evaluate_folder: the subfolders are named by WordNet ID, but ", unknown.size(),
               " of them are not among ImageNet-1k's 1,000 classes: ", first_names(unknown),
               " (expected IDs such as 'n01440764', the tench)");
    m.rule = "wnid";
    return m;
  }
  // The model's own class names.
  if (int64_t(class_names.size()) == num_classes) {
    std::unordered_map<std::string, int64_t> index;
    for (int64_t k = 0; k < num_classes; ++k) index.emplace(class_names[size_t(k)], k);   // first wins
    std::vector<int64_t> cls;
    for (const auto& f : m.folders) {
      const auto it = index.find(f);
      if (it == index.end()) break;
      cls.push_back(it->second);
    }
    if (cls.size() == m.folders.size()) {
      m.model_class = std::move(cls);
      m.rule = "name";
      return m;
    }
  }
  // Sorted position = class index.
  if (int64_t(m.folders.size()) == num_classes) {
    m.model_class.resize(m.folders.size());
    std::iota(m.model_class.begin(), m.model_class.end(), int64_t(0));
    m.rule = "index";
    return m;
  }
  std::vector<std::string> misfits;
  for (const auto& f : m.folders) {
    const bool named = std::find(class_names.begin(), class_names.end(), f) != class_names.end();
    if (!named && !(num_classes == 1000 && is_wnid(f))) misfits.push_back(f);
  }
  fail("evaluate_folder: cannot tell which of the model's ", num_classes, " classes each of the ", m.folders.size(),
       " subfolders is: expected ", num_classes, " subfolders (sorted order = class index), ",
       num_classes == 1000 ? "ImageNet WordNet IDs (e.g. 'n01440764'), " : "",
       "or subfolders named after the model's classes; these fit none of that: ",
       first_names(misfits.empty() ? m.folders : misfits));
}

FolderEvalResult evaluate_folder(models::ImageClassifier& model, const std::string& root, const FolderLabelMap& map,
                                 const FolderEvalOptions& opt) {
  ATTN_CHECK(opt.batch >= 1, "evaluate_folder: expected batch >= 1, got ", opt.batch);
  ATTN_CHECK(opt.limit >= 0, "evaluate_folder: expected limit >= 0, got ", opt.limit);
  const auto t0 = std::chrono::steady_clock::now();
  // ImageFolder lists the files (sorted as torchvision's make_dataset); its own resizing is not used.
  const data::ImageFolder folder(root, opt.pre.crop_size, opt.pre.channels);
  ATTN_CHECK(folder.classes() == map.folders, "evaluate_folder: the label map was made for ", map.folders.size(),
             " subfolders (", first_names(map.folders), "), but '", root, "' has ", folder.classes().size(), " (",
             first_names(folder.classes()), ")");
  ATTN_CHECK(map.model_class.size() == map.folders.size(), "evaluate_folder: the label map has ",
             map.model_class.size(), " classes for ", map.folders.size(), " subfolders");
  std::vector<std::pair<std::string, int64_t>> samples = folder.samples();
  if (opt.limit > 0 && opt.limit < int64_t(samples.size())) {
    // Evenly spread: the list is sorted by class, so its first N would be one or two classes.
    std::vector<std::pair<std::string, int64_t>> pick;
    const int64_t n = int64_t(samples.size());
    for (int64_t i = 0; i < opt.limit; ++i) pick.push_back(samples[size_t(i * n / opt.limit)]);
    samples = std::move(pick);
  }

  FolderEvalResult r;
  r.per_class.resize(map.folders.size());
  for (size_t k = 0; k < map.folders.size(); ++k) {
    r.per_class[k].folder = map.folders[k];
    r.per_class[k].model_class = map.model_class[k];
  }
  model.eval();
  NoGradGuard ng;
  const int64_t total = int64_t(samples.size());
  ProgressBar bar("eval", total, "img");
  int64_t top1 = 0, top5 = 0;
  double loss_sum = 0;
  for (int64_t first = 0; first < total; first += opt.batch) {
    const int64_t n = std::min(opt.batch, total - first);
    std::vector<std::string> paths, errors;
    for (int64_t i = 0; i < n; ++i) paths.push_back(samples[size_t(first + i)].first);
    const std::vector<Tensor> inputs = data::preprocess_files(paths, opt.pre, errors);
    std::vector<Tensor> ok;
    std::vector<int64_t> rows;   // sample index of each decoded image
    for (int64_t i = 0; i < n; ++i) {
      if (!errors[size_t(i)].empty()) {
        r.errors.push_back(errors[size_t(i)]);
        continue;
      }
      ok.push_back(inputs[size_t(i)]);
      rows.push_back(first + i);
    }
    if (!ok.empty()) {
      const Tensor logits = model.forward(stack(ok, 0));
      ATTN_CHECK(logits.dim() == 2 && logits.size(0) == int64_t(ok.size()), "evaluate_folder: expected (",
                 ok.size(), ", classes) logits from the model, got ", shape_str(logits.shape()));
      const int64_t c = logits.size(1);
      const std::vector<double> l = logits.to_vector<double>();
      const int64_t k5 = std::min<int64_t>(5, c);
      for (size_t j = 0; j < ok.size(); ++j) {
        const double* row = l.data() + j * size_t(c);
        const int64_t folder_class = samples[size_t(rows[j])].second;
        const int64_t y = map.model_class[size_t(folder_class)];
        ATTN_CHECK(y >= 0 && y < c, "evaluate_folder: folder '", map.folders[size_t(folder_class)], "' maps to class ",
                   y, ", but the model has ", c, " classes");
        // Rank of the true class: how many classes score strictly higher (ties count in its favour, as
        // torch.topk keeps the lower index first only among equal values; exact ties are rare in f32).
        int64_t higher = 0;
        double mx = row[0];
        for (int64_t q = 0; q < c; ++q) {
          higher += row[q] > row[y];
          mx = std::max(mx, row[q]);
        }
        double z = 0;
        for (int64_t q = 0; q < c; ++q) z += std::exp(row[q] - mx);
        loss_sum += std::log(z) + mx - row[y];
        auto& pc = r.per_class[size_t(folder_class)];
        ++pc.count;
        if (higher == 0) ++top1, ++pc.top1;
        if (higher < k5) ++top5, ++pc.top5;
      }
      r.count += int64_t(ok.size());
    }
    if (opt.progress)
      bar.update(first + n, n, {{"top1", r.count ? double(top1) / double(r.count) : 0.0}});
  }
  if (opt.progress) bar.finish();
  if (r.count > 0) {
    r.top1 = double(top1) / double(r.count);
    r.top5 = double(top5) / double(r.count);
    r.loss = loss_sum / double(r.count);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace attn::infer

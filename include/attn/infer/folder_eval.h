// Accuracy of an image classifier on a folder of labelled images, as timm's validate.py and
// torchvision's reference scripts measure it on ImageNet's validation set: every image through the
// weights' eval transform (data/preprocess.h), top-1 and top-5 accuracy and the mean cross-entropy.
//
//   // imagenette2/val/n01440764/*.JPEG, ... (torchvision's ImageFolder layout; any subset of the
//   // 1,000 ImageNet classes, named by WordNet ID)
//   auto folders = data::ImageFolder::find_classes("imagenette2/val");
//   infer::FolderLabelMap map = infer::map_folder_classes(folders, 1000, data::imagenet_class_names());
//   infer::FolderEvalOptions o;
//   o.pre = data::preset_for("deit_small_patch16_224", data::WeightSource::timm);
//   infer::FolderEvalResult r = infer::evaluate_folder(*model, "imagenette2/val", map, o);
//   // r.top1, r.top5, r.loss, r.count; r.errors: images that could not be decoded (not counted)
//
// The folder's class k (its k-th subfolder, sorted as torchvision sorts them) is the model's class
// map.model_class[k], decided by the first rule that fits every subfolder:
//   "wnid"   every name is a WordNet ID ("n" + 8 digits) of ImageNet-1k and the model has 1,000
//            classes: that ID's ImageNet-1k index (data::imagenet_wnids()), so Imagenette, Imagewoof
//            or any other subset of the classes is scored against the full 1,000-way output;
//   "name"   every name is one of the model's class names (e.g. "tabby"): that class;
//   "index"  as many subfolders as the model has classes: sorted position k is class k (what
//            torchvision's ImageFolder gives, and the order ImageNet's class indices follow).
// Anything else is an attn::Error naming the folder count, the model's class count and the first
// names that did not fit.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "attn/data/preprocess.h"
#include "attn/models/registry.h"

namespace attn::infer {

struct FolderLabelMap {
  std::vector<std::string> folders;     // the subfolder names, sorted
  std::vector<int64_t> model_class;     // folder k -> the model's class index
  std::string rule;                     // "wnid" | "name" | "index"
};

FolderLabelMap map_folder_classes(const std::vector<std::string>& folders, int64_t num_classes,
                                  const std::vector<std::string>& class_names);

struct FolderEvalOptions {
  data::Preprocess pre;       // the eval transform (resize, center crop, normalise)
  int64_t batch = 32;         // images per forward pass
  int64_t limit = 0;          // > 0: this many images, spread evenly over the folder's sorted list
  bool progress = false;      // a progress bar (rate, ETA, running top-1) on stderr
};

struct FolderClassResult {
  std::string folder;
  int64_t model_class = 0, count = 0, top1 = 0, top5 = 0;   // top1 / top5: images right
};

struct FolderEvalResult {
  int64_t count = 0;                  // images scored (decoded)
  double top1 = 0, top5 = 0;          // fractions of `count`; top-5 is top-k with k = min(5, classes)
  double loss = 0;                    // mean cross-entropy of the logits (f64 log-softmax)
  double seconds = 0;
  std::vector<FolderClassResult> per_class;   // one per subfolder, in folder order
  std::vector<std::string> errors;            // "path: reason" for each image that could not be read
};

// Evaluates `model` (put in eval mode here) on every image under root's class subfolders (the
// files data::ImageFolder lists, in its order). Images are decoded and preprocessed in parallel,
// a batch at a time; an image that cannot be decoded is reported in `errors` and skipped.
FolderEvalResult evaluate_folder(models::ImageClassifier& model, const std::string& root, const FolderLabelMap& map,
                                 const FolderEvalOptions& opt);

}  // namespace attn::infer

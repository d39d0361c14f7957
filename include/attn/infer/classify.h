// Classifying images: each file through an eval transform (data/preprocess.h), a batch per forward
// pass, the softmax's most probable classes with their names.
//
//   models::Pretrained p = models::load_pretrained(models::PretrainedSource::checkpoint("ckpt.safetensors"));
//   for (const infer::ImagePrediction& r : infer::classify_files(*p.model, {"a.jpg", "b.png"}, p.preprocess,
//                                                                p.labels, /*topk=*/5))
//     if (r.error.empty()) std::printf("%s: %s (%.1f%%)\n", r.path.c_str(), r.top[0].name.c_str(),
//                                      100 * r.top[0].probability);
//
// Probabilities: the softmax of the logits in f64 (the largest logit subtracted first). Classes are
// ranked by probability, equal ones in class order.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "attn/data/preprocess.h"
#include "attn/models/registry.h"

namespace attn::infer {

struct ClassScore {
  int64_t index = 0;
  std::string name;          // class_name(labels, index)
  double probability = 0, logit = 0;
};

struct ImagePrediction {
  std::string path;
  std::string error;              // non-empty: the file could not be read (and `top` is empty)
  std::vector<ClassScore> top;    // the most probable classes, most probable first
};

// labels[k], or "class k" where the list has no name for it.
std::string class_name(const std::vector<std::string>& labels, int64_t k);

// The k most probable classes of one row of logits (k > the class count: every class).
std::vector<ClassScore> top_classes(std::span<const double> logits, int64_t k, const std::vector<std::string>& labels);

// Classifies the files in one forward pass of `model` (no gradients; the caller picks the mode, eval
// for inference), decoding and preprocessing them in parallel. A file that cannot be read gets its
// message in `error`; the others are still classified. Results in the order of `paths`.
std::vector<ImagePrediction> classify_files(models::ImageClassifier& model, const std::vector<std::string>& paths,
                                            const data::Preprocess& pre, const std::vector<std::string>& labels,
                                            int64_t topk);

}  // namespace attn::infer

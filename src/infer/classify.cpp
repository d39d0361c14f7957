// Top-k classification of image files; see attn/infer/classify.h.
#include "attn/infer/classify.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "attn/autograd/grad_mode.h"
#include "attn/core/error.h"
#include "attn/ops/combine.h"

namespace attn::infer {

std::string class_name(const std::vector<std::string>& labels, int64_t k) {
  return k >= 0 && size_t(k) < labels.size() ? labels[size_t(k)] : "class " + std::to_string(k);
}

std::vector<ClassScore> top_classes(std::span<const double> l, int64_t k, const std::vector<std::string>& labels) {
  ATTN_CHECK(!l.empty() && k >= 1, "top_classes: expected logits of at least one class and k >= 1, got ", l.size(),
             " logits and k = ", k);
  const double mx = *std::max_element(l.begin(), l.end());
  std::vector<double> prob(l.size());
  double z = 0;
  for (size_t c = 0; c < l.size(); ++c) z += prob[c] = std::exp(l[c] - mx);
  for (double& v : prob) v /= z;
  std::vector<size_t> order(prob.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return prob[a] > prob[b]; });
  std::vector<ClassScore> top;
  for (size_t j = 0; j < std::min(size_t(k), order.size()); ++j)
    top.push_back({int64_t(order[j]), class_name(labels, int64_t(order[j])), prob[order[j]], l[order[j]]});
  return top;
}

std::vector<ImagePrediction> classify_files(models::ImageClassifier& model, const std::vector<std::string>& paths,
                                            const data::Preprocess& pre, const std::vector<std::string>& labels,
                                            int64_t topk) {
  ATTN_CHECK(topk >= 1, "classify_files: expected topk >= 1, got ", topk);
  std::vector<std::string> errors;
  const std::vector<Tensor> decoded = data::preprocess_files(paths, pre, errors);
  std::vector<Tensor> inputs;
  for (const Tensor& t : decoded)
    if (t.defined()) inputs.push_back(t);
  std::vector<double> logits;
  int64_t classes = 0;
  if (!inputs.empty()) {
    NoGradGuard ng;
    const Tensor out = model.forward(stack(inputs, 0));
    ATTN_CHECK(out.dim() == 2 && out.size(0) == int64_t(inputs.size()), "classify_files: expected (", inputs.size(),
               ", classes) logits from the model, got ", shape_str(out.shape()));
    classes = out.size(1);
    logits = out.to_vector<double>();
  }
  std::vector<ImagePrediction> out(paths.size());
  size_t row = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    out[i].path = paths[i];
    out[i].error = errors[i];
    if (!errors[i].empty()) continue;
    out[i].top = top_classes(std::span<const double>(logits.data() + row++ * size_t(classes), size_t(classes)), topk,
                             labels);
  }
  return out;
}

}  // namespace attn::infer

// Measurements an experiment takes of a trained model besides its metric: the ViT's mean attention
// distance per layer and head, and the two numbers its claim is judged by (attn/experiment/experiment.h).
#include <cmath>
#include <string>

#include "attn/core/error.h"
#include "attn/experiment/experiment.h"
#include "attn/models/pretrained.h"
#include "attn/models/vit.h"
#include "attn/viz/inspect.h"

namespace attn::experiment {

Tensor checkpoint_attention_distance(const std::string& checkpoint, int64_t images, const std::string& data_dir) {
  ATTN_CHECK(images > 0, "attention distance: expected a positive number of images, got ", images);
  models::PretrainedSource src;
  src.path = checkpoint;
  const models::Pretrained p = models::load_pretrained(src);
  auto* vit = dynamic_cast<models::VisionTransformer*>(p.model.get());
  ATTN_CHECK(vit != nullptr, "attention distance: the model of '", checkpoint, "' (", p.model_name,
             ") is not a Vision Transformer");
  vit->eval();
  return viz::fashion_mnist_attention_distance(*vit, data_dir, images, 64).mean();
}

namespace {
void check_distance(const Tensor& d) {
  ATTN_CHECK(d.defined() && d.dim() == 2 && d.size(0) >= 2 && d.size(1) >= 1,
             "attention distance: expected (layers >= 2, heads) distances, got ", d.defined() ? d.shape() : Shape{});
}
}  // namespace

double distance_slope(const Tensor& distance) {
  check_distance(distance);
  const int64_t L = distance.size(0), H = distance.size(1);
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (int64_t l = 0; l < L; ++l) {
    double y = 0;
    for (int64_t h = 0; h < H; ++h) y += distance.at({l, h});
    y /= double(H);
    sx += double(l);
    sy += y;
    sxx += double(l) * double(l);
    sxy += double(l) * y;
  }
  return (double(L) * sxy - sx * sy) / (double(L) * sxx - sx * sx);
}

double distance_spread_drop(const Tensor& distance) {
  check_distance(distance);
  const int64_t L = distance.size(0), H = distance.size(1);
  auto spread = [&](int64_t l) {
    double m = 0, ss = 0;
    for (int64_t h = 0; h < H; ++h) m += distance.at({l, h});
    m /= double(H);
    for (int64_t h = 0; h < H; ++h) ss += (distance.at({l, h}) - m) * (distance.at({l, h}) - m);
    return H > 1 ? std::sqrt(ss / double(H - 1)) : 0.0;
  };
  return spread(0) - spread(L - 1);
}

}  // namespace attn::experiment

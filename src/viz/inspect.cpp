#include "attn/viz/inspect.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "attn/autograd/grad_mode.h"
#include "attn/core/error.h"
#include "attn/data/dataset.h"
#include "attn/data/fashion_mnist.h"
#include "attn/ops/elementwise.h"
#include "attn/viz/heatmap.h"

namespace attn::viz {

Tensor cosine_similarity_rows(const Tensor& emb) {
  ATTN_CHECK(emb.defined() && emb.dim() == 2 && emb.size(0) > 0 && emb.size(1) > 0,
             "cosine_similarity_rows: expected (N, D) embeddings, got shape ", emb.defined() ? emb.shape() : Shape{});
  const int64_t n = emb.size(0), d = emb.size(1);
  const std::vector<double> e = emb.contiguous().to_vector<double>();
  std::vector<double> norm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int64_t k = 0; k < d; ++k) s += e[size_t(i * d + k)] * e[size_t(i * d + k)];
    norm[size_t(i)] = std::sqrt(s);
  }
  Tensor out = Tensor::empty({n, n}, DType::f64);
  double* o = out.data<double>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t k = 0; k < d; ++k) s += e[size_t(i * d + k)] * e[size_t(j * d + k)];
      // as torch.nn.functional.cosine_similarity: the norms clamped below by eps = 1e-8
      o[i * n + j] = s / (std::max(norm[size_t(i)], 1e-8) * std::max(norm[size_t(j)], 1e-8));
    }
  return out;
}

Tensor pos_embed_similarity(const models::VisionTransformer& vit) {
  const Tensor pe = vit.patch_position_embeddings();
  ATTN_CHECK(pe.defined(), "pos_embed_similarity: the model has no position embedding (pos_embed '",
             vit.cfg().pos_embed, "')");
  return cosine_similarity_rows(pe);
}

Tensor render_pos_embed_similarity(const Tensor& similarity, int64_t grid, int64_t cell, int64_t gap) {
  ATTN_CHECK(grid >= 1 && similarity.defined() && similarity.dim() == 2 && similarity.size(0) == grid * grid &&
                 similarity.size(1) == grid * grid,
             "render_pos_embed_similarity: expected a (", grid * grid, ", ", grid * grid, ") similarity for a ", grid,
             " x ", grid, " grid, got shape ", similarity.defined() ? similarity.shape() : Shape{});
  if (cell <= 0) cell = std::max<int64_t>(2, 48 / grid);
  if (gap <= 0) gap = std::max<int64_t>(2, cell);
  const int64_t tile = grid * cell, side = grid * tile + (grid + 1) * gap;
  Tensor img = Tensor::full({side, side, 3}, 255.0, DType::u8);
  uint8_t* px = img.data<uint8_t>();
  const std::vector<double> s = similarity.contiguous().to_vector<double>();
  const int64_t n = grid * grid;
  for (int64_t i = 0; i < n; ++i) {   // the tile of patch i, at its own place in the grid
    const int64_t ty = gap + (i / grid) * (tile + gap), tx = gap + (i % grid) * (tile + gap);
    for (int64_t j = 0; j < n; ++j) {
      const double v = s[size_t(i * n + j)];
      const auto rgb = viz::colormap_rgb("viridis", std::isfinite(v) ? (std::clamp(v, -1.0, 1.0) + 1) / 2 : 0.0);
      const int64_t y0 = ty + (j / grid) * cell, x0 = tx + (j % grid) * cell;
      for (int64_t y = y0; y < y0 + cell; ++y)
        for (int64_t x = x0; x < x0 + cell; ++x)
          for (int c = 0; c < 3; ++c) px[(y * side + x) * 3 + c] = rgb[size_t(c)];
    }
  }
  return img;
}

Tensor mean_attention_distance(const Tensor& maps, int64_t num_prefix, int64_t grid, int64_t patch_size) {
  ATTN_CHECK(maps.defined() && maps.dim() == 5 && maps.size(3) == maps.size(4),
             "mean_attention_distance: expected attention maps (L, B, NH, T, T), got shape ",
             maps.defined() ? maps.shape() : Shape{});
  const int64_t L = maps.size(0), B = maps.size(1), NH = maps.size(2), T = maps.size(3), n = grid * grid;
  ATTN_CHECK(num_prefix >= 0 && grid >= 1 && T == num_prefix + n, "mean_attention_distance: expected T = ", num_prefix,
             " prefix tokens + ", n, " patches (a ", grid, " x ", grid, " grid), got T = ", T);
  ATTN_CHECK(patch_size >= 1, "mean_attention_distance: expected patch_size >= 1, got ", patch_size);
  ATTN_CHECK(B >= 1, "mean_attention_distance: expected at least one image, got none");
  // Distances between patch centres, in pixels.
  std::vector<double> dist(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double dy = double(i / grid - j / grid), dx = double(i % grid - j % grid);
      dist[size_t(i * n + j)] = double(patch_size) * std::sqrt(dy * dy + dx * dx);
    }
  const Tensor m = maps.dtype() == DType::f64 ? maps.contiguous() : maps.to(DType::f64).contiguous();
  const double* a = m.data<double>();
  Tensor out = Tensor::zeros({L, NH}, DType::f64);
  double* o = out.data<double>();
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < NH; ++h) {
      double total = 0;
      for (int64_t b = 0; b < B; ++b) {
        const double* A = a + (((l * B + b) * NH + h) * T) * T;
        for (int64_t i = 0; i < n; ++i) {
          const double* row = A + (num_prefix + i) * T + num_prefix;
          for (int64_t j = 0; j < n; ++j) total += row[j] * dist[size_t(i * n + j)];
        }
      }
      o[l * NH + h] = total / double(B * n);
    }
  return out;
}

}  // namespace attn::viz

namespace attn::viz {

void AttentionDistance::add(const Tensor& images) {
  NoGradGuard ng;
  const int64_t px = vit_->cfg().image_size / vit_->grid();
  const Tensor d = mean_attention_distance(vit_->attention_maps(images), vit_->num_prefix_tokens(), vit_->grid(), px) *
                   double(images.size(0));
  sum_ = sum_.defined() ? sum_ + d : d;
  images_ += images.size(0);
}

Tensor AttentionDistance::mean() const {
  ATTN_CHECK(images_ > 0, "AttentionDistance: no images were added");
  return sum_ / double(images_);
}

AttentionDistance fashion_mnist_attention_distance(const models::VisionTransformer& vit, const std::string& data_dir,
                                                   int64_t count, int64_t batch) {
  ATTN_CHECK(count >= 1 && batch >= 1, "fashion_mnist_attention_distance: expected count and batch >= 1, got ", count,
             " and ", batch);
  const auto test = data::FashionMnist::load(data_dir, data::Split::test);
  const auto [mean, std] = data::dataset_normalization("fashion-mnist");
  const int64_t n = std::min(count, test.size());
  const Tensor all = test.images_f32().slice(0, 0, n);   // (n, 1, 28, 28) in [0, 1]
  AttentionDistance d(vit);
  for (int64_t first = 0; first < n; first += batch)
    d.add((all.slice(0, first, std::min(n, first + batch)).contiguous() - double(mean[0])) / double(std[0]));
  return d;
}

}  // namespace attn::viz

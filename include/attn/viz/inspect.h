// What a Vision Transformer learned, measured as the ViT paper inspects its models (Dosovitskiy et al.,
// 2021, section 4.5 and figure 7): how similar the position embeddings of the patches are, and how
// far across the image each head's attention reaches at each depth.
//
//   Tensor s = viz::pos_embed_similarity(vit);                    // (N, N) f64, cosine similarity
//   data::write_png("pos.png", viz::render_pos_embed_similarity(s, vit.grid()));
//   Tensor maps = vit.attention_maps(images);                       // (L, B, NH, T, T)
//   Tensor d = viz::mean_attention_distance(maps, vit.num_prefix_tokens(), vit.grid(), 16);   // (L, NH) px
//   Tensor f = viz::fashion_mnist_attention_distance(vit, dir, 256, 64).mean();   // over 256 test images
//
// Position-embedding similarity: entry (i, j) is the cosine similarity of patch i's and patch j's
// position embeddings (the prefix tokens' rows left out), as the paper's figure 7 (centre) draws it:
// one tile per patch, laid out as the patches are, each tile showing that patch's similarity to every
// patch. A model that learned the image's 2-D structure shows a bright spot at the tile's own place,
// and rows and columns lit alike.
//
// Mean attention distance (figure 7, right): for a head and a query patch i, sum over the key patches
// j of A[i, j] * d(i, j), where d is the distance between the two patches' centres in pixels (patch
// size x their distance on the grid); averaged over the query patches and the images. A is the
// attention row as the model computes it (softmax over every token): the weight on the class /
// distillation tokens counts as distance 0 and the row is not renormalised, as in the published
// probing code for ViT. Lower layers of ImageNet ViTs mix short and long distances, upper layers
// attend globally.
#pragma once
#include <cstdint>
#include <string>

#include "attn/core/tensor.h"
#include "attn/models/vit.h"

namespace attn::viz {

// (N, N) f64; throws attn::Error when the model has no position embedding (pos_embed "none").
Tensor pos_embed_similarity(const models::VisionTransformer& vit);
// The cosine similarity of the rows of (N, D) embeddings: (N, N) f64.
Tensor cosine_similarity_rows(const Tensor& emb);

// similarity: (grid^2, grid^2) in [-1, 1] -> u8 (H, W, 3): grid x grid tiles of grid x grid cells of
// `cell` pixels, `gap` pixels of white between tiles, viridis colours from -1 (dark) to 1 (yellow).
// cell 0 picks max(2, 48 / grid).
Tensor render_pos_embed_similarity(const Tensor& similarity, int64_t grid, int64_t cell = 0, int64_t gap = 0);

// maps: (L, B, NH, T, T) attention weights with T = num_prefix + grid^2 -> (L, NH) f64 pixels,
// averaged over the B images and the grid^2 query patches.
Tensor mean_attention_distance(const Tensor& maps, int64_t num_prefix, int64_t grid, int64_t patch_size);

// The mean attention distance of `vit` (in eval mode) over many images, a batch at a time: add() each
// (B, C, H, W) batch of model-ready images, mean() the (L, NH) pixels averaged over every image added.
//   viz::AttentionDistance d(vit);  d.add(batch1);  d.add(batch2);  Tensor m = d.mean();
class AttentionDistance {
 public:
  explicit AttentionDistance(const models::VisionTransformer& vit) : vit_(&vit) {}
  void add(const Tensor& images);
  Tensor mean() const;   // throws attn::Error when no image was added
  int64_t images() const { return images_; }

 private:
  const models::VisionTransformer* vit_;
  Tensor sum_;
  int64_t images_ = 0;
};
// The first `count` Fashion-MNIST test images in `data_dir`, normalized as in training, `batch` at a time.
AttentionDistance fashion_mnist_attention_distance(const models::VisionTransformer& vit, const std::string& data_dir,
                                                   int64_t count, int64_t batch);

}  // namespace attn::viz

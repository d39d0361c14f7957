// Vision Transformer (Dosovitskiy et al. 2021) and DeiT (Touvron et al. 2021), with timm's
// parameter names so timm checkpoints map 1:1.
//
//   auto vit = models::create_model("vit_tiny_patch16_224");
//   auto m = std::make_shared<models::VisionTransformer>(models::VitConfig{.image_size = 28, .patch_size = 4,
//                                                                         .in_channels = 1, .num_classes = 10,
//                                                                         .dim = 192, .depth = 6, .heads = 3});
//   Tensor logits = m->forward(images);               // (B, classes); DeiT: mean of both heads' logits
//   m->set_distilled_output(models::DistilledOutput::softmax_sum);   // DeiT: softmax(cls) + softmax(dist)
//   auto [cls, dist] = m->forward_heads(images);      // DeiT: the two heads apart (training)
//   Tensor maps = m->attention_maps(images);          // (depth, B, NH, N, N), for rollout
//   m->set_inference_chunk(32);                       // no-grad eval: the batch in slices of 32 images
//
// Forward, as the notes give it: image -> P x P patches -> linear embedding (a conv with
// kernel = stride = P) -> prepend [class] (and DeiT's distillation) token -> + position
// embedding -> dropout -> L pre-norm blocks
//     x = x + drop_path(attn(norm1(x)));  x = x + drop_path(mlp(norm2(x)))
// -> LayerNorm -> class token (or the mean of the patch tokens) -> [pre-logits Linear + tanh] -> head.
// Names: patch_embed.proj, cls_token, dist_token, pos_embed, blocks.N.{norm1, attn.qkv, attn.proj,
// norm2, mlp.fc1, mlp.fc2}, norm, pre_logits.fc, head, head_dist.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attn/models/distilled.h"
#include "attn/models/registry.h"
#include "attn/nn/attention/multi_head.h"
#include "attn/nn/attention/relative_bias.h"
#include "attn/nn/conv.h"
#include "attn/nn/drop_path.h"
#include "attn/nn/dropout.h"
#include "attn/nn/layer_norm.h"
#include "attn/nn/linear.h"
#include "attn/nn/mlp.h"
#include "attn/nn/pos_embed.h"
#include "attn/nn/sequential.h"

namespace attn::models {

struct VitConfig {
  int64_t image_size = 224, patch_size = 16, in_channels = 3, num_classes = 1000;
  int64_t dim = 768, depth = 12, heads = 12;
  double mlp_ratio = 4.0;
  bool qkv_bias = true;
  double drop = 0.0, attn_drop = 0.0, drop_path = 0.0;   // drop_path: the last block's rate (linear in depth)
  std::string pos_embed = "learned";    // learned | learned2d | sincos2d | relative | none
                                        // (relative: BEiT's per-block 2-d bias on the logits, no embedding)
  std::string global_pool = "token";    // token | avg
  int64_t representation_size = 0;      // > 0: pre-logits Linear + tanh of this size
  bool distilled = false;               // DeiT: distillation token + head_dist
  double eps = 1e-6;
  std::vector<int64_t> hybrid_channels; // non-empty: tokens from a CNN stem (3x3 convs, stride 2 each)
  // Ablations (defaults: timm's ViT). Absent from a config: the default.
  int64_t head_dim = 0;                 // each head's width; 0: dim / heads
  bool share_qk = false;                // one projection for queries and keys (nn::SelfAttentionOptions)
  std::string attn_scale = "inv_sqrt_head_dim";   // inv_sqrt_head_dim | none (logits unscaled)
  std::string norm = "layer";           // layer | batch (BatchNorm over the (B x T) tokens of each channel)
  bool norm_first = true;               // pre-norm (timm); false: post-norm, x = norm(x + f(x)), no final norm
};

// Every key required, each checked (attn/core/json_config.h); "model" is allowed.
VitConfig vit_config_from_json(const nlohmann::json& j);
nlohmann::json vit_config_to_json(const VitConfig& c);

// DeiT's DistilledOutput and combine_distilled_heads: attn/models/distilled.h.

class VitBlock : public nn::Module {
 public:
  // grid: the patch grid's side (pos_embed "relative" needs it for its bias table).
  VitBlock(const VitConfig& c, double drop_path, int64_t grid = 0);
  Tensor forward(const Tensor& x) const;
  // forward with the residual adds deferred into the next LayerNorm: given the stream x and the previous
  // block's unadded MLP branch `pending` (undefined for the first block), returns this block's stream and
  // its own unadded MLP branch; forward(x) == sum of forward_fused(x, {}). VisionTransformer runs this form.
  std::pair<Tensor, Tensor> forward_fused(const Tensor& x, const Tensor& pending) const;
  // Also returns this block's attention weights (B, NH, N, N) (the materialising path).
  Tensor forward_with_attention(const Tensor& x, Tensor& weights) const;

  std::shared_ptr<nn::LayerNorm> norm1, norm2;   // null with norm "batch":
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;      // then these, under the same names ("norm1", "norm2")
  std::shared_ptr<nn::SelfAttention> attn;
  std::shared_ptr<nn::DropPath> drop_path;
  std::shared_ptr<nn::MLP> mlp;
  std::shared_ptr<nn::RelativePositionBias2D> rel_pos;   // pos_embed "relative" only

 private:
  Tensor attention_bias() const;   // rel_pos's (NH, T, T) bias, or undefined
  Tensor norm(int which, const Tensor& x) const;   // norm1 / norm2, LayerNorm or BatchNorm
  // The block's output from its input x and its attention branch's output (before drop-path): the
  // residual adds, the MLP and the norms, pre- or post-norm.
  Tensor after_attention(const Tensor& x, const Tensor& attn_out) const;
  bool norm_first_ = true;
};

class VisionTransformer : public ImageClassifier, public DistilledHeads {
 public:
  // `name`: the registry name config() reports (the entry that rebuilds this model).
  explicit VisionTransformer(const VitConfig& c, std::string name = "vit");
  // DeiT: the two heads combined as distilled_output() says (default: the mean of the logits), in
  // training and in eval alike; train on forward_heads() instead.
  Tensor forward(const Tensor& images) override;
  nlohmann::json config() const override;
  int64_t macs_per_image() const override;

  // Tokens after the final norm: (B, prefix + N, D).
  Tensor forward_features(const Tensor& images) const;
  // Class-token (or pooled) logits, and for DeiT the distillation head's logits (undefined otherwise).
  std::pair<Tensor, Tensor> forward_heads(const Tensor& images) const override;
  std::pair<Tensor, Tensor> forward_head(const Tensor& features) const;
  // Every block's attention weights: (depth, B, NH, T, T).
  Tensor attention_maps(const Tensor& images) const;

  // DeiT: what forward() returns (see DistilledOutput); ignored without a distillation token.
  void set_distilled_output(DistilledOutput how) { distilled_output_ = how; }
  DistilledOutput distilled_output() const override { return distilled_output_; }
  bool has_distillation_head() const override { return cfg_.distilled; }

  const VitConfig& cfg() const { return cfg_; }
  int64_t num_prefix_tokens() const { return 1 + (cfg_.distilled ? 1 : 0); }
  int64_t grid() const;   // patches per side
  // The position embeddings of the patch tokens, (N, D) in raster order (the prefix tokens' rows
  // left out), detached; undefined with pos_embed "none".
  Tensor patch_position_embeddings() const;
  // Images per slice of a no-grad eval forward (0: the batch whole); see forward_heads. By default
  // (kAutoChunk) from the layer sizes: small models only (a layer's weights <= 4 MiB, slices of >= 8
  // images), about 2 MiB of the widest activation per thread.
  int64_t inference_chunk() const;
  // Sets inference_chunk(): n > 0 slices of n images, 0 the batch whole, kAutoChunk from the layer
  // sizes. The default, taken when the model is built: ATTN_VIT_CHUNK if set (docs/environment.md),
  // else kAutoChunk. Slicing changes no result beyond the GEMMs' rounding at another batch size.
  static constexpr int64_t kAutoChunk = -1;
  void set_inference_chunk(int64_t n);
  int64_t inference_chunk_setting() const { return chunk_setting_; }   // n, 0 or kAutoChunk

 private:
  Tensor embed(const Tensor& images) const;   // (B, T, D), tokens + positions, after pos_drop
  VitConfig cfg_;
  DistilledOutput distilled_output_ = DistilledOutput::mean_logits;
  int64_t chunk_setting_ = kAutoChunk;   // set_inference_chunk; from ATTN_VIT_CHUNK when built
  std::shared_ptr<nn::Module> patch_embed_;   // "patch_embed" with "proj" (and "stem" for hybrids)
  Tensor* cls_token_ = nullptr;
  Tensor* dist_token_ = nullptr;
  Tensor* pos_embed_ = nullptr;
  Tensor* pos_prefix_ = nullptr;                    // learned2d: the prefix tokens' positions
  std::shared_ptr<nn::PosEmbed> pos_2d_;            // learned2d: row + column embeddings
  std::string model_name_;
  std::shared_ptr<nn::Dropout> pos_drop_;
  std::shared_ptr<nn::ModuleList<VitBlock>> blocks_;
  std::shared_ptr<nn::LayerNorm> norm_;      // pre-norm with LayerNorm; null otherwise
  std::shared_ptr<nn::BatchNorm2d> bn_;      // pre-norm with BatchNorm ("norm"); post-norm has no final norm
  std::shared_ptr<nn::Linear> pre_logits_;
  std::shared_ptr<nn::Linear> head_, head_dist_;
};

}  // namespace attn::models

// Swin Transformer V1 (Liu et al. 2021) and V2 (Liu et al. 2022) as torchvision 0.14's
// SwinTransformer, with its parameter names, so torchvision's swin_t / swin_s / swin_b /
// swin_v2_t / swin_v2_s / swin_v2_b state dicts load 1:1; timm's (>= 0.9) and Hugging Face's V1
// weights load renamed (attn/models/name_maps.h), each run in its source's input-size convention
// (SwinConfig::convention).
//
//   auto m = models::create_model("swin_t");          // 28,288,354 parameters, any H, W >= 4
//   Tensor logits = m->forward(images);                // (B, 3, H, W) -> (B, 1000)
//
// Forward: patch embedding (features.0: conv P x P stride P -> (B, H/P, W/P, C) -> LayerNorm) ->
// stages features.1, .3, .5, .7 of SwinTransformerBlocks (shift 0 on even blocks, window / 2 on odd
// ones), with PatchMerging (features.2, .4, .6) between them -> norm -> mean over H, W -> head.
//   V1 block: x = x + drop_path(attn(norm1(x)));  x = x + drop_path(mlp(norm2(x)))
//   V2 block: x = x + drop_path(norm1(attn(x)));  x = x + drop_path(norm2(mlp(x)))
//   PatchMerging: pad H, W to even, concat [x(0::2, 0::2), x(1::2, 0::2), x(0::2, 1::2), x(1::2, 1::2)]
//   (4C) -> V1: LayerNorm(4C) -> reduction Linear(4C, 2C, no bias);  V2: reduction -> LayerNorm(2C).
// MLP: mlp.0 Linear(C, 4C), GELU (erf), mlp.3 Linear(4C, C). Stochastic depth grows linearly from 0 at
// the first block to drop_path at the last. Attention: nn::ShiftedWindowAttention.
// Init as torchvision: Linear weights trunc_normal .02, biases zero; LayerNorm 1 / 0; conv PyTorch's.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attn/models/distilled.h"
#include "attn/models/registry.h"
#include "attn/nn/attention/window.h"
#include "attn/nn/conv.h"
#include "attn/nn/drop_path.h"
#include "attn/nn/layer_norm.h"
#include "attn/nn/linear.h"
#include "attn/nn/sequential.h"

namespace attn::models {

struct SwinConfig {
  int64_t image_size = 224, patch_size = 4, in_channels = 3, num_classes = 1000;
  int64_t embed_dim = 96;
  std::vector<int64_t> depths = {2, 2, 6, 2};
  std::vector<int64_t> heads = {3, 6, 12, 24};
  int64_t window_size = 7;
  double mlp_ratio = 4.0;
  double drop = 0.0, attn_drop = 0.0, drop_path = 0.2;   // drop_path: the last block's rate
  int64_t version = 1;                                   // 1 | 2
  // V2: per stage, the window its position-bias MLP was trained at (timm's and transformers'
  // pretrained_window_sizes, e.g. [12, 12, 12, 6] for weights fine-tuned from 192 to 256); 0 or an
  // empty list: the stage's own window. Optional in JSON (default empty).
  std::vector<int64_t> pretrained_window_sizes;
  // How inputs of any size run (optional in JSON; load_pretrained sets the weights' source):
  //   "torchvision"  the patch conv floors H / P; each block pads its map to window multiples and
  //                  drops the shift along a side the window covers whole; merging pads odd sides.
  //   "hf"           transformers: the image padded (zeros, right / bottom) to multiples of P; a
  //                  block whose map has min(H, W) <= window has no shift at all; a map smaller than
  //                  the window is an error (transformers shrinks the window but keeps the window's
  //                  bias, which then fails to broadcast).
  //   "timm"         timm's strict mode: H and W multiples of P, each stage's map even (before a
  //                  merging) and a multiple of the window or no larger than it (as timm built at that
  //                  size runs them); other sizes an error.
  //   "timm_dynamic" timm built at image_size with strict_img_size=False (dynamic mask): H and W
  //                  multiples of P; each block's shift fixed by its stage's map at image_size (none
  //                  where that map is no larger than the window; a smaller one is an error, timm
  //                  would shrink the window); blocks roll, then pad (ShiftedWindowAttentionOptions::
  //                  roll_before_pad).
  // V2 under hf, timm and timm_dynamic: as both build it, a stage whose map at image_size is smaller
  // than the window gets a window of that map's size (its bias from the MLP over that window's
  // coordinates) and no shift; a stage whose map equals the window, no shift. hf (transformers'
  // Swinv2Layer) and timm_dynamic then keep those windows and shifts at every input size (hf: pad, then
  // roll, its shift mask added twice); timm (strict) takes the sizes at which timm built at that size
  // has the same windows: each stage's map a multiple of its window, or the shrunk window itself.
  std::string convention = "torchvision";
  // DeiT's distillation head (optional in JSON, default false): head_dist, a second Linear on the same
  // pooled features as head (DeiT's head-only variant; Swin's windows leave no place for a
  // distillation token). forward() combines the two as distilled_output() says (attn/models/distilled.h).
  bool distilled = false;
};

// Limits on a config (a larger one is refused before anything is built; published Swin models are
// far below them): stages, blocks in all, the widest stage's width, window, patch, image side,
// channels, classes, mlp_ratio; and the model's size: 2^33 elements in its parameters and buffers
// (SwinV2-G has 3e9), 2^53 multiply-accumulates per image at image_size (so that every count stays
// exact in int64).
struct SwinLimits {
  static constexpr int64_t stages = 8, blocks = 256, width = 1 << 16, window = 64, patch = 1024;
  static constexpr int64_t image = 1 << 16, channels = 4096, classes = 1 << 20;
  static constexpr double mlp_ratio = 64.0, elements = 8589934592.0, macs = 9007199254740992.0;
};
// Every check SwinTransformer's constructor makes (an attn::Error naming the key), without building.
void check_swin_config(const SwinConfig& c);
// The window of stage i (0-based): the config's, or V2's shrunk one (see convention).
int64_t swin_stage_window(const SwinConfig& c, size_t stage);

// Every key required, each checked (attn/core/json_config.h); "model" is allowed.
SwinConfig swin_config_from_json(const nlohmann::json& j);
nlohmann::json swin_config_to_json(const SwinConfig& c);

// One block's attention probabilities with the geometry they were computed in (explain draws them).
struct SwinBlockAttention {
  Tensor probs;                      // (B, nW, NH, N, N), N = window^2: the windows of the map padded at
                                     // the end to window multiples and rolled by -shift (roll_before_pad:
                                     // rolled, then padded), raster order; rows sum to 1
  int64_t height = 0, width = 0;     // the block's map before padding
  int64_t window = 0;
  int64_t shift_h = 0, shift_w = 0;  // the shift the block ran (0: none)
  bool roll_before_pad = false;
};

class SwinBlock : public nn::Module {
 public:
  // window: the stage's (swin_stage_window); pretrained: V2's pretrained window (0: none).
  SwinBlock(const SwinConfig& c, int64_t dim, int64_t heads, int64_t window, int64_t shift, int64_t pretrained,
            double drop_path);
  // (B, H, W, C) -> (B, H, W, C); weights: also the attention probabilities (B nW, NH, N, N)
  // (nn::ShiftedWindowAttention::forward).
  Tensor forward(const Tensor& x, Tensor* weights = nullptr) const;
  // Inference (no grad, eval mode, f32 x, V1, a map of whole windows in torchvision's order): the block
  // on x + pending (pending undefined: x) as {s, m}, s + m being forward(x + pending). The residual add
  // is left to the next block's first layer norm, the windows' gather and scatter to the layer norms
  // (ops/fused.h: layer_norm_rows, add_layer_norm_rows). Empty tensors where it does not apply.
  std::pair<Tensor, Tensor> forward_fused(const Tensor& x, const Tensor& pending) const;
  // The shift the block runs an h x w map with ((0, 0): none).
  std::pair<int64_t, int64_t> effective_shift(int64_t h, int64_t w) const;
  int64_t macs(int64_t h, int64_t w) const;

  std::shared_ptr<nn::LayerNorm> norm1, norm2;
  std::shared_ptr<nn::ShiftedWindowAttention> attn;
  std::shared_ptr<nn::DropPath> drop_path;
  std::shared_ptr<nn::Sequential> mlp;

 private:
  // The MLP; at inference (no grad, eval mode) over slices of rows, so that its 4C-wide hidden
  // activations never exist for the whole map at once.
  Tensor mlp_forward(const Tensor& x) const;
  Tensor mlp_apply(const Tensor& x) const;
  // Whether the block shifts an h x w map (false: Hugging Face's rule for a map the window covers);
  // checks the map is one transformers' Swin can run.
  bool shifts(int64_t h, int64_t w) const;
  bool v2_, hf_;
};

class PatchMerging : public nn::Module {
 public:
  PatchMerging(int64_t dim, bool v2);
  Tensor forward(const Tensor& x) const;   // (B, H, W, C) -> (B, ceil(H/2), ceil(W/2), 2C)

  std::shared_ptr<nn::Linear> reduction;
  std::shared_ptr<nn::LayerNorm> norm;

 private:
  bool v2_;
};

class SwinTransformer : public ImageClassifier, public DistilledHeads {
 public:
  explicit SwinTransformer(const SwinConfig& c, std::string name = "swin");
  // (B, C, H, W), H, W >= patch -> (B, classes). Inference (no grad, eval mode) runs the batch in
  // slices of inference_chunk(images) images, so that a large batch's activations never exist all at
  // once (swin_t at batch 8: peak RSS as at batch 2); the logits are the same up to the GEMMs'
  // rounding at another batch size.
  Tensor forward(const Tensor& images) override;
  // Images per inference slice: set_inference_chunk's n, or by default as many as give about 8,192
  // first-stage tokens (swin_t at 224: 2; a 28 x 28 Fashion-MNIST Swin: 41); 0: the batch whole.
  int64_t inference_chunk(const Tensor& images) const;
  void set_inference_chunk(int64_t n);   // n > 0 images, 0 the batch whole, -1 the default
  // The class head's and (distilled) the distillation head's logits; dist undefined otherwise.
  std::pair<Tensor, Tensor> forward_heads(const Tensor& images) const override;
  bool has_distillation_head() const override { return cfg_.distilled; }
  DistilledOutput distilled_output() const override { return distilled_output_; }
  void set_distilled_output(DistilledOutput how) { distilled_output_ = how; }
  // The attention probabilities of block `block` of stage `stage` (0-based) for `images`, no grad,
  // and their geometry. Runs the model up to that block.
  SwinBlockAttention attention_of(const Tensor& images, int64_t stage, int64_t block) const;
  int64_t num_stages() const { return int64_t(stages_.size()); }
  // After the final norm: (B, H', W', C_last) (as timm's forward_features).
  Tensor forward_features(const Tensor& images) const;
  // The multi-scale backbone: each stage's output after its blocks (before the next merging), as
  // torchvision's features[1], [3], [5], [7] and timm's forward_intermediates (norm=False):
  // strides P, 2P, 4P, 8P; (B, C_i, H_i, W_i) when nchw, else (B, H_i, W_i, C_i).
  //   auto maps = swin->forward_intermediates(images);          // swin_t, 224: 96x56x56 ... 768x7x7
  //   Tensor c5 = maps.back();                                  // (B, 768, 7, 7), no final norm
  std::vector<Tensor> forward_intermediates(const Tensor& images, bool nchw = true) const;
  nlohmann::json config() const override;
  // At image_size x image_size.
  int64_t macs_per_image() const override;
  // macs_per_image split: "patch_embed", "stage1" ... (stage i >= 2 with the merging that starts it,
  // as timm's layers.i.downsample), "head"; the parts sum to macs_per_image. (attn info prints them.)
  std::vector<std::pair<std::string, int64_t>> macs_per_stage() const;
  const SwinConfig& cfg() const { return cfg_; }

 private:
  // The images checked (and padded for "hf"), through the patch embedding: (B, H/P, W/P, C).
  Tensor embed(const Tensor& images) const;
  SwinConfig cfg_;
  DistilledOutput distilled_output_ = DistilledOutput::mean_logits;
  int64_t chunk_setting_ = -1;
  std::string model_name_;
  std::shared_ptr<nn::Conv2d> patch_conv_;
  std::shared_ptr<nn::LayerNorm> patch_norm_;
  std::vector<std::shared_ptr<nn::ModuleList<SwinBlock>>> stages_;
  std::vector<std::shared_ptr<PatchMerging>> merges_;
  std::shared_ptr<nn::LayerNorm> norm_;
  std::shared_ptr<nn::Linear> head_, head_dist_;
};

}  // namespace attn::models

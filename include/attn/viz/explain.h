// Seeing what a Vision Transformer looks at: attention rollout (Abnar & Zuidema 2020) and the last
// layer's class-token attention, drawn as heat maps over the image the model sees.
//
//   Tensor maps = vit.attention_maps(x);                       // (L, B, NH, T, T)
//   Tensor r = viz::attention_rollout(maps);                   // (B, T, T)
//   Tensor cls = viz::cls_rollout(maps, vit.num_prefix_tokens());   // (B, N): class row, patch columns
//   auto p = viz::prepare_image("cat.jpg", pretrained.preprocess);   // models::load_pretrained's transform
//   auto q = viz::prepare_image("shoe.png", 28, 1, {0.2860f}, {0.3530f});   // q.input: (1, 1, 28, 28)
//   viz::Explanation e = viz::explain(vit, p);                 // e.panel: u8 (S, 3 S, 3)
//   data::write_png("map.png", e.panel);
//
// Rollout: per layer, fuse the heads (mean by default; max / min as in jacobgil's vit-explain),
// A' = A + I, rows renormalised to sum 1; R = A'_L ... A'_2 A'_1 (computed in f64). The class
// token's row of R over the patch tokens (columns num_prefix..T) is the rollout map. The
// "last-layer CLS attention" is the head-mean of the last layer's class-token row over the patches.
#pragma once
#include <string>
#include <vector>

#include "attn/core/tensor.h"
#include "attn/data/preprocess.h"
#include "attn/models/vit.h"

namespace attn::viz {

enum class HeadFusion { mean, max, min };
HeadFusion parse_head_fusion(const std::string& name);   // "mean" | "max" | "min"

// maps: (L, B, NH, T, T) f32/f64 -> (B, T, T) of maps' dtype.
Tensor attention_rollout(const Tensor& maps, HeadFusion fusion = HeadFusion::mean);
// (B, T - num_prefix): the class token's row of the rollout over the patch tokens.
Tensor cls_rollout(const Tensor& maps, int64_t num_prefix, HeadFusion fusion = HeadFusion::mean);
// (B, T - num_prefix): the last layer's class-token attention over the patches, heads averaged.
Tensor last_layer_cls_attention(const Tensor& maps, int64_t num_prefix);

// An image loaded as a model expects it, through an eval transform (data/preprocess.h: resize, center
// crop, normalise; models::load_pretrained gives the model's): `image` is the crop the model sees,
// `input` equals data::preprocess_file(path, pre) with a batch dimension.
struct PreparedImage {
  Tensor image;   // u8 (S, S, C): decoded, converted to C channels, resized and cropped to S x S
  Tensor input;   // f32 (1, C, S, S): image / 255, normalised with mean / std
};
PreparedImage prepare_image(const std::string& path, const data::Preprocess& pre);
// The same as attn trains: resized (PIL bilinear) to image_size x image_size whatever the aspect ratio.
PreparedImage prepare_image(const std::string& path, int64_t image_size, int64_t channels,
                            const std::vector<float>& mean, const std::vector<float>& std);

// Heat-map drawing. colorize: a (H, W) map scaled by its min/max to [0, 1] -> u8 (H, W, 3) through
// the "jet" colormap. overlay: (1 - alpha) image + alpha colorize(map), the map resized (bilinear)
// to the image; image u8 (H, W, 1 or 3).
Tensor colorize(const Tensor& map);
Tensor overlay_heatmap(const Tensor& image, const Tensor& map, double alpha = 0.5);

// The image u8 (S, W, C) as RGB, upscaled (nearest) by the smallest integer factor that makes its
// longer side at least min_panel pixels.
Tensor upscaled_panel(const Tensor& image, int64_t min_panel);
// u8 (H, W, 3) panels of one shape, left to right: u8 (H, n W, 3).
Tensor side_by_side(const std::vector<Tensor>& panels);

struct Explanation {
  Tensor rollout;        // (grid, grid) f32: the class token's rollout over the patches
  Tensor last_cls;       // (grid, grid) f32: the last layer's class-token attention
  Tensor panel;          // u8 (S', 3 S', 3): image | rollout overlay | last-layer overlay
};
// Runs vit.attention_maps on p.input; each panel is the image upscaled (nearest) to at least
// `min_panel` pixels per side (an integer factor).
Explanation explain(const models::VisionTransformer& vit, const PreparedImage& p, HeadFusion fusion = HeadFusion::mean,
                    int64_t min_panel = 224, double alpha = 0.5);

}  // namespace attn::viz

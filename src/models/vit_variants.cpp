// The named ViT / DeiT variants (timm's names), and small configs for 28x28 Fashion-MNIST.
#include "attn/models/vit.h"

namespace attn::models {

namespace {

struct Variant {
  const char* name;
  const char* description;
  VitConfig cfg;
};

VitConfig imagenet(int64_t patch, int64_t dim, int64_t depth, int64_t heads, bool distilled = false) {
  VitConfig c;
  c.patch_size = patch; c.dim = dim; c.depth = depth; c.heads = heads; c.distilled = distilled;
  return c;
}

VitConfig fmnist(int64_t patch, int64_t dim, int64_t depth, int64_t heads, bool distilled = false) {
  VitConfig c;
  c.image_size = 28; c.in_channels = 1; c.num_classes = 10;
  c.patch_size = patch; c.dim = dim; c.depth = depth; c.heads = heads; c.distilled = distilled;
  c.drop_path = 0.1;
  return c;
}

// The 2-hour-budget ViT: patch 4 (49 tokens) like vit_fmnist, at about a third of its FLOPs per image
// (D 128, MLP 256), so the budget holds ~36 epochs instead of ~16.
VitConfig fmnist_small(bool distilled) {
  VitConfig c = fmnist(4, 128, 6, 4, distilled);
  c.mlp_ratio = 2.0;
  return c;
}

std::vector<Variant> variants() {
  VitConfig hybrid = fmnist(1, 192, 6, 3);
  hybrid.hybrid_channels = {32, 64};   // 28 -> 14 -> 7: 49 tokens from the CNN's feature map
  return {
      {"vit_tiny_patch16_224", "ViT-Ti/16 (timm), 5.7M params", imagenet(16, 192, 12, 3)},
      {"vit_small_patch16_224", "ViT-S/16 (timm), 22M params", imagenet(16, 384, 12, 6)},
      {"vit_base_patch16_224", "ViT-B/16, 86.6M params (torchvision vit_b_16)", imagenet(16, 768, 12, 12)},
      {"vit_base_patch32_224", "ViT-B/32, 88.2M params (torchvision vit_b_32)", imagenet(32, 768, 12, 12)},
      {"vit_large_patch16_224", "ViT-L/16, 304.3M params (torchvision vit_l_16)", imagenet(16, 1024, 24, 16)},
      {"vit_huge_patch14_224", "ViT-H/14, 632.0M params (torchvision vit_h_14)", imagenet(14, 1280, 32, 16)},
      {"deit_tiny_patch16_224", "DeiT-Ti, 5.7M params", imagenet(16, 192, 12, 3)},
      {"deit_small_patch16_224", "DeiT-S, 22M params", imagenet(16, 384, 12, 6)},
      {"deit_base_patch16_224", "DeiT-B, 86.6M params", imagenet(16, 768, 12, 12)},
      {"deit_tiny_distilled_patch16_224", "DeiT-Ti with distillation token", imagenet(16, 192, 12, 3, true)},
      {"deit_small_distilled_patch16_224", "DeiT-S with distillation token", imagenet(16, 384, 12, 6, true)},
      {"deit_base_distilled_patch16_224", "DeiT-B with distillation token", imagenet(16, 768, 12, 12, true)},
      {"vit_fmnist", "small ViT for 28x28 Fashion-MNIST: patch 4, D 192, depth 6, heads 3", fmnist(4, 192, 6, 3)},
      {"deit_fmnist_distilled", "the same with DeiT's distillation token", fmnist(4, 192, 6, 3, true)},
      {"vit_fmnist_small", "ViT sized for the 2-hour budget: patch 4, D 128, depth 6, heads 4, MLP 256",
       fmnist_small(false)},
      {"deit_fmnist_small_distilled", "vit_fmnist_small with DeiT's distillation token", fmnist_small(true)},
      {"vit_fmnist_demo", "the README demo's ViT: patch 7 (16 tokens), D 128, depth 4, heads 4, MLP 256",
       [] {
         VitConfig c = fmnist(7, 128, 4, 4);
         c.mlp_ratio = 2.0;
         c.drop_path = 0.0;
         return c;
       }()},
      {"vit_hybrid_fmnist", "hybrid ViT: tokens from a 2-conv CNN stem (7x7 map), D 192, depth 6", hybrid},
      {"vit", "a custom ViT: every config key can be set (defaults: vit_fmnist)", fmnist(4, 192, 6, 3)},
  };
}

}  // namespace

void register_vit_models() {
  for (const Variant& v : variants()) {
    const std::string name = v.name;
    register_model({name, v.description, vit_config_to_json(v.cfg), [name](const nlohmann::json& j) {
                      return std::make_shared<VisionTransformer>(vit_config_from_json(j), name);
                    }});
  }
}

}  // namespace attn::models

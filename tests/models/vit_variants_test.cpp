// The registry's timm-named ViT / DeiT variants that no other test builds (ViT-S/16, DeiT-Ti/16,
// distilled DeiT-S/16): built from their names, every parameter's name and shape and the total
// against the PyTorch models the golden script builds (tests/golden/gen/vit.py, variant_shapes:
// torchvision's VisionTransformer under timm's names, and a DeiT written from timm's
// VisionTransformerDistilled), and the configs their names promise.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "attn/attn.h"
#include "attn/models/vit.h"
#include "attn/nn/init.h"
#include "torch_ref.h"

using namespace attn;

namespace {

struct Variant {
  std::string name;
  int64_t dim, depth, heads;
  bool distilled;
};

const std::vector<Variant> kVariants = {
    {"vit_small_patch16_224", 384, 12, 6, false},
    {"deit_tiny_patch16_224", 192, 12, 3, false},
    {"deit_small_distilled_patch16_224", 384, 12, 6, true},
};

}  // namespace

TEST(VitVariants, ParametersMatchThePyTorchModels) {
  nlohmann::json specs = nlohmann::json::array();
  for (const Variant& v : kVariants)
    specs.push_back({{"name", v.name}, {"dim", v.dim}, {"depth", v.depth}, {"heads", v.heads}, {"distilled", v.distilled}});
  const test::Tensors ref = test::torch_ref("vit.variant_shapes", {}, {{"variants", specs}});
  for (const Variant& v : kVariants) {
    std::shared_ptr<models::ImageClassifier> m;
    {
      nn::init::SkipRandomInit skip;   // only the shapes matter here
      m = models::create_model(v.name);
    }
    auto* vit = dynamic_cast<models::VisionTransformer*>(m.get());
    ASSERT_NE(vit, nullptr) << v.name;
    // The config the name promises: 224 x 224 RGB, patch 16, 1000 classes.
    EXPECT_EQ(vit->cfg().image_size, 224) << v.name;
    EXPECT_EQ(vit->cfg().in_channels, 3) << v.name;
    EXPECT_EQ(vit->cfg().patch_size, 16) << v.name;
    EXPECT_EQ(vit->cfg().num_classes, 1000) << v.name;
    EXPECT_EQ(vit->cfg().dim, v.dim) << v.name;
    EXPECT_EQ(vit->cfg().depth, v.depth) << v.name;
    EXPECT_EQ(vit->cfg().heads, v.heads) << v.name;
    EXPECT_EQ(vit->num_prefix_tokens(), v.distilled ? 2 : 1) << v.name;

    // Every parameter under timm's name with PyTorch's shape, and nothing more or less.
    const std::string prefix = "shape." + v.name + ".";
    size_t want = 0;
    for (const auto& [k, t] : ref)
      if (k.rfind(prefix, 0) == 0) ++want;
    size_t found = 0;
    for (const auto& [name, p] : m->named_parameters()) {
      auto it = ref.find(prefix + name);
      if (it == ref.end()) {
        ADD_FAILURE() << v.name << ": parameter '" << name << "' is not in the PyTorch model";
        continue;
      }
      ++found;
      const std::vector<int64_t> shape = it->second.to_vector<int64_t>();
      EXPECT_EQ(p.shape(), Shape(shape.begin(), shape.end())) << v.name << ": " << name;
    }
    EXPECT_EQ(found, want) << v.name << ": parameters of the PyTorch model missing here";
    const int64_t total = int64_t(ref.at("total." + v.name).item());
    EXPECT_EQ(m->num_parameters(), total) << v.name;
    std::printf("  %-34s %lld parameters in %zu tensors (PyTorch: %lld), %.3f GMACs per image\n", v.name.c_str(),
                (long long)m->num_parameters(), found, (long long)total, double(vit->macs_per_image()) * 1e-9);
  }
}

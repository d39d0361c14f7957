// ResNet (He et al. 2016) with BasicBlocks and torchvision's parameter names (conv1, bn1,
// layer1.0.conv1, layer1.0.bn1, layer1.0.conv2, layer1.0.bn2, layer2.0.downsample.0/.1, ..., fc),
// so torchvision's resnet18 / resnet34 state dicts map 1:1. Used as the CNN teacher of DeiT
// distillation on Fashion-MNIST.
//
//   auto t = models::create_model("resnet_fmnist");            // 3x3 stem, 3 stages, 28x28x1 -> 10
//   auto r18 = models::create_model("resnet18");                // torchvision's resnet18, 11,689,512 params
//   Tensor logits = t->forward(images);                         // (B, 1, 28, 28) -> (B, 10)
//
// Forward: stem (cifar: conv3x3 s1 -> BN -> ReLU; imagenet: conv7x7 s2 -> BN -> ReLU -> max-pool
// 3x3 s2) -> stages of BasicBlocks (the first block of every stage but the first has stride 2 and
// a 1x1 conv + BN shortcut) -> global average pool -> fc.
//   BasicBlock: out = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "attn/models/registry.h"
#include "attn/nn/conv.h"
#include "attn/nn/linear.h"
#include "attn/nn/sequential.h"

namespace attn::models {

struct ResNetConfig {
  int64_t image_size = 28, in_channels = 1, num_classes = 10;
  std::string stem = "cifar";                // cifar | imagenet (see above)
  int64_t stem_channels = 32;
  std::vector<int64_t> widths = {32, 64, 128};   // channels of each stage
  std::vector<int64_t> blocks = {2, 2, 2};       // BasicBlocks per stage
};

// Every key required, each checked (attn/core/json_config.h); "model" is allowed.
ResNetConfig resnet_config_from_json(const nlohmann::json& j);
nlohmann::json resnet_config_to_json(const ResNetConfig& c);

class BasicBlock : public nn::Module {
 public:
  BasicBlock(int64_t in, int64_t out, int64_t stride);
  Tensor forward(const Tensor& x) const;   // (B, in, H, W) -> (B, out, H / stride, W / stride)
  int64_t macs(int64_t h_in) const;        // per image, for an h_in x h_in input

  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  std::shared_ptr<nn::Sequential> downsample;   // null: identity shortcut
  int64_t stride;
};

class ResNet : public ImageClassifier {
 public:
  explicit ResNet(const ResNetConfig& c, std::string name = "resnet");
  Tensor forward(const Tensor& images) override;   // (B, C, H, W) -> (B, classes)
  Tensor forward_features(const Tensor& images) const;   // pooled features (B, widths.back())
  nlohmann::json config() const override;
  int64_t macs_per_image() const override;
  const ResNetConfig& cfg() const { return cfg_; }

 private:
  ResNetConfig cfg_;
  std::string model_name_;
  std::shared_ptr<nn::Conv2d> conv1_;
  std::shared_ptr<nn::BatchNorm2d> bn1_;
  std::vector<std::shared_ptr<nn::ModuleList<BasicBlock>>> layers_;
  std::shared_ptr<nn::Linear> fc_;
};

}  // namespace attn::models

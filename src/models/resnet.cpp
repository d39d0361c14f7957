// ResNet with BasicBlocks (see include/attn/models/resnet.h) and its registry variants.
#include "attn/models/resnet.h"

#include <cmath>

#include "attn/autograd/grad_mode.h"
#include "attn/core/json_config.h"
#include "attn/core/rng.h"
#include "attn/nn/init.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/pool.h"
#include "attn/ops/reduce.h"

namespace attn::models {

ResNetConfig resnet_config_from_json(const nlohmann::json& j) {
  ConfigReader r(j, "resnet config");
  ResNetConfig c;
  c.image_size = r.get<int64_t>("image_size", Range::positive);
  c.in_channels = r.get<int64_t>("in_channels", Range::positive);
  c.num_classes = r.get<int64_t>("num_classes", Range::positive);
  c.stem = r.one_of("stem", {"cifar", "imagenet"});
  c.stem_channels = r.get<int64_t>("stem_channels", Range::positive);
  c.widths = r.get<std::vector<int64_t>>("widths", Range::positive);
  c.blocks = r.get<std::vector<int64_t>>("blocks", Range::positive);
  r.ignore("model");
  r.finish();
  return c;
}

nlohmann::json resnet_config_to_json(const ResNetConfig& c) {
  return {{"image_size", c.image_size}, {"in_channels", c.in_channels}, {"num_classes", c.num_classes},
          {"stem", c.stem}, {"stem_channels", c.stem_channels}, {"widths", c.widths}, {"blocks", c.blocks}};
}

namespace {

std::shared_ptr<nn::Conv2d> conv(int64_t in, int64_t out, int64_t k, int64_t stride) {
  auto c = std::make_shared<nn::Conv2d>(nn::Conv2dOptions{
      .in_channels = in, .out_channels = out, .kernel = k, .stride = stride, .padding = k / 2, .bias = false});
  // torchvision: kaiming_normal_(mode="fan_out", nonlinearity="relu"): N(0, sqrt(2 / (out k k))).
  NoGradGuard ng;
  nn::init::normal_(c->weight, default_generator(), 0.0, std::sqrt(2.0 / double(out * k * k)));
  return c;
}

int64_t conv_out(int64_t h, int64_t k, int64_t stride, int64_t pad) { return (h + 2 * pad - k) / stride + 1; }

}  // namespace

// ---- block ----

BasicBlock::BasicBlock(int64_t in, int64_t out, int64_t s) : stride(s) {
  conv1 = register_module("conv1", conv(in, out, 3, s));
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(out));
  conv2 = register_module("conv2", conv(out, out, 3, 1));
  bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(out));
  if (s != 1 || in != out) {
    downsample = register_module("downsample", std::make_shared<nn::Sequential>());
    downsample->push_back(conv(in, out, 1, s));
    downsample->push_back(std::make_shared<nn::BatchNorm2d>(out));
  }
}

Tensor BasicBlock::forward(const Tensor& x) const {
  Tensor h = relu(bn1->forward(conv1->forward(x)));
  h = bn2->forward(conv2->forward(h));
  return relu(h + (downsample ? downsample->forward(x) : x));
}

int64_t BasicBlock::macs(int64_t h_in) const {
  const int64_t in = conv1->options().in_channels, out = conv1->options().out_channels;
  const int64_t h = conv_out(h_in, 3, stride, 1);
  int64_t m = h * h * out * in * 9 + h * h * out * out * 9;
  if (downsample) m += h * h * out * in;
  return m;
}

// ---- model ----

ResNet::ResNet(const ResNetConfig& c, std::string name) : cfg_(c), model_name_(std::move(name)) {
  ATTN_CHECK(c.stem == "cifar" || c.stem == "imagenet", "resnet: stem must be cifar or imagenet, got '", c.stem,
             "'");
  ATTN_CHECK(!c.widths.empty() && c.widths.size() == c.blocks.size(), "resnet: expected as many widths as block ",
             "counts (at least one stage), got ", c.widths.size(), " widths and ", c.blocks.size(), " block counts");
  for (size_t i = 0; i < c.widths.size(); ++i)
    ATTN_CHECK(c.widths[i] > 0 && c.blocks[i] > 0, "resnet: stage ", i + 1, " needs a positive width and block ",
               "count, got width ", c.widths[i], " and ", c.blocks[i], " blocks");
  ATTN_CHECK(c.in_channels > 0 && c.num_classes > 0 && c.stem_channels > 0 && c.image_size > 0,
             "resnet: expected positive in_channels, num_classes, stem_channels and image_size");
  const bool imagenet = c.stem == "imagenet";
  conv1_ = register_module("conv1", imagenet ? std::make_shared<nn::Conv2d>(nn::Conv2dOptions{
                                                   .in_channels = c.in_channels, .out_channels = c.stem_channels,
                                                   .kernel = 7, .stride = 2, .padding = 3, .bias = false})
                                             : conv(c.in_channels, c.stem_channels, 3, 1));
  if (imagenet) {
    NoGradGuard ng;
    nn::init::normal_(conv1_->weight, default_generator(), 0.0, std::sqrt(2.0 / double(c.stem_channels * 49)));
  }
  bn1_ = register_module("bn1", std::make_shared<nn::BatchNorm2d>(c.stem_channels));
  int64_t ch = c.stem_channels;
  for (size_t i = 0; i < c.widths.size(); ++i) {
    auto layer = register_module("layer" + std::to_string(i + 1), std::make_shared<nn::ModuleList<BasicBlock>>());
    for (int64_t b = 0; b < c.blocks[i]; ++b) {
      layer->push_back(std::make_shared<BasicBlock>(ch, c.widths[i], (b == 0 && i > 0) ? 2 : 1));
      ch = c.widths[i];
    }
    layers_.push_back(layer);
  }
  fc_ = register_module("fc", std::make_shared<nn::Linear>(ch, c.num_classes));   // torch's default init
}

Tensor ResNet::forward_features(const Tensor& images) const {
  ATTN_CHECK(images.dim() == 4 && images.size(1) == cfg_.in_channels, "resnet: expected images (B, ",
             cfg_.in_channels, ", H, W), got shape ", images.shape());
  Tensor x = relu(bn1_->forward(conv1_->forward(images)));
  if (cfg_.stem == "imagenet") x = max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
  for (const auto& layer : layers_)
    for (const auto& b : *layer) x = b->forward(x);
  return mean(x, {2, 3});   // global average pool: (B, C)
}

Tensor ResNet::forward(const Tensor& images) { return fc_->forward(forward_features(images)); }

nlohmann::json ResNet::config() const {
  nlohmann::json j = resnet_config_to_json(cfg_);
  j["model"] = model_name_;
  return j;
}

int64_t ResNet::macs_per_image() const {
  int64_t h = cfg_.image_size, macs = 0;
  if (cfg_.stem == "imagenet") {
    h = conv_out(h, 7, 2, 3);
    macs += h * h * cfg_.stem_channels * cfg_.in_channels * 49;
    h = conv_out(h, 3, 2, 1);
  } else {
    macs += h * h * cfg_.stem_channels * cfg_.in_channels * 9;
  }
  for (const auto& layer : layers_)
    for (const auto& b : *layer) {
      macs += b->macs(h);
      h = conv_out(h, 3, b->stride, 1);
    }
  return macs + cfg_.widths.back() * cfg_.num_classes;
}

// ---- variants ----

void register_resnet_models() {
  struct Variant {
    const char* name;
    const char* description;
    ResNetConfig cfg;
  };
  ResNetConfig tiny;
  tiny.stem_channels = 16; tiny.widths = {16, 32, 64}; tiny.blocks = {1, 1, 1};
  auto imagenet = [](std::vector<int64_t> blocks) {
    ResNetConfig c;
    c.image_size = 224; c.in_channels = 3; c.num_classes = 1000; c.stem = "imagenet"; c.stem_channels = 64;
    c.widths = {64, 128, 256, 512}; c.blocks = std::move(blocks);
    return c;
  };
  const std::vector<Variant> variants = {
      {"resnet_fmnist", "ResNet for 28x28 Fashion-MNIST (the DeiT teacher): 3x3 stem, stages 32/64/128 x 2 "
                        "BasicBlocks", ResNetConfig{}},
      {"resnet_fmnist_tiny", "a smaller Fashion-MNIST ResNet: stages 16/32/64 x 1 BasicBlock", tiny},
      {"resnet18", "ResNet-18 (torchvision resnet18), 11.7M params", imagenet({2, 2, 2, 2})},
      {"resnet34", "ResNet-34 (torchvision resnet34), 21.8M params", imagenet({3, 4, 6, 3})},
  };
  for (const Variant& v : variants) {
    const std::string name = v.name;
    register_model({name, v.description, resnet_config_to_json(v.cfg), [name](const nlohmann::json& j) {
                      return std::make_shared<ResNet>(resnet_config_from_json(j), name);
                    }});
  }
}

}  // namespace attn::models

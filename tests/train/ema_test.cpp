// Model EMA against timm's ModelEmaV2 update rule computed by torch (float32, the same steps), buffers
// copied, the global generator untouched by ModelEma::of, and the mismatch errors.
#include <gtest/gtest.h>

#include "attn/attn.h"
#include "attn/train/ema.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::torch_ref;

namespace {

// A parameter in f32, one in f64, and a buffer.
struct Toy : nn::Module {
  Tensor& w = register_parameter("w", Tensor::zeros({3, 5}));
  Tensor& d = register_parameter("d", Tensor::zeros({7}, DType::f64));
  Tensor& running = register_buffer("running", Tensor::zeros({4}));
};

void perturb(nn::Module& m, Generator& g) {
  NoGradGuard ng;
  for (auto& [name, p] : m.named_parameters()) p.copy_(randn(p.shape(), g, p.dtype()));
  for (auto& [name, b] : m.named_buffers()) b.copy_(randn(b.shape(), g, b.dtype()));
}

}  // namespace

TEST(ModelEma, MatchesTimmModelEmaV2) {
  Generator g(71);
  for (double decay : {0.9, 0.9998, 0.5, 0.0, 1.0}) {
    auto model = std::make_shared<Toy>();
    perturb(*model, g);
    auto copy = std::make_shared<Toy>();
    train::ModelEma ema(copy, *model, decay);
    test::Tensors inputs;
    for (auto& [name, p] : model->named_parameters()) inputs["e." + name] = p.clone();
    const int steps = 5;
    for (int k = 0; k < steps; ++k) {
      perturb(*model, g);
      for (auto& [name, p] : model->named_parameters()) inputs["m" + std::to_string(k) + "." + name] = p.clone();
      ema.update(*model);
    }
    auto ref = torch_ref("images.ema", inputs, {{"decay", decay}, {"steps", steps}});
    for (auto& [name, p] : copy->named_parameters())
      EXPECT_TENSOR_NEAR(p, ref.at("e." + name), 0.0, 0.0) << name << " decay " << decay;
    // Buffers follow the model exactly.
    EXPECT_TENSOR_NEAR(copy->running, model->running, 0.0, 0.0);
    EXPECT_FALSE(copy->is_training());
  }
}

TEST(ModelEma, OfRegistryModelLeavesTheGlobalGeneratorAlone) {
  manual_seed(3);
  auto model = models::create_model("mlp", {{"hidden", {16}}});
  const uint64_t before = default_generator().offset();
  train::ModelEma ema = train::ModelEma::of(*model, 0.99);
  EXPECT_EQ(default_generator().offset(), before);
  EXPECT_EQ(ema.classifier()->config(), model->config());
  const auto a = ema.module().state_dict(), b = model->state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TENSOR_NEAR(a[i].second, b[i].second, 0.0, 0.0) << a[i].first;
  // The copy is independent storage: changing the model does not change it until update().
  Generator g(72);
  perturb(*model, g);
  EXPECT_FALSE(test::compare(ema.module().named_parameters()[0].second, model->named_parameters()[0].second, 0, 0).ok);
  ema.set(*model);
  EXPECT_TENSOR_NEAR(ema.module().named_parameters()[0].second, model->named_parameters()[0].second, 0.0, 0.0);
}

TEST(ModelEma, Errors) {
  auto model = models::create_model("mlp", {{"hidden", {16}}});
  auto other = models::create_model("mlp", {{"hidden", {8}}});
  EXPECT_EQ(error_of([&] { train::ModelEma(other, *model, 0.9); }),
            "model_ema: parameters 'fc1.weight' has shape [8, 784] in the EMA copy but [16, 784] in the model");
  EXPECT_EQ(error_of([&] { train::ModelEma(std::make_shared<Toy>(), *model, 0.9); }),
            "model_ema: the EMA copy has 2 parameters, the model 4");
  EXPECT_EQ(error_of([&] { train::ModelEma::of(*model, 1.5); }), "model_ema: expected decay in [0, 1], got 1.5");
  auto toy = std::make_shared<Toy>();
  EXPECT_EQ(error_of([&] { train::ModelEma(std::make_shared<Toy>(), *toy, 0.9).classifier(); }),
            "model_ema: the EMA copy is not an image classifier");
}

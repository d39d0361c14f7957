// The ViT / DeiT models against PyTorch: forward and every parameter's gradient equal to
// torchvision 0.14's VisionTransformer given the same weights (timm names mapped to torchvision's
// in tests/golden/gen/vit.py), a DeiT (distillation token) against a torch re-implementation of
// timm's VisionTransformerDistilled, gradients reaching every parameter of every Fashion-MNIST
// variant, and parameter totals / MACs of the ImageNet variants against torchvision's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "attn/attn.h"
#include "attn/models/vit.h"
#include "attn/ops/loss.h"
#include "attn/ops/reduce.h"
#include "errors.h"
#include "params.h"
#include "torch_ref.h"

using namespace attn;
using test::param_inputs;
using test::error_of;

namespace {

// Every parameter random (the heads too, NOT timm's zeros), so each weight matters: LayerNorm
// weights 1 + N(0, .1), the tokens and position embedding N(0, .5), everything else N(0, .1).
void randomize(nn::Module& m, uint64_t seed) {
  test::randomize_parameters(m, seed, [](const std::string& name) {
    return name.find("token") != std::string::npos || name.find("pos_embed") != std::string::npos ? 0.5 : 0.1;
  });
}

// logits + every gradient of sum(logits * g) against torchvision's VisionTransformer.
void check_against_torchvision(models::VisionTransformer& m, int64_t batch, uint64_t seed) {
  const auto& c = m.cfg();
  randomize(m, seed);
  m.eval();
  Generator g(seed + 1);
  Tensor x = randn({batch, c.in_channels, c.image_size, c.image_size}, g);
  Tensor gy = randn({batch, c.num_classes}, g);
  test::Tensors in = param_inputs(m);
  in["x"] = x;
  in["g"] = gy;
  auto ref = test::torch_ref("vit.torchvision_vit", in,
                             {{"image_size", c.image_size}, {"patch_size", c.patch_size}, {"num_layers", c.depth},
                              {"num_heads", c.heads}, {"hidden_dim", c.dim},
                              {"mlp_dim", int64_t(double(c.dim) * c.mlp_ratio)}, {"num_classes", c.num_classes},
                              {"in_channels", c.in_channels}});
  Tensor xr = x.clone();
  xr.requires_grad_();
  Tensor logits = m.forward(xr);
  EXPECT_TENSOR_NEAR(logits, ref.at("logits"), 2e-5, 1e-4);
  sum(logits * gy).backward();
  EXPECT_TENSOR_NEAR(xr.grad(), ref.at("dx"), 2e-5, 1e-3) << "d images";
  int64_t checked = 0;
  for (auto& [n, p] : m.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << n;
    EXPECT_TENSOR_NEAR(p.grad(), ref.at("g." + n), 5e-5, 1e-3) << "grad " << n;
    ++checked;
  }
  EXPECT_EQ(checked, 4 + 12 * c.depth + 4);   // proj w/b, cls, pos; 12 per block; norm w/b, head w/b
}

}  // namespace

TEST(VitTorchvision, SmallConfigForwardAndGradients) {
  manual_seed(1);
  models::VisionTransformer m({.image_size = 32, .patch_size = 8, .in_channels = 3, .num_classes = 10, .dim = 64,
                               .depth = 2, .heads = 4});
  check_against_torchvision(m, 3, 11);
}

TEST(VitTorchvision, FashionMnistConfigForwardAndGradients) {
  manual_seed(2);
  auto base = models::create_model("vit_fmnist");   // patch 4, D 192, depth 6, heads 3, 1 channel
  auto& m = dynamic_cast<models::VisionTransformer&>(*base);
  ASSERT_EQ(m.cfg().image_size, 28);
  ASSERT_EQ(m.cfg().in_channels, 1);
  check_against_torchvision(m, 2, 22);
}

TEST(Deit, DistilledMatchesTimmSemantics) {
  manual_seed(3);
  models::VitConfig c{.image_size = 28, .patch_size = 7, .in_channels = 1, .num_classes = 10, .dim = 48,
                      .depth = 2, .heads = 3, .distilled = true};
  models::VisionTransformer m(c);
  ASSERT_EQ(m.num_prefix_tokens(), 2);
  randomize(m, 33);
  m.eval();
  Generator g(34);
  const int64_t B = 3;
  Tensor x = randn({B, 1, 28, 28}, g), g1 = randn({B, 10}, g), g2 = randn({B, 10}, g);
  test::Tensors in = param_inputs(m);
  in["x"] = x;
  in["g"] = g1;
  in["g2"] = g2;
  auto ref = test::torch_ref("vit.deit", in,
                             {{"image_size", 28}, {"patch_size", 7}, {"in_channels", 1}, {"num_classes", 10},
                              {"dim", 48}, {"depth", 2}, {"heads", 3}, {"mlp_ratio", 4.0}});
  auto [cls, dist] = m.forward_heads(x);
  EXPECT_TENSOR_NEAR(cls, ref.at("cls"), 2e-5, 1e-4) << "class head";
  EXPECT_TENSOR_NEAR(dist, ref.at("dist"), 2e-5, 1e-4) << "distillation head";
  {
    NoGradGuard ng;
    EXPECT_TENSOR_NEAR(m.forward(x), ref.at("out"), 2e-5, 1e-4) << "eval output: mean of the heads";
    m.set_distilled_output(models::DistilledOutput::softmax_sum);
    EXPECT_TENSOR_NEAR(m.forward(x), ref.at("softmax_sum"), 1e-6, 1e-4) << "softmax(cls) + softmax(dist)";
    m.set_distilled_output(models::DistilledOutput::mean_logits);
  }
  (sum(cls * g1) + sum(dist * g2)).backward();
  for (auto& [n, p] : m.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << n;
    EXPECT_TENSOR_NEAR(p.grad(), ref.at("g." + n), 5e-5, 1e-3) << "grad " << n;
  }
}

TEST(Deit, CombineHeadsChecksShapes) {
  EXPECT_EQ(error_of([] {
              models::combine_distilled_heads(Tensor::zeros({2, 10}), Tensor::zeros({2, 5}),
                                              models::DistilledOutput::mean_logits);
            }),
            "combine_distilled_heads: expected two (B, classes) logits of the same shape, got [2, 10] and [2, 5]");
}

// After one backward in training mode (dropout / drop-path as configured), every parameter has a
// gradient and none is all zeros.
TEST(VitModels, EveryParameterReceivesAGradient) {
  const std::vector<std::pair<std::string, nlohmann::json>> cases = {
      {"vit_fmnist", nlohmann::json::object()},
      {"deit_fmnist_distilled", nlohmann::json::object()},
      {"vit_hybrid_fmnist", {{"depth", 2}}},
      {"vit", {{"depth", 2}, {"pos_embed", "learned2d"}, {"global_pool", "avg"}, {"representation_size", 32}}},
      {"vit", {{"depth", 2}, {"pos_embed", "sincos2d"}, {"drop", 0.1}, {"attn_drop", 0.1}}},
      {"vit_fmnist_small", {{"depth", 2}, {"head_dim", 16}, {"share_qk", true}, {"attn_scale", "none"}}},
      {"vit_fmnist_small", {{"depth", 2}, {"pos_embed", "relative"}, {"global_pool", "avg"}}},
      {"vit_fmnist_small", {{"depth", 2}, {"norm", "batch"}}},
      {"vit_fmnist_small", {{"depth", 2}, {"norm", "batch"}, {"norm_first", false}}},
      {"vit_fmnist_small", {{"depth", 2}, {"norm_first", false}}},
  };
  for (const auto& [name, overrides] : cases) {
    manual_seed(5);
    auto model = models::create_model(name, overrides);
    model->train();
    Generator g(6);
    Tensor x = randn({4, 1, 28, 28}, g);
    Tensor y = Tensor::from_vector(std::vector<int64_t>{0, 3, 7, 9}, {4});
    Tensor loss;
    if (auto* v = dynamic_cast<models::VisionTransformer*>(model.get()); v && v->cfg().distilled) {
      auto [cls, dist] = v->forward_heads(x);
      loss = cross_entropy(cls, y) + cross_entropy(dist, y);
    } else {
      loss = cross_entropy(model->forward(x), y);
    }
    loss.backward();
    int64_t n = 0;
    for (auto& [pname, p] : model->named_parameters()) {
      ++n;
      ASSERT_TRUE(p.grad().defined()) << name << " " << overrides.dump() << ": no gradient for " << pname;
      EXPECT_GT(max(abs(p.grad())).item(), 0.0) << name << " " << overrides.dump() << ": all-zero gradient for " << pname;
    }
    EXPECT_GT(n, 10) << name;
  }
}

namespace {

// torchvision's totals, computed by the golden script from torchvision.models, against
// num_parameters(); and the MACs of vit_b_16 against torchvision's documented 17.56 GFLOPS (their
// "FLOPs" count multiply-adds).
void check_totals(const std::vector<std::pair<std::string, std::string>>& pairs) {
  nlohmann::json names = nlohmann::json::array();
  for (const auto& p : pairs) names.push_back(p.second);
  auto ref = test::torch_ref("vit.torchvision_param_counts", {}, {{"models", names}});
  const Tensor counts = ref.at("counts");
  for (size_t i = 0; i < pairs.size(); ++i) {
    // Built with shapes only: no weights allocated or drawn (ViT-H/14 alone has 632M parameters).
    const int64_t n = models::parameter_count(pairs[i].first);
    auto m = std::dynamic_pointer_cast<models::ImageClassifier>(models::create_shapes_only(pairs[i].first));
    ASSERT_NE(m, nullptr) << pairs[i].first;
    const int64_t want = int64_t(counts.at({int64_t(i)}));
    EXPECT_EQ(n, want) << pairs[i].first << " vs torchvision " << pairs[i].second;
    EXPECT_EQ(m->num_parameters(), n) << pairs[i].first;
    std::printf("  %-24s %lld parameters (torchvision %s: %lld), %.3f GMACs\n", pairs[i].first.c_str(),
                (long long)n, pairs[i].second.c_str(), (long long)want, m->macs_per_image() * 1e-9);
    if (pairs[i].second == "vit_b_16") EXPECT_NEAR(double(m->macs_per_image()) / 17.56e9, 1.0, 0.005);
  }
}

}  // namespace

// The ablation options change the attention's shapes and MACs as they say: heads of width 16 instead of
// 128 / 4 = 32 halve qkv and proj, shared queries and keys drop a third of qkv; the scale moves no weight.
TEST(VitModels, AblationOptionsShapesAndMacs) {
  const nlohmann::json base = {{"depth", 1}};
  auto macs = [&](const nlohmann::json& o) {
    nlohmann::json c = base;
    if (o.is_object()) c.update(o);
    return std::dynamic_pointer_cast<models::ImageClassifier>(models::create_model("vit_fmnist_small", c))
        ->macs_per_image();
  };
  auto model = models::create_model("vit_fmnist_small", {{"depth", 1}, {"head_dim", 16}, {"share_qk", true}});
  auto shape_of = [&](const std::string& name) {
    for (const auto& [n, p] : model->named_parameters())
      if (n == name) return p.shape();
    return Shape{};
  };
  EXPECT_EQ(shape_of("blocks.0.attn.qkv.weight"), Shape({128, 128}));   // [qk; v]: 2 x 4 x 16 rows
  EXPECT_EQ(shape_of("blocks.0.attn.proj.weight"), Shape({128, 64}));
  const int64_t t = 50, d = 128;
  EXPECT_EQ(macs({}) - macs({{"head_dim", 16}}), t * d * 3 * 64 + 2 * t * t * 64 + t * 64 * d);
  EXPECT_EQ(macs({}) - macs({{"share_qk", true}}), t * d * d);
  EXPECT_EQ(macs({{"attn_scale", "none"}}), macs({}));
  // A config round trip keeps them.
  const models::VitConfig back = models::vit_config_from_json(model->config());
  EXPECT_EQ(back.head_dim, 16);
  EXPECT_TRUE(back.share_qk);
  // Without the 1/sqrt(d) factor the logits are larger: the attention maps sharper (lower entropy).
  manual_seed(3);
  auto scaled = models::create_model("vit_fmnist_small", {{"depth", 1}});
  manual_seed(3);
  auto unscaled = models::create_model("vit_fmnist_small", {{"depth", 1}, {"attn_scale", "none"}});
  Generator g(4);
  const Tensor x = randn({2, 1, 28, 28}, g);
  NoGradGuard ng;
  auto entropy = [&](nn::Module& m) {
    const Tensor w = dynamic_cast<models::VisionTransformer&>(m).attention_maps(x);
    return -sum(w * log(w + 1e-12)).item();
  };
  EXPECT_LT(entropy(*unscaled), entropy(*scaled));
}

// pos_embed "relative": no absolute embedding; each block adds BEiT's 2-d bias (class token included) to
// its logits, and that bias is what moves the attention: a block equals its attention under that mask.
TEST(VitModels, RelativePositionBiasIsEachBlocksMask) {
  manual_seed(8);
  auto model = models::create_model("vit_fmnist_small", {{"depth", 2}, {"pos_embed", "relative"}});
  auto& v = dynamic_cast<models::VisionTransformer&>(*model);
  int64_t tables = 0;
  for (const auto& [n, p] : model->named_parameters()) {
    EXPECT_EQ(n.find("pos_embed"), std::string::npos) << n;
    if (n.find("rel_pos.relative_position_bias_table") != std::string::npos) {
      ++tables;
      EXPECT_EQ(p.shape(), Shape({13 * 13 + 3, 4})) << n;   // grid 7: (2·7 - 1)² + 3 rows, 4 heads
    }
  }
  EXPECT_EQ(tables, 2);
  model->eval();
  Generator g(9);
  const Tensor x = randn({2, 1, 28, 28}, g);
  // With gradients the bias (a parameter) takes the naive attention; without, the fused kernel reads it
  // as a float mask: the same logits.
  const Tensor with_grad = v.forward(x).detach();
  NoGradGuard ng;
  const Tensor before = v.forward(x);
  EXPECT_TENSOR_NEAR(before, with_grad, 1e-5, 1e-5);
  EXPECT_EQ(v.attention_maps(x).shape(), Shape({2, 2, 4, 50, 50}));   // (depth, B, NH, T, T)
  // Zeroing the tables changes the output: the bias is used.
  for (auto& [n, p] : model->named_parameters())
    if (n.find("rel_pos") != std::string::npos) p.fill_(0.0);
  EXPECT_GT(max(abs(v.forward(x) - before)).item(), 1e-4);
  EXPECT_NE(test::error_of([] { models::create_model("deit_fmnist_distilled", {{"pos_embed", "relative"}}); })
                .find("relative\" takes one class token"),
            std::string::npos);
}

// The norm ablations, one block against PyTorch in training mode: LayerNorm or BatchNorm (over the tokens
// of each channel), pre-norm or post-norm; outputs, gradients and BatchNorm's running statistics.
TEST(VitModels, NormAblationBlocksMatchTorch) {
  for (const char* norm : {"layer", "batch"})
    for (bool first : {true, false}) {
      models::VitConfig c;
      c.dim = 16;
      c.heads = 2;
      c.mlp_ratio = 2;
      c.norm = norm;
      c.norm_first = first;
      manual_seed(21);
      models::VitBlock block(c, 0.0);
      Generator g(22);
      test::Tensors in;
      {
        NoGradGuard ng;
        for (auto& [k, p] : block.named_parameters()) {   // away from the init (ones / zeros) to test them
          p.copy_(p + randn(p.shape(), g) * 0.1);
          in["p." + k] = p;
        }
      }
      const Tensor x = randn({3, 5, 16}, g), gout = randn({3, 5, 16}, g);
      in["x"] = x;
      in["g"] = gout;
      auto ref = test::torch_ref("vit.norm_block", in,
                                 {{"heads", 2}, {"hidden", 32}, {"norm", norm}, {"norm_first", int(first)}});
      block.train();
      Tensor xx = x.clone().requires_grad_();
      Tensor out = block.forward(xx);
      sum(out * gout).backward();
      const std::string what = std::string(norm) + (first ? " pre-norm" : " post-norm");
      EXPECT_TENSOR_NEAR(out, ref.at("out"), 2e-5, 2e-5) << what;
      EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), 5e-5, 5e-5) << what;
      for (auto& [k, p] : block.named_parameters()) EXPECT_TENSOR_NEAR(p.grad(), ref.at("d." + k), 1e-4, 1e-4) << what << " " << k;
      if (std::string(norm) == "batch")
        for (auto& [k, b] : block.named_buffers())
          if (k.find("running_") != std::string::npos) EXPECT_TENSOR_NEAR(b, ref.at(k), 1e-6, 1e-6) << what << " " << k;
    }
  // The whole model: BatchNorm's final norm under "norm", post-norm with none.
  auto names = [](const nlohmann::json& o) {
    std::vector<std::string> n;
    for (const auto& [k, p] : models::create_model("vit_fmnist_small", o)->named_parameters())
      if (k.rfind("norm.", 0) == 0) n.push_back(k);
    return n;
  };
  EXPECT_EQ(names({{"depth", 1}, {"norm", "batch"}}), (std::vector<std::string>{"norm.weight", "norm.bias"}));
  EXPECT_TRUE(names({{"depth", 1}, {"norm_first", false}}).empty());
}

TEST(VitModels, ParameterTotalsAndMacsMatchTorchvision) {
  check_totals({{"vit_base_patch16_224", "vit_b_16"}});
}

// The slice size as an option: set_inference_chunk(n) gives the logits of ATTN_VIT_CHUNK=n (the
// variable only sets the default, when the model is built) bit for bit, and those of the batch
// whole (set_inference_chunk(0)) up to the GEMMs' rounding at another batch size.
TEST(VitModels, InferenceChunkOptionEqualsTheVariableAndTheWholeBatch) {
  auto build = [](const char* chunk_variable) {
    const char* old = std::getenv("ATTN_VIT_CHUNK");
    const std::string saved = old ? old : "";
    if (chunk_variable) setenv("ATTN_VIT_CHUNK", chunk_variable, 1);
    else unsetenv("ATTN_VIT_CHUNK");
    manual_seed(7);
    auto m = std::dynamic_pointer_cast<models::VisionTransformer>(models::create_model("deit_fmnist_small_distilled"));
    if (old) setenv("ATTN_VIT_CHUNK", saved.c_str(), 1);
    else unsetenv("ATTN_VIT_CHUNK");
    m->eval();
    return m;
  };
  auto by_option = build(nullptr), by_variable = build("5");
  EXPECT_EQ(by_option->inference_chunk_setting(), models::VisionTransformer::kAutoChunk);
  EXPECT_EQ(by_variable->inference_chunk_setting(), 5);
  EXPECT_EQ(by_variable->inference_chunk(), 5);
  by_option->set_inference_chunk(5);
  EXPECT_EQ(by_option->inference_chunk(), 5);
  Generator g(8);
  const Tensor x = randn({13, 1, 28, 28}, g);   // slices of 5, 5 and 3
  NoGradGuard ng;
  const Tensor sliced = by_option->forward(x);
  EXPECT_EQ(sliced.to_vector<float>(), by_variable->forward(x).to_vector<float>()) << "option vs ATTN_VIT_CHUNK=5";
  by_option->set_inference_chunk(0);
  EXPECT_EQ(by_option->inference_chunk(), 0);
  EXPECT_TENSOR_NEAR(sliced, by_option->forward(x), 1e-5, 1e-5) << "slices of 5 vs the batch whole";
  by_option->set_inference_chunk(models::VisionTransformer::kAutoChunk);
  EXPECT_GT(by_option->inference_chunk(), 0) << "automatic: a small model runs in slices";
  try {
    by_option->set_inference_chunk(-3);
    FAIL() << "expected an error for a negative slice";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("got -3"), std::string::npos) << e.what();
  }
}

// ViT-B/32, ViT-L/16 and ViT-H/14 (1.02G parameters between them): counted with shapes only
// (models::parameter_count), so in every run; torchvision builds them once, on a reference cache miss.
TEST(VitModels, LargeParameterTotalsMatchTorchvision) {
  check_totals({{"vit_base_patch32_224", "vit_b_32"}, {"vit_large_patch16_224", "vit_l_16"},
                {"vit_huge_patch14_224", "vit_h_14"}});
}

// No-grad eval inference runs the batch in slices (VisionTransformer::inference_chunk): the logits
// equal the whole batch's, the last slice partial, and DeiT's two heads joined in order.
TEST(VitModels, EvalInferenceInSlicesEqualsTheWholeBatch) {
  for (const char* name : {"vit_fmnist_small", "deit_fmnist_small_distilled"}) {
    manual_seed(5);
    auto base = models::create_model(name);
    auto* m = dynamic_cast<models::VisionTransformer*>(base.get());
    ASSERT_NE(m, nullptr) << name;
    m->eval();
    const int64_t chunk = m->inference_chunk();
    ASSERT_GT(chunk, 0) << name << ": a small model's inference should run in slices (set_inference_chunk(0) or "
                                   "ATTN_VIT_CHUNK=0 turns them off)";
    const int64_t B = 2 * chunk + 3;
    Generator g(6);
    Tensor x = randn({B, 1, 28, 28}, g);
    auto [cls_whole, dist_whole] = m->forward_heads(x);   // grad enabled: the batch whole
    NoGradGuard ng;
    auto [cls, dist] = m->forward_heads(x);
    ASSERT_EQ(cls.shape(), (Shape{B, 10})) << name;
    EXPECT_TENSOR_NEAR(cls, cls_whole.detach(), 1e-5, 1e-5) << name << ": class head";
    ASSERT_EQ(dist.defined(), dist_whole.defined()) << name;
    if (dist.defined()) EXPECT_TENSOR_NEAR(dist, dist_whole.detach(), 1e-5, 1e-5) << name << ": distillation head";
    // Images do not see each other: the second slice's second image alone gives its row.
    auto [one, unused] = m->forward_heads(x.narrow(0, chunk + 1, 1));
    EXPECT_TENSOR_NEAR(one, cls.narrow(0, chunk + 1, 1), 1e-5, 1e-5) << name << ": one image alone";
  }
}

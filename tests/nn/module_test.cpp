// nn::Module, Linear, MLP, Sequential/ModuleList and init: against torch.nn (forward, backward,
// parameter names and order, default init bounds), state dicts and the strict-load message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unistd.h>

#include "attn/attn.h"
#include "attn/nn/tied.h"
#include "attn/io/safetensors.h"
#include "attn/nn/init.h"
#include "attn/nn/linear.h"
#include "attn/nn/mlp.h"
#include "attn/nn/module.h"
#include "attn/nn/sequential.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::torch_ref;

namespace {

// Parameters "weight", "bias" as torch.nn.LayerNorm's, without needing the layer_norm op.
struct FakeNorm : nn::Module {
  Tensor& weight;
  Tensor& bias;
  explicit FakeNorm(int64_t c)
      : weight(register_parameter("weight", Tensor::ones({c}))), bias(register_parameter("bias", Tensor::zeros({c}))) {}
};

struct Block : nn::Module {
  std::shared_ptr<FakeNorm> norm;
  std::shared_ptr<nn::MLP> mlp;
  explicit Block(int64_t c, Generator& g) {
    norm = register_module("norm", std::make_shared<FakeNorm>(c));
    mlp = register_module("mlp", std::make_shared<nn::MLP>(nn::MLPOptions{c, 2 * c, c}, g));
    register_buffer("scale", Tensor::ones({c}));
  }
};

// The structure of _Net in tests/golden/gen/nn.py, registered in the same order.
struct NamedModel : nn::Module {
  Tensor& cls_token;
  std::shared_ptr<nn::ModuleList<Block>> blocks;
  std::shared_ptr<nn::Linear> head;
  Tensor& pos_embed;
  NamedModel(int64_t c, int64_t depth, int64_t classes, Generator& g)
      : cls_token(register_parameter("cls_token", Tensor::zeros({1, 1, c}))),
        blocks(register_module("blocks", std::make_shared<nn::ModuleList<Block>>())),
        head(register_module("head", std::make_shared<nn::Linear>(c, classes, false, g))),
        pos_embed(register_parameter("pos_embed", Tensor::zeros({1, 4, c}))) {
    for (int64_t i = 0; i < depth; ++i) blocks->push_back(std::make_shared<Block>(c, g));
    register_buffer("step", Tensor::zeros({}, DType::i64));
    register_buffer("cache", Tensor::zeros({3}), /*persistent=*/false);
  }
};

// Keys "<kind>.<index>.<name>" of the structure reference, in index order.
std::vector<std::pair<std::string, Shape>> listed(const test::Tensors& ref, const std::string& kind) {
  std::vector<std::pair<std::string, Shape>> out;
  for (const auto& [k, t] : ref)   // std::map: sorted, and the index is zero-padded
    if (k.rfind(kind + ".", 0) == 0) out.emplace_back(k.substr(kind.size() + 5), t.shape());
  return out;
}

std::vector<std::pair<std::string, Shape>> shapes_of(const std::vector<std::pair<std::string, Tensor>>& v) {
  std::vector<std::pair<std::string, Shape>> out;
  for (const auto& [k, t] : v) out.emplace_back(k, t.shape());
  return out;
}

std::string tmp_path(const std::string& name) {
  return "/tmp/attn_nn_test_" + std::to_string(::getpid()) + "_" + name;
}

}  // namespace

TEST(Module, NamesOrderAndCountMatchTorch) {
  Generator g(1);
  NamedModel m(8, 2, 5, g);
  auto ref = torch_ref("nn.structure", {}, {{"c", 8}, {"depth", 2}, {"classes", 5}});
  auto torch_params = listed(ref, "param");
  auto torch_state = listed(ref, "state");
  ASSERT_EQ(torch_params.size(), 2u + 2 * 6 + 1);
  EXPECT_EQ(shapes_of(m.named_parameters()), torch_params);
  EXPECT_EQ(shapes_of(m.state_dict()), torch_state);
  EXPECT_EQ(m.num_parameters(), int64_t(ref.at("num_parameters").item()));
  // Non-persistent buffers are listed as buffers but not saved.
  auto bufs = shapes_of(m.named_buffers());
  EXPECT_EQ(bufs.front().first, "step");
  EXPECT_EQ(bufs[1].first, "cache");
  EXPECT_EQ(bufs.back().first, "blocks.1.scale");
  // Non-recursive listing: own parameters only.
  auto own = m.named_parameters(false);
  ASSERT_EQ(own.size(), 2u);
  EXPECT_EQ(own[0].first, "cls_token");
  EXPECT_EQ(own[1].first, "pos_embed");
  // Parameters require grad; buffers do not.
  for (auto& p : m.parameters()) EXPECT_TRUE(p.requires_grad());
  for (auto& [n, b] : m.named_buffers()) EXPECT_FALSE(b.requires_grad()) << n;
  // Submodules, depth first.
  auto mods = m.named_modules();
  ASSERT_GE(mods.size(), 4u);
  EXPECT_EQ(mods[0].first, "blocks");
  EXPECT_EQ(mods[1].first, "blocks.0");
  EXPECT_EQ(mods[2].first, "blocks.0.norm");
}

TEST(Module, StateDictRoundTripThroughSafetensors) {
  Generator g1(2), g2(3);
  NamedModel a(6, 2, 3, g1), b(6, 2, 3, g2);
  nn::init::normal_(a.cls_token, g1, 0.0, 1.0);
  const std::string path = tmp_path("roundtrip.safetensors");
  io::save_safetensors(path, a.state_dict());
  Tensor held = b.head->weight;   // a handle taken before loading: loading copies in place
  EXPECT_FALSE(test::compare(b.head->weight, a.head->weight, 0, 0).ok);
  b.load_state_dict(io::load_safetensors(path).tensors);
  std::remove(path.c_str());
  auto sa = a.state_dict(), sb = b.state_dict();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].first, sb[i].first);
    EXPECT_TENSOR_NEAR(sb[i].second, sa[i].second, 0, 0) << sa[i].first;
  }
  EXPECT_TRUE(held.is_same(b.head->weight));
  EXPECT_TENSOR_NEAR(held, a.head->weight, 0, 0);
  EXPECT_TRUE(b.head->weight.requires_grad());
}

TEST(Module, StrictLoadListsEveryProblemInOneError) {
  Generator g(4);
  NamedModel m(4, 1, 3, g);
  io::TensorList sd = m.state_dict();
  io::TensorList bad;
  for (auto& [k, t] : sd) {
    if (k == "blocks.0.mlp.fc2.weight" || k == "blocks.0.mlp.fc2.bias") continue;   // missing
    if (k == "head.weight") { bad.emplace_back(k, Tensor::zeros({3, 5})); continue; }  // mis-shaped
    bad.emplace_back(k, t);
  }
  bad.emplace_back("head.bias", Tensor::zeros({3}));      // unexpected
  bad.emplace_back("blocks.7.norm.weight", Tensor::zeros({4}));
  const Tensor before = m.cls_token.clone();
  EXPECT_EQ(error_of([&] { m.load_state_dict(bad); }),
            "load_state_dict: the state dict does not match the model\n"
            "  missing keys (2): blocks.0.mlp.fc2.weight, blocks.0.mlp.fc2.bias\n"
            "  unexpected keys (2): head.bias, blocks.7.norm.weight\n"
            "  mis-shaped keys (1): head.weight (model [3, 4], state dict [3, 5])");
  // Not strict: missing/unexpected are skipped, mis-shaped still fails, with the same wording.
  EXPECT_EQ(error_of([&] { m.load_state_dict(bad, {.strict = false}); }),
            "load_state_dict: the state dict does not match the model\n"
            "  mis-shaped keys (1): head.weight (model [3, 4], state dict [3, 5])");
  // The report can be capped (load_checkpoint names the first few).
  EXPECT_EQ(m.state_dict_mismatch(bad, true, 1),
            "the state dict does not match the model\n"
            "  missing keys (2): blocks.0.mlp.fc2.weight, ... (1 more)\n"
            "  unexpected keys (2): head.bias, ... (1 more)\n"
            "  mis-shaped keys (1): head.weight (model [3, 4], state dict [3, 5])");
  // Nothing was copied by the failed loads.
  EXPECT_TENSOR_NEAR(m.cls_token, before, 0, 0);
  // Non-strict load with only missing/unexpected keys copies what matches.
  io::TensorList partial = {{"cls_token", Tensor::full({1, 1, 4}, 2.0)}, {"extra", Tensor::zeros({1})}};
  m.load_state_dict(partial, {.strict = false});
  EXPECT_TENSOR_NEAR(m.cls_token, Tensor::full({1, 1, 4}, 2.0), 0, 0);
}

TEST(Module, RegistrationErrors) {
  struct M : nn::Module {};
  M m;
  m.register_parameter("w", Tensor::zeros({2}));
  EXPECT_EQ(error_of([&] { m.register_buffer("w", Tensor::zeros({2})); }),
            "Module: cannot register buffer 'w': the name is already taken");
  EXPECT_EQ(error_of([&] { m.register_parameter("a.b", Tensor::zeros({2})); }),
            "Module: parameter name 'a.b' must not contain '.'");
  EXPECT_EQ(error_of([&] { m.register_parameter("idx", Tensor::zeros({2}, DType::i64)); }),
            "Module: parameter 'idx' must be a f32 or f64 tensor, got i64");
}

TEST(Module, TrainEvalZeroGradAndTable) {
  Generator g(5);
  NamedModel m(4, 2, 3, g);
  EXPECT_TRUE(m.is_training());
  m.eval();
  EXPECT_FALSE(m.is_training());
  EXPECT_FALSE((*m.blocks)[1]->mlp->fc2->is_training());
  m.train();
  EXPECT_TRUE((*m.blocks)[1]->mlp->drop2->is_training());

  Tensor x = randn({2, 4}, g);
  sum(m.head->forward(x)).backward();
  EXPECT_TRUE(m.head->weight.grad().defined());
  m.zero_grad();
  EXPECT_FALSE(m.head->weight.grad().defined());

  const std::string table = m.parameter_table();
  EXPECT_NE(table.find("blocks.0.mlp.fc1.weight  [8, 4]"), std::string::npos) << table;
  const std::string total = std::to_string(m.num_parameters());
  EXPECT_NE(table.find("total"), std::string::npos);
  EXPECT_EQ(table.substr(table.size() - total.size() - 1), total + "\n") << table;
  // One header, one line per parameter, one total.
  EXPECT_EQ(int64_t(std::count(table.begin(), table.end(), '\n')), int64_t(m.named_parameters().size()) + 2);
}

TEST(Module, TiedWeightsListedOnce) {
  struct Tied : nn::Module {
    std::shared_ptr<nn::Linear> a, b;
    Tied() {
      a = register_module("a", std::make_shared<nn::Linear>(4, 4));
      b = register_module("b", std::make_shared<nn::Linear>(4, 4, false));
      b->weight = a->weight;   // the reference is the registry entry
    }
  };
  Tied t;
  auto names = shapes_of(t.named_parameters());
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0].first, "a.weight");
  EXPECT_EQ(names[1].first, "a.bias");
  EXPECT_EQ(t.num_parameters(), 20);
  EXPECT_EQ(t.state_dict().size(), 3u);   // a.weight, a.bias, b.weight (as torch)
  Tensor x = Tensor::ones({1, 4});
  EXPECT_TENSOR_NEAR(t.b->forward(x), matmul(x, t.a->weight.t()), 0, 0);
}

TEST(Module, TiedNameMayBeLeftOutOfAStateDict) {
  struct Tied : nn::Module {
    std::shared_ptr<nn::Linear> a, b;
    Tied() {
      a = register_module("a", std::make_shared<nn::Linear>(4, 4));
      b = register_module("b", std::make_shared<nn::Linear>(4, 4, false));
      b->weight = a->weight;
    }
  };
  Tied src, dst;
  const std::vector<std::pair<std::string, std::string>> want = {{"b.weight", "a.weight"}};
  EXPECT_EQ(nn::tied_names(src), want);
  io::TensorList sd;
  for (auto& [k, v] : src.state_dict())
    if (k != "b.weight") sd.emplace_back(k, v);
  EXPECT_EQ(dst.state_dict_mismatch(sd), "");
  dst.load_state_dict(sd);
  EXPECT_TENSOR_NEAR(dst.b->weight, src.a->weight, 0, 0);   // loaded through its first name
  // Without the first name, the tied name alone does not make a whole state dict.
  io::TensorList only_tied = {{"a.bias", src.a->bias}, {"b.weight", src.a->weight}};
  EXPECT_NE(dst.state_dict_mismatch(only_tied).find("missing keys (1): a.weight"), std::string::npos);
  // Equal values in separate tensors are not a tie.
  nn::Linear l1(4, 4), l2(4, 4);
  EXPECT_TRUE(nn::tied_names(l1).empty());
}

TEST(Module, ToConvertsFloatsKeepsTiesAndIntegerBuffers) {
  struct Tied : nn::Module {
    std::shared_ptr<nn::Linear> a, b;
    Tensor& steps;
    Tied() : steps(register_buffer("steps", Tensor::from_vector<int64_t>({7}, {1}))) {
      a = register_module("a", std::make_shared<nn::Linear>(4, 4));
      b = register_module("b", std::make_shared<nn::Linear>(4, 4, false));
      b->weight = a->weight;
    }
  };
  Tied t;
  const Tensor w32 = t.a->weight.detach().clone();
  Tensor x = Tensor::ones({1, 4});
  sum(t.a->forward(x)).backward();
  ASSERT_TRUE(t.a->weight.grad().defined());
  t.to(DType::f64);
  EXPECT_EQ(t.a->weight.dtype(), DType::f64);
  EXPECT_EQ(t.a->bias.dtype(), DType::f64);
  EXPECT_TRUE(t.b->weight.is_same(t.a->weight)) << "tied weights must stay one tensor";
  EXPECT_EQ(t.steps.dtype(), DType::i64);
  EXPECT_TRUE(t.a->weight.requires_grad());
  EXPECT_TRUE(t.a->weight.is_leaf());
  EXPECT_FALSE(t.a->weight.grad().defined());
  EXPECT_TENSOR_NEAR(t.a->weight, w32.to(DType::f64), 0, 0);
  EXPECT_EQ(t.named_parameters().size(), 2u);
  Tensor y = t.b->forward(x.to(DType::f64));
  EXPECT_EQ(y.dtype(), DType::f64);
  sum(y).backward();
  EXPECT_TRUE(t.a->weight.grad().defined());
  EXPECT_EQ(t.a->weight.grad().dtype(), DType::f64);
  t.to(DType::f32);
  EXPECT_EQ(t.a->weight.dtype(), DType::f32);
  EXPECT_TENSOR_NEAR(t.a->weight, w32, 0, 0);
  EXPECT_EQ(error_of([&] { t.to(DType::i32); }), "Module::to: expected a floating dtype (f32, f64, bf16), got i32");
}

class LinearVsTorch : public ::testing::TestWithParam<bool> {};

TEST_P(LinearVsTorch, ForwardBackward) {
  const bool bias = GetParam();
  Generator g(6);
  for (DType dt : {DType::f32, DType::f64}) {
    nn::Linear lin({.in_features = 13, .out_features = 7, .bias = bias, .dtype = dt}, g);
    Tensor x = randn({3, 5, 13}, g, dt);
    Tensor gout = randn({3, 5, 7}, g, dt);
    test::Tensors in = {{"x", x}, {"g", gout}, {"p.weight", lin.weight}};
    if (bias) in["p.bias"] = lin.bias;
    auto ref = torch_ref("nn.linear", in, {{"bias", bias}});
    Tensor xx = x.clone().requires_grad_();
    Tensor y = lin.forward(xx);
    y.backward(gout);
    const double tol = dt == DType::f32 ? 1e-5 : 1e-12;
    EXPECT_TENSOR_NEAR(y, ref.at("out"), tol, tol);
    EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), tol, tol);
    EXPECT_TENSOR_NEAR(lin.weight.grad(), ref.at("d.weight"), tol, tol);
    if (bias) EXPECT_TENSOR_NEAR(lin.bias.grad(), ref.at("d.bias"), tol, tol);
    else EXPECT_FALSE(lin.bias.defined());
  }
}

INSTANTIATE_TEST_SUITE_P(Bias, LinearVsTorch, ::testing::Bool());

TEST(Linear, DefaultInitAsTorch) {
  // Bounds: torch's own init on a large layer reaches its bound (1/sqrt(fan_in)); ours must too,
  // and the spread (std of U(-b, b)) must agree.
  const int64_t fan_in = 50;
  auto ref = torch_ref("nn.kaiming_bound", {}, {{"fan_in", fan_in}});
  Generator g(7);
  nn::Linear lin(fan_in, 4096, true, g);
  const double w_absmax = max(abs(lin.weight.detach())).item();
  const double b_absmax = max(abs(lin.bias.detach())).item();
  EXPECT_NEAR(w_absmax, ref.at("w_absmax").item(), 1e-4);
  EXPECT_NEAR(b_absmax, ref.at("b_absmax").item(), 2e-3);
  const double w_std = std::sqrt(var(lin.weight.detach().to(DType::f64).flatten(), {0}).item());
  EXPECT_NEAR(w_std, ref.at("w_std").item(), 2e-3);
  // And the draw is exactly uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) from the generator.
  Generator g2(7);
  const double bound = 1.0 / std::sqrt(double(fan_in));
  EXPECT_TENSOR_NEAR(lin.weight, uniform({4096, fan_in}, -bound, bound, g2), 0, 0);
  EXPECT_TENSOR_NEAR(lin.bias, uniform({4096}, -bound, bound, g2), 0, 0);
}

TEST(Linear, BadInputMessage) {
  nn::Linear lin(8, 4);
  EXPECT_EQ(error_of([&] { lin.forward(Tensor::zeros({2, 5})); }),
            "Linear: expected input with last dim 8, got shape [2, 5]");
}

class MLPVsTorch : public ::testing::TestWithParam<const char*> {};

TEST_P(MLPVsTorch, ForwardBackward) {
  const std::string act_name = GetParam();
  const nn::Activation act = act_name == "relu" ? nn::Activation::relu
                             : act_name == "gelu_tanh" ? nn::Activation::gelu_tanh
                                                       : nn::Activation::gelu;
  Generator g(8);
  nn::MLP mlp({.in_features = 11, .hidden_features = 23, .out_features = 5, .act = act}, g);
  EXPECT_EQ(shapes_of(mlp.named_parameters()),
            (std::vector<std::pair<std::string, Shape>>{
                {"fc1.weight", {23, 11}}, {"fc1.bias", {23}}, {"fc2.weight", {5, 23}}, {"fc2.bias", {5}}}));
  Tensor x = randn({2, 3, 11}, g);
  Tensor gout = randn({2, 3, 5}, g);
  test::Tensors in = {{"x", x}, {"g", gout}};
  for (auto& [k, p] : mlp.named_parameters()) in["p." + k] = p;
  auto ref = torch_ref("nn.mlp", in, {{"act", act_name}});
  Tensor xx = x.clone().requires_grad_();
  Tensor y = mlp.forward(xx);
  y.backward(gout);
  EXPECT_TENSOR_NEAR(y, ref.at("out"), 1e-5, 1e-5);
  EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), 1e-5, 1e-5);
  for (auto& [k, p] : mlp.named_parameters()) EXPECT_TENSOR_NEAR(p.grad(), ref.at("d." + k), 1e-5, 1e-5) << k;
}

INSTANTIATE_TEST_SUITE_P(Acts, MLPVsTorch, ::testing::Values("gelu", "gelu_tanh", "relu"));

TEST(MLP, FiniteDifferences) {
  Generator g(9);
  nn::MLP mlp({.in_features = 3, .hidden_features = 4}, g);
  // Parameters to f64 so gradcheck can perturb them: run the same graph with f64 copies.
  Tensor w1 = mlp.fc1->weight.detach().to(DType::f64), b1 = mlp.fc1->bias.detach().to(DType::f64);
  Tensor w2 = mlp.fc2->weight.detach().to(DType::f64), b2 = mlp.fc2->bias.detach().to(DType::f64);
  Tensor x = randn({2, 3}, g, DType::f64);
  EXPECT_TRUE(test::gradcheck(
      [&](const std::vector<Tensor>& in) {
        return linear(nn::activation(linear(in[0], in[1], in[2]), nn::Activation::gelu), in[3], in[4]);
      },
      {x, w1, b1, w2, b2}));
}

TEST(Sequential, NamesChildrenAndChainsForward) {
  Generator g(10);
  nn::Sequential seq;
  auto l0 = seq.push_back(std::make_shared<nn::Linear>(6, 9, true, g));
  seq.push_back(std::make_shared<nn::Lambda>([](const Tensor& x) { return relu(x); }));
  auto l2 = seq.push_back(std::make_shared<nn::Linear>(9, 4, true, g));
  seq.push_back(std::make_shared<nn::Identity>());
  EXPECT_EQ(seq.size(), 4u);
  auto names = shapes_of(seq.named_parameters());
  ASSERT_EQ(names.size(), 4u);
  EXPECT_EQ(names[0].first, "0.weight");
  EXPECT_EQ(names[1].first, "0.bias");
  EXPECT_EQ(names[2].first, "2.weight");
  EXPECT_EQ(names[3].first, "2.bias");
  Tensor x = randn({5, 6}, g);
  EXPECT_TENSOR_NEAR(seq.forward(x), l2->forward(relu(l0->forward(x))), 0, 0);
  EXPECT_TRUE(seq[0].get() == l0.get());

  nn::ModuleList<nn::Linear> list;
  list.push_back(std::make_shared<nn::Linear>(2, 3, true, g));
  list.push_back(std::make_shared<nn::Linear>(3, 2, false, g));
  EXPECT_EQ(shapes_of(list.named_parameters()),
            (std::vector<std::pair<std::string, Shape>>{{"0.weight", {3, 2}}, {"0.bias", {3}}, {"1.weight", {2, 3}}}));
  int64_t n = 0;
  for (const auto& l : list) n += l->options().out_features;
  EXPECT_EQ(n, 5);
  EXPECT_EQ(error_of([&] { list[2]; }), "ModuleList: index 2 out of range for 2 modules");
}

TEST(Init, FillsAsSpecified) {
  Generator g(11);
  Tensor t = Tensor::empty({64, 32});
  nn::init::trunc_normal_(t, g, 0.0, 0.02);
  EXPECT_LE(max(abs(t)).item(), 2.0);
  // trunc_normal_ with bounds within reach of the std: every value inside [a, b].
  nn::init::trunc_normal_(t, g, 0.0, 1.0, -0.5, 0.25);
  EXPECT_LE(max(t).item(), 0.25);
  EXPECT_GE(-max(neg(t)).item(), -0.5);
  // Same generator state: same draw as the core trunc_normal.
  Generator g1(12), g2(12);
  nn::init::trunc_normal_(t, g1, 0.1, 0.02, -2.0, 2.0);
  EXPECT_TENSOR_NEAR(t, trunc_normal({64, 32}, 0.1, 0.02, -2.0, 2.0, g2), 0, 0);
  // xavier_uniform_: U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)).
  nn::init::xavier_uniform_(t, g1, 2.0);
  EXPECT_TENSOR_NEAR(t, uniform({64, 32}, -2.0 * std::sqrt(6.0 / 96.0), 2.0 * std::sqrt(6.0 / 96.0), g2), 0, 0);
  nn::init::normal_(t, g1, 1.0, 3.0);
  EXPECT_TENSOR_NEAR(t, normal({64, 32}, 1.0, 3.0, g2), 0, 0);
  nn::init::zeros_(t);
  EXPECT_EQ(max(abs(t)).item(), 0.0);
  nn::init::ones_(t.slice(0, 0, 2));   // through a view: writes reach the storage
  EXPECT_EQ(sum(t).item(), 64.0);
  auto [fi, fo] = nn::init::fan_in_and_fan_out(Tensor::empty({8, 4, 3, 3}));
  EXPECT_EQ(fi, 36);
  EXPECT_EQ(fo, 72);
  EXPECT_EQ(error_of([&] { nn::init::xavier_uniform_(Tensor::empty({5}), g); }),
            "fan_in_and_fan_out: expected a tensor with at least 2 dims, got shape [5]");
}

TEST(Init, SkipRandomInitZeroFillsAndLeavesTheGeneratorAlone) {
  Generator g(21);
  const uint64_t offset = g.offset();
  Tensor t = Tensor::full({16, 8}, 5.0f);
  {
    nn::init::SkipRandomInit skip;
    EXPECT_TRUE(nn::init::random_init_skipped());
    {
      nn::init::SkipRandomInit nested;
    }
    EXPECT_TRUE(nn::init::random_init_skipped());   // still inside the outer guard
    nn::init::trunc_normal_(t, g, 0.0, 0.02);
    EXPECT_EQ(max(abs(t)).item(), 0.0);
    t.fill_(5.0);
    nn::init::kaiming_uniform_(t, g, std::sqrt(5.0));
    EXPECT_EQ(max(abs(t)).item(), 0.0);
    t.fill_(5.0);
    nn::init::normal_(t, g, 1.0, 2.0);
    EXPECT_EQ(max(abs(t)).item(), 0.0);
    nn::init::ones_(t);   // constant fills are not random: still applied
    EXPECT_EQ(sum(t).item(), 128.0);
    EXPECT_EQ(g.offset(), offset);
  }
  EXPECT_FALSE(nn::init::random_init_skipped());
  nn::init::normal_(t, g, 0.0, 1.0);   // drawing again after the guard
  EXPECT_GT(max(abs(t)).item(), 0.0);
  EXPECT_NE(g.offset(), offset);
  // A model built under the guard, then strictly loaded, equals the saved one.
  manual_seed(3);
  nn::Linear a(6, 4);
  const std::string path = ::testing::TempDir() + "attn_skip_init.safetensors";
  io::save_safetensors(path, a.state_dict());
  std::unique_ptr<nn::Linear> b;
  {
    nn::init::SkipRandomInit skip;
    b = std::make_unique<nn::Linear>(6, 4);
  }
  EXPECT_EQ(max(abs(b->weight)).item(), 0.0);
  b->load_state_dict(io::load_safetensors(path).tensors, {.strict = true});
  EXPECT_TENSOR_NEAR(b->weight, a.weight, 0, 0);
  EXPECT_TENSOR_NEAR(b->bias, a.bias, 0, 0);
  std::remove(path.c_str());
}

// Fill::none (strict loads): the random initialisers leave the tensor as it was, constant fills still
// apply, the generator does not move; a zero-filling guard nested inside does not undo it.
TEST(Init, SkipRandomInitFillNoneLeavesTensorsUntouched) {
  Generator g(22);
  const uint64_t offset = g.offset();
  Tensor t = Tensor::full({16, 8}, 5.0f);
  {
    nn::init::SkipRandomInit skip(nn::init::SkipRandomInit::Fill::none);
    EXPECT_TRUE(nn::init::random_init_leaves_unfilled());
    nn::init::trunc_normal_(t, g, 0.0, 0.02);
    nn::init::kaiming_uniform_(t, g, std::sqrt(5.0));
    nn::init::xavier_uniform_(t, g);
    nn::init::uniform_(t, g, -1.0, 1.0);
    nn::init::normal_(t, g, 1.0, 2.0);
    EXPECT_EQ(max(neg(t)).item(), -5.0);
    EXPECT_EQ(max(t).item(), 5.0);
    {
      nn::init::SkipRandomInit nested;
      nn::init::normal_(t, g, 0.0, 1.0);
      EXPECT_EQ(max(t).item(), 5.0);
    }
    nn::init::zeros_(t);
    EXPECT_EQ(max(abs(t)).item(), 0.0);
    EXPECT_EQ(g.offset(), offset);
  }
  EXPECT_FALSE(nn::init::random_init_leaves_unfilled());
  {
    nn::init::SkipRandomInit zeros;
    EXPECT_FALSE(nn::init::random_init_leaves_unfilled());
  }
}

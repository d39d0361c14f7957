// SGD / Adam / AdamW against torch.optim (parameters and state after 10 steps with the same
// initial values and gradients), the weight-decay grouping rule, optimizer state dicts.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "attn/attn.h"
#include "attn/nn/linear.h"
#include "attn/nn/module.h"
#include "attn/optim/adam.h"
#include "attn/optim/sgd.h"
#include "backend/cpu/adam_kernels.h"
#include "errors.h"
#include "isa.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::torch_ref;
using nlohmann::json;

namespace {

// Parameters of several ranks and sizes (primes, around the vector widths) with `steps` gradients each.
struct Problem {
  std::vector<Tensor> params;   // initial values (not requiring grad: copied per run)
  std::vector<Tensor> grads;    // (steps, *shape)
  int steps = 10;
};

Problem make_problem(DType dt, uint64_t seed) {
  Generator g(seed);
  Problem pb;
  // 35, 7, 24, 17, 66, 1, 8 elements: below, at, multiples of and above the 8-lane vector width.
  const std::vector<Shape> shapes = {{5, 7}, {7}, {1, 3, 8}, {17}, {33, 2}, {1}, {8}};
  for (const Shape& s : shapes) {
    pb.params.push_back(randn(s, g, dt));
    Shape gs = s;
    gs.insert(gs.begin(), pb.steps);
    Tensor gr = randn(gs, g, dt);
    // Include grads of very different scales, as real training has.
    pb.grads.push_back(gr * (s.size() == 1 ? 1e-3 : 1.0));
  }
  return pb;
}

// The groups spec sent to Python: indices into the flat parameter list, and per-group overrides.
struct GroupSpec {
  std::vector<int> params;
  json overrides = json::object();   // e.g. {"weight_decay": 0.0} or {"lr": 0.05}
};

std::vector<optim::ParamGroup> build_groups(const std::vector<Tensor>& params, const std::vector<GroupSpec>& spec) {
  std::vector<optim::ParamGroup> out;
  for (const auto& s : spec) {
    optim::ParamGroup g;
    for (int i : s.params) g.params.push_back(params[size_t(i)]);
    if (s.overrides.contains("weight_decay")) g.weight_decay = s.overrides["weight_decay"];
    if (s.overrides.contains("lr")) g.lr = s.overrides["lr"];
    if (s.overrides.contains("momentum")) g.options["momentum"] = s.overrides["momentum"];
    out.push_back(g);
  }
  return out;
}

json groups_json(const std::vector<GroupSpec>& spec) {
  json j = json::array();
  for (const auto& s : spec) {
    json g = s.overrides;
    g["params"] = s.params;
    j.push_back(g);
  }
  return j;
}

std::unique_ptr<optim::Optimizer> make_opt(const std::string& name, std::vector<optim::ParamGroup> groups,
                                           const json& kw) {
  if (name == "sgd")
    return std::make_unique<optim::SGD>(groups, optim::SGDOptions{.lr = kw["lr"], .momentum = kw["momentum"],
                                                                   .dampening = kw["dampening"],
                                                                   .nesterov = kw["nesterov"],
                                                                   .weight_decay = kw["weight_decay"]});
  if (name == "adam")
    return std::make_unique<optim::Adam>(groups, optim::AdamOptions{.lr = kw["lr"], .beta1 = kw["beta1"],
                                                                     .beta2 = kw["beta2"], .eps = kw["eps"],
                                                                     .weight_decay = kw["weight_decay"],
                                                                     .amsgrad = kw["amsgrad"]});
  return std::make_unique<optim::AdamW>(groups, optim::AdamWOptions{.lr = kw["lr"], .beta1 = kw["beta1"],
                                                                     .beta2 = kw["beta2"], .eps = kw["eps"],
                                                                     .weight_decay = kw["weight_decay"],
                                                                     .amsgrad = kw["amsgrad"]});
}

struct Case {
  std::string name;
  std::string opt;
  json kw;
  std::vector<GroupSpec> groups;
  std::vector<std::pair<int, int>> skip;   // (step, param) without a gradient
};

std::vector<Case> cases() {
  const json sgd = {{"lr", 0.1}, {"momentum", 0.9}, {"dampening", 0.0}, {"nesterov", true}, {"weight_decay", 1e-2}};
  json sgd_plain = sgd;
  sgd_plain["nesterov"] = false;
  sgd_plain["dampening"] = 0.3;
  json sgd_nomom = sgd_plain;
  sgd_nomom["momentum"] = 0.0;
  sgd_nomom["dampening"] = 0.0;
  const json adam = {{"lr", 1e-2}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.0},
                     {"amsgrad", false}};
  json adam_wd = adam;
  adam_wd["weight_decay"] = 0.1;
  adam_wd["amsgrad"] = true;
  adam_wd["beta2"] = 0.95;
  json adamw = adam;
  adamw["weight_decay"] = 0.05;
  json adamw_ams = adamw;
  adamw_ams["amsgrad"] = true;
  const std::vector<GroupSpec> one = {{{0, 1, 2, 3, 4, 5, 6}, json::object()}};
  // The no-decay split (1-d params) as param_groups_weight_decay makes it, plus an lr override.
  const std::vector<GroupSpec> split = {{{1, 3, 5, 6}, {{"weight_decay", 0.0}}}, {{0, 2, 4}, {{"weight_decay", 0.05}}}};
  const std::vector<GroupSpec> lr_groups = {{{0, 1, 2}, json::object()}, {{3, 4, 5, 6}, {{"lr", 0.05}, {"momentum", 0.5}}}};
  const std::vector<std::pair<int, int>> skips = {{0, 2}, {3, 2}, {4, 0}, {9, 5}};
  return {
      {"sgd_nesterov_wd", "sgd", sgd, one, {}},
      {"sgd_dampening", "sgd", sgd_plain, lr_groups, skips},
      {"sgd_no_momentum", "sgd", sgd_nomom, one, {}},
      {"adam", "adam", adam, one, skips},
      {"adam_l2_amsgrad", "adam", adam_wd, one, {}},
      {"adamw_groups", "adamw", adamw, split, skips},
      {"adamw_amsgrad", "adamw", adamw_ams, split, {}},
  };
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

}  // namespace

class OptimVsTorch : public ::testing::TestWithParam<Case> {};

TEST_P(OptimVsTorch, TenStepsMatch) {
  const Case& c = GetParam();
  test::IsaRestore restore;
  for (Isa isa : test::supported_isas())
  for (DType dt : {DType::f32, DType::f64}) {
    set_isa(isa);
    SCOPED_TRACE(std::string("isa ") + isa_name(isa) + " " + dtype_name(dt));
    Problem pb = make_problem(dt, 100);
    std::vector<Tensor> params;
    for (auto& p : pb.params) params.push_back(p.clone().requires_grad_());
    auto opt = make_opt(c.opt, build_groups(params, c.groups), c.kw);
    std::set<std::pair<int, int>> skip(c.skip.begin(), c.skip.end());
    for (int s = 0; s < pb.steps; ++s) {
      for (size_t i = 0; i < params.size(); ++i) {
        if (skip.count({s, int(i)})) params[i].zero_grad();
        else params[i].set_grad(pb.grads[i].select(0, s).clone());
      }
      opt->step();
    }
    test::Tensors in;
    for (size_t i = 0; i < params.size(); ++i) {
      in["p." + std::to_string(i)] = pb.params[i];
      in["g." + std::to_string(i)] = pb.grads[i];
    }
    json skip_j = json::array();
    for (auto [s, i] : c.skip) skip_j.push_back({s, i});
    auto ref = torch_ref("optim.run", in,
                         {{"opt", c.opt}, {"kw", c.kw}, {"groups", groups_json(c.groups)}, {"n", params.size()},
                          {"steps", pb.steps}, {"skip", skip_j}});
    const double tol = dt == DType::f32 ? 1e-6 : 1e-12;
    for (size_t i = 0; i < params.size(); ++i)
      EXPECT_TENSOR_NEAR(params[i], ref.at("p." + std::to_string(i)), tol, tol) << c.name << " param " << i;
    // The state, key for key. Our state index counts parameters in group order; the reference
    // names them by their index in the flat list.
    std::vector<int> order;
    for (const auto& gs : c.groups) order.insert(order.end(), gs.params.begin(), gs.params.end());
    size_t n_state = 0;
    for (const auto& [k, t] : opt->state_dict()) {
      if (k.rfind("state.", 0) != 0) continue;
      ++n_state;
      const size_t dot = k.find('.', 6);
      const int j = std::stoi(k.substr(6, dot - 6));
      const std::string rk = "s." + std::to_string(order[size_t(j)]) + k.substr(dot);
      ASSERT_TRUE(ref.count(rk)) << c.name << ": torch has no " << rk;
      EXPECT_TENSOR_NEAR(t, ref.at(rk), tol, tol) << c.name << " " << k;
    }
    size_t n_ref_state = 0;
    for (const auto& [k, t] : ref) n_ref_state += k.rfind("s.", 0) == 0;
    EXPECT_EQ(n_state, n_ref_state) << c.name;
  }
}

INSTANTIATE_TEST_SUITE_P(All, OptimVsTorch, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

TEST(Optim, LinearRegressionWithAutogradMatchesTorch) {
  Generator g(7);
  Tensor w0 = randn({3, 11}, g, DType::f64), b0 = randn({3}, g, DType::f64);
  Tensor x = randn({29, 11}, g, DType::f64), y = randn({29, 3}, g, DType::f64);
  const std::map<std::string, json> kws = {
      {"sgd", {{"lr", 0.05}, {"momentum", 0.9}, {"dampening", 0.0}, {"nesterov", true}, {"weight_decay", 1e-3}}},
      {"adamw", {{"lr", 0.05}, {"beta1", 0.9}, {"beta2", 0.99}, {"eps", 1e-8}, {"weight_decay", 0.1}, {"amsgrad", false}}}};
  for (const auto& [name, kw] : kws) {
    Tensor w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
    optim::ParamGroup grp;
    grp.params = {w, b};
    auto opt = make_opt(name, {grp}, kw);
    std::vector<double> losses;
    for (int s = 0; s < 10; ++s) {
      opt->zero_grad();
      Tensor d = linear(x, w, b) - y;
      Tensor loss = mean(d * d);
      loss.backward();
      losses.push_back(loss.item());
      opt->step();
    }
    auto ref = torch_ref("optim.linreg", {{"w", w0}, {"b", b0}, {"x", x}, {"y", y}},
                         {{"opt", name}, {"kw", kw}, {"steps", 10}});
    EXPECT_TENSOR_NEAR(w, ref.at("w"), 1e-10, 1e-10) << name;
    EXPECT_TENSOR_NEAR(b, ref.at("b"), 1e-10, 1e-10) << name;
    EXPECT_TENSOR_NEAR(Tensor::from_vector(losses, {10}), ref.at("losses"), 1e-10, 1e-10) << name;
    EXPECT_LT(losses.back(), losses.front()) << name;
  }
}

namespace {
struct VitLike : nn::Module {
  Tensor& cls_token;
  Tensor& pos_embed;
  std::shared_ptr<nn::Linear> qkv;
  Tensor& norm_weight;
  Tensor& relative_position_bias_table;
  std::shared_ptr<nn::Linear> head;
  VitLike()
      : cls_token(register_parameter("cls_token", Tensor::zeros({1, 1, 4}))),
        pos_embed(register_parameter("pos_embed", Tensor::zeros({1, 5, 4}))),
        qkv(register_module("qkv", std::make_shared<nn::Linear>(4, 12))),
        norm_weight(register_parameter("norm_weight", Tensor::ones({4}))),
        relative_position_bias_table(register_parameter("relative_position_bias_table", Tensor::zeros({9, 2}))),
        head(register_module("head", std::make_shared<nn::Linear>(4, 3))) {
    struct Frozen : nn::Module {
      Frozen() { register_parameter("w", Tensor::zeros({2, 2})).requires_grad_(false); }
    };
    register_module("frozen", std::make_shared<Frozen>());
  }
};
}  // namespace

TEST(Optim, WeightDecayGroupsAsTimm) {
  VitLike m;
  auto groups = optim::param_groups_weight_decay(m, 0.05);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].weight_decay, 0.0);
  EXPECT_EQ(groups[1].weight_decay, 0.05);
  auto names_of = [&](const optim::ParamGroup& g) {
    std::vector<std::string> out;
    for (const auto& p : g.params)
      for (const auto& [n, q] : m.named_parameters())
        if (q.is_same(p)) out.push_back(n);
    return out;
  };
  EXPECT_EQ(names_of(groups[0]), (std::vector<std::string>{"cls_token", "pos_embed", "norm_weight",
                                                           "relative_position_bias_table", "qkv.bias", "head.bias"}));
  EXPECT_EQ(names_of(groups[1]), (std::vector<std::string>{"qkv.weight", "head.weight"}));
  EXPECT_TRUE(optim::skip_weight_decay("blocks.0.attn.position_embedding.weight", Tensor::zeros({3, 3})));
  EXPECT_TRUE(optim::skip_weight_decay("dist_token", Tensor::zeros({1, 1, 3})));
  EXPECT_FALSE(optim::skip_weight_decay("blocks.0.mlp.fc1.weight", Tensor::zeros({3, 3})));
  // Unset lr falls back to the optimizer default; the group's weight decay is kept.
  optim::AdamW opt(groups, {.lr = 3e-4, .weight_decay = 0.5});
  EXPECT_EQ(opt.param_groups()[0].lr, 3e-4);
  EXPECT_EQ(opt.param_groups()[0].weight_decay, 0.0);
  EXPECT_EQ(opt.param_groups()[1].weight_decay, 0.05);
  EXPECT_EQ(opt.param_groups()[1].options.at("beta2"), 0.999);
}

TEST(Optim, StateDictRoundTripContinuesBitForBit) {
  for (const std::string name : {"sgd", "adam", "adamw"}) {
    const json kw = name == "sgd" ? json{{"lr", 0.1}, {"momentum", 0.9}, {"dampening", 0.0}, {"nesterov", false},
                                         {"weight_decay", 1e-2}}
                                  : json{{"lr", 1e-2}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8},
                                         {"weight_decay", 1e-2}, {"amsgrad", true}};
    Problem pb = make_problem(DType::f32, 200);
    auto run = [&](bool reload) {
      std::vector<Tensor> params;
      for (auto& p : pb.params) params.push_back(p.clone().requires_grad_());
      auto spec = std::vector<GroupSpec>{{{0, 2, 4}, json::object()}, {{1, 3, 5, 6}, {{"lr", 0.03}}}};
      auto opt = make_opt(name, build_groups(params, spec), kw);
      for (int s = 0; s < pb.steps; ++s) {
        if (reload && s == 4) {
          // A fresh optimizer over fresh parameter tensors, restored from the state dicts.
          io::TensorList sd = opt->state_dict();
          std::string bytes = io::serialize_safetensors(sd);
          auto file = io::parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
          std::vector<Tensor> fresh;
          for (auto& p : params) fresh.push_back(p.detach().clone().requires_grad_());
          params = fresh;
          auto spec2 = spec;
          auto opt2 = make_opt(name, build_groups(params, spec2), kw);   // default lrs until loaded
          opt2->load_state_dict(file.tensors);
          EXPECT_EQ(opt2->param_groups()[1].lr, 0.03);
          opt = std::move(opt2);
        }
        for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(pb.grads[i].select(0, s).clone());
        opt->step();
      }
      return params;
    };
    auto a = run(false), b = run(true);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TENSOR_NEAR(b[i], a[i], 0, 0) << name << " param " << i;
  }
}

TEST(Optim, LoadStateDictChecksBeforeChanging) {
  Tensor p = Tensor::zeros({3, 2}).requires_grad_();
  optim::Adam opt(std::vector<Tensor>{p}, {.lr = 0.1});
  p.set_grad(Tensor::ones({3, 2}));
  opt.step();
  io::TensorList sd = opt.state_dict();
  for (auto& [k, t] : sd)
    if (k == "state.0.exp_avg") t = Tensor::zeros({2, 3});
  EXPECT_EQ(error_of([&] { opt.load_state_dict(sd); }),
            "Adam.load_state_dict: key 'state.0.exp_avg' has shape [2, 3] but parameter 0 has shape [3, 2]");
  EXPECT_EQ(opt.state_dict().back().second.item(), 1.0);   // state.0.step untouched
  io::TensorList extra = {{"param_groups.1.lr", Tensor::scalar(0.1, DType::f64)}};
  EXPECT_EQ(error_of([&] { opt.load_state_dict(extra); }),
            "Adam.load_state_dict: key 'param_groups.1.lr' is for parameter group 1 but the optimizer has 1 groups");
  EXPECT_EQ(error_of([&] { optim::SGD bad(std::vector<Tensor>{p}, {.lr = 0.1, .momentum = 0.0, .nesterov = true}); }),
            "SGD: nesterov needs momentum > 0 and dampening 0, got momentum 0 and dampening 0");
  EXPECT_EQ(error_of([&] { optim::SGD bad(std::vector<Tensor>{p, p}); }),
            "optimizer: parameter 1 of group 0 appears in more than one place");
}

// The AVX2 Adam kernel against the reference loop (the oracle): sizes below, at, multiples of and
// above the 8-lane width, special values (inf / NaN gradients, huge and tiny magnitudes).
TEST(AdamKernel, Avx2MatchesReference) {
  if (detected_isa() < Isa::avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  Generator g(11);
  for (int64_t n : {1, 7, 8, 9, 16, 17, 61, 1031}) {
    for (bool decoupled : {false, true}) {
      for (bool ams : {false, true}) {
        Tensor p = randn({n}, g), gr = randn({n}, g) * 3.0, m = randn({n}, g) * 0.1, v = abs(randn({n}, g));
        Tensor vmax = abs(randn({n}, g));
        std::vector<float> gv = gr.to_vector<float>();
        const float specials[] = {INFINITY, -INFINITY, NAN, 1e30f, 1e-30f, 0.f, -0.f};
        for (int64_t i = 0; i < n; i += 3) gv[size_t(i)] = specials[(i / 3) % 7];
        gr = Tensor::from_vector(gv, {n});
        const kernels::AdamScalars sc{0.9, 0.999, 1e-8, 0.05, 1.0 - 1e-3 * 0.05, std::sqrt(1.0 - 0.999 * 0.999),
                                      -1e-3 / (1.0 - 0.9 * 0.9), decoupled};
        Tensor p1 = p.clone(), m1 = m.clone(), v1 = v.clone(), x1 = vmax.clone();
        Tensor p2 = p.clone(), m2 = m.clone(), v2 = v.clone(), x2 = vmax.clone();
        kernels::adam_reference<float>(p1.data<float>(), gr.data<float>(), m1.data<float>(), v1.data<float>(),
                                       ams ? x1.data<float>() : nullptr, n, sc);
        kernels::adam_f32_avx2(p2.data<float>(), gr.data<float>(), m2.data<float>(), v2.data<float>(),
                               ams ? x2.data<float>() : nullptr, n, sc);
        const std::string what = "n=" + std::to_string(n) + (decoupled ? " adamw" : " adam") + (ams ? " amsgrad" : "");
        EXPECT_TENSOR_NEAR(p2, p1, 1e-6, 1e-6) << what;
        EXPECT_TENSOR_NEAR(m2, m1, 1e-6, 1e-6) << what;
        EXPECT_TENSOR_NEAR(v2, v1, 1e-6, 1e-6) << what;
        if (ams) EXPECT_TENSOR_NEAR(x2, x1, 1e-6, 1e-6) << what;
      }
    }
  }
}

// attn::adam_step_, the op optim::AdamW runs: two AdamW steps (AMSGrad, weight decay) through the
// optimizer equal two calls of the op on copies of the tensors, bit for bit.
TEST(AdamStep, IsTheUpdateOfAdamW) {
  Generator g(12);
  const Tensor p0 = randn({37}, g), g1 = randn({37}, g), g2 = randn({37}, g);
  Tensor param = p0.clone().requires_grad_();
  optim::AdamW opt({param}, {.lr = 1e-2, .weight_decay = 0.1, .amsgrad = true});
  Tensor p = p0.clone(), m = Tensor::zeros({37}), v = Tensor::zeros({37}), vmax = Tensor::zeros({37});
  for (int t = 1; t <= 2; ++t) {
    const Tensor& gt = t == 1 ? g1 : g2;
    param.set_grad(gt.clone());
    opt.step();
    adam_step_(p, gt, m, v, &vmax, AdamStep{.lr = 1e-2, .weight_decay = 0.1, .step = double(t), .decoupled = true});
    EXPECT_EQ(p.to_vector<float>(), param.detach().to_vector<float>()) << "step " << t;
  }
}

TEST(AdamStep, RejectsStateOfAnotherShapeOrDtype) {
  Tensor p = Tensor::zeros({4}), grad = Tensor::zeros({4}), m = Tensor::zeros({4}), v = Tensor::zeros({5});
  try {
    adam_step_(p, grad, m, v, nullptr, AdamStep{});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("adam_step_: expected exp_avg_sq of param's shape [4]"), std::string::npos)
        << e.what();
  }
  Tensor vd = Tensor::zeros({4}, DType::f64);
  EXPECT_THROW(adam_step_(p, grad, m, vd, nullptr, AdamStep{}), Error);
}

// nn::GRU / LSTM / GRUCell / LSTMCell against torch.nn (outputs, final states and the gradients of
// every parameter, the input and the initial state), with packed-sequence lengths, several layers,
// both directions and both layouts; finite-difference checks in f64; option and shape errors.
#include <gtest/gtest.h>

#include <string>

#include "attn/attn.h"
#include "attn/nn/rnn.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::torch_ref;

namespace {

struct Case {
  nn::RnnMode mode;
  int64_t layers;
  bool bidirectional, batch_first, lengths, h0, bias;
};

std::string name_of(const Case& c) {
  return std::string(c.mode == nn::RnnMode::gru ? "gru" : "lstm") + "_L" + std::to_string(c.layers) +
         (c.bidirectional ? "_bi" : "_uni") + (c.batch_first ? "_bf" : "_tf") + (c.lengths ? "_len" : "") +
         (c.h0 ? "_h0" : "") + (c.bias ? "" : "_nobias");
}

class RnnVsTorch : public ::testing::TestWithParam<Case> {};

TEST_P(RnnVsTorch, ForwardBackward) {
  const Case c = GetParam();
  const int64_t T = 7, B = 4, I = 5, H = 6, D = c.bidirectional ? 2 : 1;
  const bool lstm = c.mode == nn::RnnMode::lstm;
  Generator g(11);
  nn::RnnOptions o{.input_size = I, .hidden_size = H, .num_layers = c.layers, .bias = c.bias,
                   .batch_first = c.batch_first, .bidirectional = c.bidirectional};
  std::shared_ptr<nn::RnnBase> m;
  if (lstm) m = std::make_shared<nn::LSTM>(o, g); else m = std::make_shared<nn::GRU>(o, g);
  Tensor x = randn(c.batch_first ? Shape{B, T, I} : Shape{T, B, I}, g).requires_grad_();
  Tensor h0 = c.h0 ? randn({c.layers * D, B, H}, g).requires_grad_() : Tensor();
  Tensor c0 = c.h0 && lstm ? randn({c.layers * D, B, H}, g).requires_grad_() : Tensor();
  Tensor lengths = c.lengths ? Tensor::from_vector<int64_t>({3, 7, 1, 5}, {B}) : Tensor();
  Tensor gout = randn(c.batch_first ? Shape{B, T, D * H} : Shape{T, B, D * H}, g);
  Tensor gh = randn({c.layers * D, B, H}, g), gc = randn({c.layers * D, B, H}, g);

  nn::RnnOutput r = lstm ? static_cast<nn::LSTM&>(*m).forward(x, h0, c0, lengths)
                         : static_cast<nn::GRU&>(*m).forward(x, h0, lengths);
  Tensor loss = sum(r.output * gout) + sum(r.h_n * gh);
  if (lstm) loss = loss + sum(r.c_n * gc);
  loss.backward();

  test::Tensors in = {{"x", x.detach()}, {"g.out", gout}, {"g.h_n", gh}};
  if (lstm) in["g.c_n"] = gc;
  if (c.h0) in["h0"] = h0.detach();
  if (c.h0 && lstm) in["c0"] = c0.detach();
  if (c.lengths) in["lengths"] = lengths;
  for (auto& [k, p] : m->named_parameters()) in["p." + k] = p.detach();
  auto ref = torch_ref("rnn.rnn", in,
                       {{"mode", lstm ? "lstm" : "gru"}, {"input_size", I}, {"hidden_size", H},
                        {"num_layers", c.layers}, {"bias", c.bias}, {"batch_first", c.batch_first},
                        {"bidirectional", c.bidirectional}});
  const double tol = 1e-5;
  EXPECT_TENSOR_NEAR(r.output, ref.at("out"), tol, tol);
  EXPECT_TENSOR_NEAR(r.h_n, ref.at("h_n"), tol, tol);
  if (lstm) EXPECT_TENSOR_NEAR(r.c_n, ref.at("c_n"), tol, tol);
  EXPECT_TENSOR_NEAR(x.grad(), ref.at("dx"), tol, tol);
  if (c.h0) EXPECT_TENSOR_NEAR(h0.grad(), ref.at("dh0"), tol, tol);
  if (c.h0 && lstm) EXPECT_TENSOR_NEAR(c0.grad(), ref.at("dc0"), tol, tol);
  size_t n = 0;
  for (auto& [k, p] : m->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << k;
    EXPECT_TENSOR_NEAR(p.grad(), ref.at("d." + k), tol, tol) << k;
    ++n;
  }
  EXPECT_EQ(n, size_t(c.layers * D * (c.bias ? 4 : 2)));
}

using M = nn::RnnMode;
INSTANTIATE_TEST_SUITE_P(
    Configs, RnnVsTorch,
    ::testing::Values(Case{M::gru, 1, false, false, false, false, true}, Case{M::gru, 1, false, true, false, true, true},
                      Case{M::gru, 2, true, false, false, true, true}, Case{M::gru, 2, true, true, true, false, true},
                      Case{M::gru, 2, true, false, true, true, true}, Case{M::gru, 1, false, false, true, false, false},
                      Case{M::lstm, 1, false, false, false, false, true},
                      Case{M::lstm, 1, false, true, false, true, true}, Case{M::lstm, 2, true, false, false, true, true},
                      Case{M::lstm, 2, true, true, true, false, true}, Case{M::lstm, 3, true, false, true, true, true},
                      Case{M::lstm, 2, false, true, true, false, false}),
    [](const ::testing::TestParamInfo<Case>& i) { return name_of(i.param); });

class CellVsTorch : public ::testing::TestWithParam<std::pair<nn::RnnMode, bool>> {};

TEST_P(CellVsTorch, ForwardBackward) {
  const auto [mode, bias] = GetParam();
  const bool lstm = mode == nn::RnnMode::lstm;
  const int64_t B = 3, I = 5, H = 7;
  Generator g(5);
  Tensor x = randn({B, I}, g).requires_grad_(), h = randn({B, H}, g).requires_grad_();
  Tensor c = randn({B, H}, g).requires_grad_(), gh = randn({B, H}, g), gc = randn({B, H}, g);
  std::shared_ptr<nn::Module> m;
  Tensor loss, h2, c2;
  if (lstm) {
    auto cell = std::make_shared<nn::LSTMCell>(I, H, bias, g);
    std::tie(h2, c2) = cell->forward(x, h, c);
    loss = sum(h2 * gh) + sum(c2 * gc);
    m = cell;
  } else {
    auto cell = std::make_shared<nn::GRUCell>(I, H, bias, g);
    h2 = cell->forward(x, h);
    loss = sum(h2 * gh);
    m = cell;
  }
  loss.backward();
  test::Tensors in = {{"x", x.detach()}, {"h", h.detach()}, {"g.h", gh}};
  if (lstm) in["c"] = c.detach(), in["g.c"] = gc;
  for (auto& [k, p] : m->named_parameters()) in["p." + k] = p.detach();
  auto ref = torch_ref("rnn.cell", in, {{"mode", lstm ? "lstm" : "gru"}, {"input_size", I}, {"hidden_size", H},
                                        {"bias", bias}});
  EXPECT_TENSOR_NEAR(h2, ref.at("h"), 1e-6, 1e-5);
  EXPECT_TENSOR_NEAR(x.grad(), ref.at("dx"), 1e-6, 1e-5);
  EXPECT_TENSOR_NEAR(h.grad(), ref.at("dh"), 1e-6, 1e-5);
  if (lstm) {
    EXPECT_TENSOR_NEAR(c2, ref.at("c"), 1e-6, 1e-5);
    EXPECT_TENSOR_NEAR(c.grad(), ref.at("dc"), 1e-6, 1e-5);
  }
  for (auto& [k, p] : m->named_parameters()) EXPECT_TENSOR_NEAR(p.grad(), ref.at("d." + k), 1e-6, 1e-5) << k;
}

INSTANTIATE_TEST_SUITE_P(Modes, CellVsTorch,
                         ::testing::Values(std::pair{nn::RnnMode::gru, true}, std::pair{nn::RnnMode::gru, false},
                                           std::pair{nn::RnnMode::lstm, true}, std::pair{nn::RnnMode::lstm, false}));

TEST(Rnn, ParameterNamesInitAndShapes) {
  Generator g(1);
  nn::LSTM lstm({.input_size = 3, .hidden_size = 4, .num_layers = 2, .bidirectional = true}, g);
  std::vector<std::string> names;
  for (auto& [k, p] : lstm.named_parameters()) names.push_back(k);
  const std::vector<std::string> want = {
      "weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l0_reverse", "weight_hh_l0_reverse",
      "bias_ih_l0_reverse", "bias_hh_l0_reverse", "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1",
      "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"};
  EXPECT_EQ(names, want);
  EXPECT_EQ(lstm.named_parameters()[8].second.shape(), (Shape{16, 8}));
  for (auto& [k, p] : lstm.named_parameters()) {   // U(-1/2, 1/2)
    EXPECT_LE(max(abs(p)).item(), 0.5) << k;
    EXPECT_GT(max(abs(p)).item(), 0.3) << k;
  }
  auto r = lstm.forward(Tensor::zeros({5, 2, 3}));
  EXPECT_EQ(r.output.shape(), (Shape{5, 2, 8}));
  EXPECT_EQ(r.h_n.shape(), (Shape{4, 2, 4}));
  EXPECT_EQ(r.c_n.shape(), (Shape{4, 2, 4}));
}

TEST(Rnn, Messages) {
  nn::GRU gru({.input_size = 3, .hidden_size = 4, .num_layers = 2});
  EXPECT_EQ(error_of([&] { gru.forward(Tensor::zeros({5, 2, 4})); }),
            "GRU: expected input of shape (T, B, 3), got [5, 2, 4]");
  EXPECT_EQ(error_of([&] { gru.forward(Tensor::zeros({5, 2, 3}), Tensor::zeros({1, 2, 4})); }),
            "GRU: expected h0 of shape [2, 2, 4], got [1, 2, 4]");
  const Tensor lengths = Tensor::from_vector<int64_t>({5, 6}, {2});
  EXPECT_EQ(error_of([&] { gru.forward(Tensor::zeros({5, 2, 3}), Tensor(), lengths); }),
            "GRU: expected every length in [1, 5], got 6 at row 1");
  EXPECT_EQ(error_of([&] { nn::LSTM({.input_size = 3, .hidden_size = 0}); }),
            "LSTM: expected positive input_size and hidden_size, got 3 and 0");
}

// Finite differences in f64 through lengths, two layers and both directions.
TEST(Rnn, GradcheckF64) {
  for (auto mode : {nn::RnnMode::gru, nn::RnnMode::lstm}) {
    Generator g(3);
    nn::RnnOptions o{.input_size = 3, .hidden_size = 2, .num_layers = 2, .bidirectional = true, .dtype = DType::f64};
    std::shared_ptr<nn::RnnBase> m;
    if (mode == nn::RnnMode::lstm) m = std::make_shared<nn::LSTM>(o, g); else m = std::make_shared<nn::GRU>(o, g);
    const Tensor lengths = Tensor::from_vector<int64_t>({4, 2}, {2});
    auto f = [&](const std::vector<Tensor>& in) {
      nn::RnnOutput r = mode == nn::RnnMode::lstm ? static_cast<nn::LSTM&>(*m).forward(in[0], Tensor(), Tensor(), lengths)
                                                  : static_cast<nn::GRU&>(*m).forward(in[0], Tensor(), lengths);
      return concat({r.output.flatten(), r.h_n.flatten()}, 0);
    };
    std::vector<Tensor> in = {randn({4, 2, 3}, g, DType::f64).requires_grad_()};
    for (auto& p : m->parameters()) in.push_back(p);
    EXPECT_TRUE(test::gradcheck(f, in));
  }
}

TEST(Rnn, DropoutBetweenLayersOnlyInTraining) {
  Generator g(2), dg(9);
  nn::GRU gru({.input_size = 3, .hidden_size = 8, .num_layers = 2, .dropout = 0.5}, g, &dg);
  const Tensor x = randn({4, 2, 3}, g);
  gru.eval();
  const Tensor a = gru.forward(x).output, b = gru.forward(x).output;
  EXPECT_TENSOR_NEAR(a, b, 0, 0);
  gru.train();
  const Tensor c = gru.forward(x).output;
  EXPECT_FALSE(test::near(a, c, 1e-6, 0));
}

}  // namespace

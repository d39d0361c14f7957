// int8 inference: attn::quantize_weight_int8 and the activation quantization inside linear() give
// the codes and scales of torch.quantize_per_channel, and linear() over an int8 weight equals the
// exact integer product scaled back (PyTorch's, in float64), packed or plain, with the CPU's own
// activation range (8 bits with VNNI; ctest runs this binary again with oneDNN capped at AVX2, as
// ops/int8_linear_avx2, where 7-bit activations keep its 16-bit pair sums exact). Also
// nn::quantize_linear_weights_int8: a save / load round trip, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "attn/attn.h"
#include "attn/autograd/grad_mode.h"
#include "attn/io/safetensors.h"
#include "attn/nn/linear.h"
#include "attn/ops/matmul.h"
#include "attn/ops/quantize.h"
#include "errors.h"
#include "files.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;

namespace {

struct Case {
  int64_t m, k, n;
  bool bias;
};

// x with some structure the quantizer must handle: a row of zeros, a row with one large outlier.
Tensor input(int64_t m, int64_t k, Generator& g) {
  Tensor x = randn({m, k}, g);
  if (m > 2) {
    x.slice(0, 1, 2).fill_(0.0);
    x.slice(0, 2, 3).slice(1, 0, 1).fill_(40.0);
  }
  return x;
}

}  // namespace

TEST(Int8Linear, CodesAndOutputsEqualPyTorch) {
  NoGradGuard ng;
  Generator g(11);
  const int qmax = int8_activation_max();
  std::printf("  activation codes in [-%d, %d] (%s)\n", qmax, qmax,
              qmax == 127 ? "exact 32-bit sums: VNNI or AMX" : "16-bit pair sums: 7-bit activations");
  for (const Case& c : {Case{5, 33, 17, true}, Case{197, 192, 576, true}, Case{3, 768, 1000, false},
                        Case{64, 1, 3, true}, Case{16, 3072, 768, true}, Case{1, 50, 2, false}}) {
    SCOPED_TRACE("m " + std::to_string(c.m) + " k " + std::to_string(c.k) + " n " + std::to_string(c.n));
    const Tensor x = input(c.m, c.k, g), w = randn({c.n, c.k}, g) * 0.05;
    const Tensor b = c.bias ? randn({c.n}, g) : Tensor();
    test::Tensors in{{"x", x}, {"w", w}};
    if (c.bias) in.emplace("b", b);
    const auto ref = test::torch_ref("quantize.linear_int8", in, {{"qmax", qmax}});

    Int8Weight q = quantize_weight_int8(w);
    EXPECT_TRUE(test::near(q.weight.to(DType::f32), ref.at("qw"), 0, 0)) << "weight codes";
    EXPECT_TRUE(test::near(q.scale, ref.at("sw"), 0, 0)) << "weight scales";
    set_int8_weight_scale(q.weight, q.scale);
    const Tensor y = linear(x, q.weight, b);
    ASSERT_EQ(y.dtype(), DType::f32);
    ASSERT_EQ(y.shape(), (Shape{c.m, c.n}));
    // f32 rounding of the int32 sum (beyond 2^24), of scale_m · scale_n and of the final fma.
    const double tol = 1e-6 * max(abs(ref.at("y"))).item() + 1e-6;
    EXPECT_TRUE(test::near(y, ref.at("y"), tol, 1e-6));

    // Packed for the GEMM (where oneDNN has a blocked layout for it): the same bits.
    Tensor wp = q.weight.clone();
    set_int8_weight_scale(wp, q.scale);
    const bool packed = pack_linear_weight(wp);
    const Tensor yp = linear(x, wp, b);
    EXPECT_TRUE(test::near(yp, y, 0, 0)) << (packed ? "packed" : "left plain");
    if (packed) {
      unpack_linear_weight(wp);
      EXPECT_TRUE(test::near(wp.to(DType::f32), q.weight.to(DType::f32), 0, 0)) << "unpacked";
    }
  }
}

TEST(Int8Linear, BatchedInputAndBf16InputAndRowsAlone) {
  NoGradGuard ng;
  Generator g(5);
  const Tensor w = randn({40, 24}, g);
  Int8Weight q = quantize_weight_int8(w);
  set_int8_weight_scale(q.weight, q.scale);
  const Tensor x = randn({2, 7, 24}, g), b = randn({40}, g);
  const Tensor y = linear(x, q.weight, b);
  ASSERT_EQ(y.shape(), (Shape{2, 7, 40}));
  // Each row is quantized on its own: a row alone gives the same bits as in the batch.
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t t = 0; t < 7; t += 3) {
      const Tensor one = linear(x.slice(0, i, i + 1).slice(1, t, t + 1), q.weight, b);
      EXPECT_TRUE(test::near(one.reshape({40}), y.select(0, i).select(0, t), 0, 0));
    }
  // bf16 activations are widened first.
  const Tensor xb = x.to(DType::bf16);
  EXPECT_TRUE(test::near(linear(xb, q.weight, b), linear(xb.to(DType::f32), q.weight, b), 0, 0));
  // Close to the f32 layer: the cosine of the outputs.
  const Tensor yf = linear(x, w, b);
  const double cos = sum(y * yf).item() / std::sqrt(sum(y * y).item() * sum(yf * yf).item());
  EXPECT_GT(cos, 0.999);
}

TEST(Int8Linear, Errors) {
  Generator g(3);
  const Tensor w = randn({8, 16}, g), x = randn({2, 16}, g);
  Int8Weight q = quantize_weight_int8(w);
  {
    NoGradGuard ng;
    EXPECT_NE(error_of([&] { linear(x, q.weight); }).find("carries no scales"), std::string::npos);
  }
  set_int8_weight_scale(q.weight, q.scale);
  const Tensor xg = x.clone().requires_grad_(true);
  EXPECT_NE(error_of([&] { linear(xg, q.weight); }).find("no gradient flows"), std::string::npos);
  EXPECT_NE(error_of([&] { set_int8_weight_scale(q.weight, Tensor::ones({7})); }).find("shape [8]"), std::string::npos);
  Tensor wf = w.clone();
  EXPECT_NE(error_of([&] { set_int8_weight_scale(wf, q.scale); }).find("expected an i8"), std::string::npos);
  Tensor bad = w.clone();
  bad.slice(0, 2, 3).fill_(NAN);
  EXPECT_NE(error_of([&] { quantize_weight_int8(bad); }).find("row 2"), std::string::npos);
}

TEST(Int8Linear, QuantizedModulesSaveAndLoad) {
  NoGradGuard ng;
  Generator g(9);
  manual_seed(4);
  auto make = [] {
    auto m = std::make_shared<nn::Sequential>();
    m->push_back(std::make_shared<nn::Linear>(24, 48));
    m->push_back(std::make_shared<nn::Linear>(48, 10));
    return m;
  };
  auto f32 = make();
  const Tensor x = randn({6, 24}, g);
  auto q = make();
  q->load_state_dict(f32->state_dict());
  const int64_t saved = nn::quantize_linear_weights_int8(*q, {"1"});   // the last layer left f32
  EXPECT_EQ(saved, 24 * 48 * 3 - 48 * 4);
  const io::TensorList sd = q->state_dict();
  std::vector<std::string> names;
  for (const auto& [n, t] : sd) names.push_back(n + ":" + dtype_name(t.dtype()));
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight:i8", "0.bias:f32", "0.weight_scale:f32", "1.weight:f32",
                                              "1.bias:f32"}));
  const Tensor y = q->forward(x);
  const std::string path = test::fresh_tmp_dir("attn_int8_linear_test", "save") + "/q.safetensors";
  io::save_safetensors(path, sd);

  // Loaded into a model made int8 where the file is: the same outputs, bit for bit (packed too).
  auto r = make();
  const io::SafetensorsReader file(path);
  EXPECT_EQ(nn::make_linear_weights_int8(*r, [&](const std::string& name) { return name == "0"; }), 1);
  r->load_state_dict(file);
  EXPECT_TRUE(test::near(r->forward(x), y, 0, 0));
  nn::pack_linear_weights(*r);
  EXPECT_TRUE(test::near(r->forward(x), y, 0, 0)) << "packed";

  // An f32 model does not take int8 codes, nor an int8 model f32 weights.
  auto plain = make();
  nn::LoadOptions lenient;
  lenient.strict = false;
  EXPECT_NE(error_of([&] { plain->load_state_dict(io::SafetensorsReader(path), lenient); })
                .find("int8 weights load only from int8 weights"),
            std::string::npos);
  auto r2 = make();
  nn::make_linear_weights_int8(*r2, [](const std::string& name) { return name == "0"; });
  io::TensorList fsd = f32->state_dict();
  fsd.emplace_back("0.weight_scale", Tensor::ones({48}));
  EXPECT_NE(error_of([&] { r2->load_state_dict(fsd); }).find("0.weight is i8 in the model and f32"), std::string::npos);
}

// A table and an output layer that share it (BERT's word embeddings and MLM decoder): both read the
// same int8 codes, the embedding per row, the Linear per output channel (the same rows); the tie holds
// through a save and a load into a model made int8.
TEST(Int8Linear, EmbeddingTiedToAnOutputLayer) {
  NoGradGuard ng;
  manual_seed(6);
  struct Tied : nn::Module {
    std::shared_ptr<nn::Embedding> emb = register_module("emb", std::make_shared<nn::Embedding>(50, 16));
    std::shared_ptr<nn::Linear> out = register_module("out", std::make_shared<nn::Linear>(16, 50, false));
    Tied() { out->weight = emb->weight; }
  };
  Tied t;
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{3, 0, 49, 3}, {2, 2});
  const Tensor f32 = t.emb->forward(ids);
  EXPECT_EQ(nn::quantize_embedding_int8(t, "emb"), 50 * 16 * 3 - 50 * 4);
  ASSERT_EQ(t.emb->weight.dtype(), DType::i8);
  EXPECT_TRUE(t.out->weight.is_same(t.emb->weight)) << "still tied";
  const Tensor rows = t.emb->forward(ids);
  const Tensor expect = dequantize_weight_int8(t.emb->weight, int8_weight_scale(t.emb->weight));
  EXPECT_TRUE(test::near(rows.select(0, 0).select(0, 1), expect.select(0, 0), 0, 0));
  EXPECT_TRUE(test::near(rows, f32, 0.01 * max(abs(f32)).item(), 0));
  const Tensor logits = t.out->forward(rows.reshape({4, 16}));
  EXPECT_EQ(logits.shape(), (Shape{4, 50}));
  const io::TensorList sd = t.state_dict();
  std::vector<std::string> names;
  for (const auto& [n, x] : sd) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"emb.weight", "emb.weight_scale", "out.weight"}));

  const std::string path = test::fresh_tmp_dir("attn_int8_linear_test", "tied") + "/t.safetensors";
  io::save_safetensors(path, sd);
  Tied r;
  EXPECT_EQ(nn::make_linear_weights_int8(r, [](const std::string& n) { return n == "emb"; }), 1);
  EXPECT_TRUE(r.out->weight.is_same(r.emb->weight));
  r.load_state_dict(io::load_safetensors(path).tensors);
  EXPECT_TRUE(test::near(r.emb->forward(ids), rows, 0, 0));
  EXPECT_TRUE(test::near(r.out->forward(rows.reshape({4, 16})), logits, 0, 0));
  // A table shared with something that is no Linear of the module stays as it is.
  nn::Embedding lone(10, 4);
  const Tensor keep = lone.weight;
  EXPECT_EQ(nn::quantize_embedding_int8(lone, ""), 0);
  EXPECT_EQ(lone.weight.dtype(), DType::f32);
}

// Layer norm: forward + backward (dx, dweight, dbias) against PyTorch on seeded inputs, every ISA
// path of the f32 kernels against the reference kernel at sizes around the vector widths,
// special values, determinism across thread counts, finite differences in f64, error messages.
#include <gtest/gtest.h>

#include <cmath>

#include "attn/attn.h"
#include "attn/ops/norm.h"
#include "backend/reference/norm_reference.h"
#include "errors.h"
#include "isa.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::torch_ref;

namespace {

enum class Affine { both, none, weight_only };
const char* affine_name(Affine a) { return a == Affine::both ? "w+b" : a == Affine::none ? "none" : "w"; }

const int64_t kSizes[] = {1, 2, 3, 5, 7, 8, 9, 13, 15, 16, 17, 23, 31, 32, 33, 47, 64, 97, 192, 768, 1023};

}  // namespace

TEST(LayerNorm, MatchesTorch) {
  Generator g(201);
  struct Case { Shape shape; Affine affine; double eps; };
  const std::vector<Case> cases = {
      {{8, 197, 768}, Affine::both, 1e-5}, {{128, 50, 192}, Affine::both, 1e-6}, {{3, 7}, Affine::both, 1e-5},
      {{3, 7}, Affine::none, 1e-5},        {{5, 17}, Affine::weight_only, 1e-5}, {{4, 1}, Affine::both, 1e-5},
      {{6, 5}, Affine::both, 1e-5},        {{2, 33}, Affine::none, 1e-5},        {{3, 1023}, Affine::both, 1e-5},
      {{77, 33}, Affine::both, 1e-5}};
  for (const auto& c : cases) {
    const int64_t C = c.shape.back();
    Tensor x = randn(c.shape, g) * 2.0 + 0.5;
    Tensor w = c.affine != Affine::none ? randn({C}, g) : Tensor();
    Tensor b = c.affine == Affine::both ? randn({C}, g) : Tensor();
    Tensor gout = randn(c.shape, g);
    test::Tensors in = {{"x", x}, {"g", gout}};
    if (w.defined()) in["w"] = w;
    if (b.defined()) in["b"] = b;
    auto ref = torch_ref("norm.layer_norm", in, {{"eps", c.eps}});
    Tensor xx = x.clone().requires_grad_();
    Tensor ww = w.defined() ? w.clone().requires_grad_() : Tensor();
    Tensor bb = b.defined() ? b.clone().requires_grad_() : Tensor();
    Tensor y = layer_norm(xx, ww, bb, c.eps);
    y.backward(gout);
    const std::string ctx = shape_str(c.shape) + " " + affine_name(c.affine);
    // With C = 1, x - mean is 0 and rstd = 1/sqrt(eps) = 316 amplifies any rounding (PyTorch's
    // dx there is ~1e-4 instead of 0).
    const double atol = C == 1 ? 2e-4 : 1e-5;
    EXPECT_TENSOR_NEAR(y, ref.at("out"), atol, 1e-5) << ctx;
    EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), atol, 1e-4) << ctx;
    // dweight / dbias sum over up to 6400 rows in f32 on both sides.
    if (ww.defined()) EXPECT_TENSOR_NEAR(ww.grad(), ref.at("dw"), 2e-4, 1e-4) << ctx;
    if (bb.defined()) EXPECT_TENSOR_NEAR(bb.grad(), ref.at("db"), 2e-4, 1e-4) << ctx;
  }
}

TEST(LayerNorm, MatchesTorchF64) {
  Generator g(202);
  Tensor x = randn({6, 13}, g, DType::f64), w = randn({13}, g, DType::f64), b = randn({13}, g, DType::f64);
  Tensor gout = randn({6, 13}, g, DType::f64);
  auto ref = torch_ref("norm.layer_norm", {{"x", x}, {"w", w}, {"b", b}, {"g", gout}}, {{"eps", 1e-5}});
  Tensor xx = x.clone().requires_grad_(), ww = w.clone().requires_grad_(), bb = b.clone().requires_grad_();
  Tensor y = layer_norm(xx, ww, bb);
  y.backward(gout);
  EXPECT_TENSOR_NEAR(y, ref.at("out"), 1e-12, 1e-12);
  EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), 1e-12, 1e-12);
  EXPECT_TENSOR_NEAR(ww.grad(), ref.at("dw"), 1e-12, 1e-12);
  EXPECT_TENSOR_NEAR(bb.grad(), ref.at("db"), 1e-12, 1e-12);
}

TEST(LayerNorm, EveryIsaMatchesReference) {
  test::IsaRestore restore;
  Generator g(203);
  for (int64_t C : kSizes) {
    const int64_t rows = 37;   // more than one 32-row block of partial sums
    Tensor x = randn({rows, C}, g) * 3.0 - 1.0;
    Tensor w = randn({C}, g), b = randn({C}, g);
    Tensor dy = randn({rows, C}, g);
    Tensor ry = Tensor::empty({rows, C}), rm = Tensor::empty({rows}), rr = Tensor::empty({rows});
    reference::layer_norm_forward<float>(x.data<float>(), nullptr, w.data<float>(), b.data<float>(), nullptr,
                                         ry.data<float>(), rm.data<float>(), rr.data<float>(), rows, C, 1e-5);
    Tensor rdx = Tensor::empty({rows, C}), rdw = Tensor::empty({C}), rdb = Tensor::empty({C});
    reference::layer_norm_backward<float>(dy.data<float>(), x.data<float>(), rm.data<float>(), rr.data<float>(),
                                          w.data<float>(), rdx.data<float>(), rdw.data<float>(), rdb.data<float>(),
                                          rows, C);
    for (Isa isa : test::supported_isas()) {
      set_isa(isa);
      Tensor xx = x.clone().requires_grad_(), ww = w.clone().requires_grad_(), bb = b.clone().requires_grad_();
      Tensor y = layer_norm(xx, ww, bb);
      y.backward(dy);
      const std::string ctx = "C=" + std::to_string(C) + " isa " + isa_name(isa);
      // C = 1: dx is 0 up to rounding amplified by rstd = 316 (FMA contraction differs per path).
      EXPECT_TENSOR_NEAR(y, ry, 1e-5, 1e-5) << ctx;
      EXPECT_TENSOR_NEAR(xx.grad(), rdx, C == 1 ? 1e-4 : 1e-5, 1e-4) << ctx;
      EXPECT_TENSOR_NEAR(ww.grad(), rdw, 1e-5, 1e-5) << ctx;
      EXPECT_TENSOR_NEAR(bb.grad(), rdb, 1e-5, 1e-5) << ctx;
    }
  }
}

// A constant row (y = bias), NaN in the tail, a large common offset (1e4), inf: NaN rows where
// PyTorch has them, and the finite rows close to the f64 reference (PyTorch itself is off by
// 3e-4 on the offset row, so it is compared more loosely).
TEST(LayerNorm, SpecialValues) {
  test::IsaRestore restore;
  const int64_t C = 19;
  std::vector<float> data;
  for (int r = 0; r < 5; ++r)
    for (int i = 0; i < C; ++i) data.push_back(float((i * 7 + r) % 11) - 5.f);
  for (int i = 0; i < C; ++i) data[size_t(0 * C + i)] = 3.f;
  data[size_t(1 * C + 17)] = NAN;
  for (int i = 0; i < C; ++i) data[size_t(2 * C + i)] = 1e4f + float(i % 3);
  data[size_t(3 * C + 2)] = INFINITY;
  Tensor x = Tensor::from_vector<float>(data, {5, C});
  Generator g(204);
  Tensor w = randn({C}, g), b = randn({C}, g);
  auto ref = torch_ref("norm.layer_norm", {{"x", x}, {"w", w}, {"b", b}, {"g", Tensor::ones({5, C})}}, {{"eps", 1e-5}});
  Tensor exact = layer_norm(x.to(DType::f64), w.to(DType::f64), b.to(DType::f64)).to(DType::f32);
  for (Isa isa : test::supported_isas()) {
    set_isa(isa);
    Tensor y = layer_norm(x, w, b);
    EXPECT_TENSOR_NEAR(y, ref.at("out"), 1e-3, 1e-3) << isa_name(isa);
    EXPECT_TENSOR_NEAR(y, exact, 2e-6, 1e-6) << isa_name(isa);
  }
}

TEST(LayerNorm, WeightGradientsDoNotDependOnThreads) {
  Generator g(205);
  Tensor x = randn({300, 77}, g), w = randn({77}, g), b = randn({77}, g), dy = randn({300, 77}, g);
  std::vector<std::vector<float>> got;
  const int saved = get_num_threads();
  for (int nt : {1, 2, 3}) {
    set_num_threads(nt);
    Tensor ww = w.clone().requires_grad_(), bb = b.clone().requires_grad_();
    layer_norm(x, ww, bb).backward(dy);
    std::vector<float> v = ww.grad().to_vector<float>(), vb = bb.grad().to_vector<float>();
    v.insert(v.end(), vb.begin(), vb.end());
    got.push_back(v);
  }
  set_num_threads(saved);
  EXPECT_EQ(got[0], got[1]);
  EXPECT_EQ(got[0], got[2]);
}

TEST(LayerNorm, NonContiguousInput) {
  Generator g(206);
  Tensor x = randn({20, 9}, g).t();   // (9, 20)
  Tensor w = randn({20}, g), b = randn({20}, g);
  EXPECT_TENSOR_NEAR(layer_norm(x, w, b), layer_norm(x.contiguous(), w, b), 0, 0);
}

TEST(LayerNorm, FiniteDifferences) {
  Generator g(207);
  Tensor x = randn({4, 6}, g, DType::f64), w = randn({6}, g, DType::f64), b = randn({6}, g, DType::f64);
  EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2]); },
                              {x, w, b}));
  EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0], Tensor(), Tensor(), 1e-3); },
                              {x}));
}

TEST(LayerNorm, ErrorMessages) {
  Tensor x = Tensor::zeros({2, 768});
  EXPECT_EQ(error_of([&] { layer_norm(x, Tensor::ones({512}), Tensor()); }),
            "layer_norm: expected weight of shape [768], got [512]");
  EXPECT_EQ(error_of([&] { layer_norm(x, Tensor(), Tensor::zeros({768, 1})); }),
            "layer_norm: expected bias of shape [768], got [768, 1]");
  EXPECT_EQ(error_of([&] { layer_norm(x, Tensor::ones({768}, DType::f64), Tensor()); }),
            "layer_norm: expected weight of dtype f32, got f64");
  EXPECT_EQ(error_of([&] { layer_norm(Tensor::zeros({2, 3}, DType::i32), Tensor(), Tensor()); }),
            "layer_norm: expected a f32 or f64 tensor, got i32");
  EXPECT_EQ(error_of([&] { layer_norm(Tensor::scalar(1.0), Tensor(), Tensor()); }),
            "layer_norm: expected an input with at least 1 dim, got shape []");
  EXPECT_EQ(error_of([&] { layer_norm(Tensor::zeros({3, 0}), Tensor(), Tensor()); }),
            "layer_norm: expected a non-empty last dim, got shape [3, 0]");
  EXPECT_EQ(error_of([&] { layer_norm(Tensor(), Tensor(), Tensor()); }),
            "layer_norm: expected an input, got an undefined tensor");
}

// batch_norm against PyTorch's F.batch_norm: train and eval, with and without affine parameters
// and running statistics (the in-place running updates compared too), f32 and f64, 2-d to 5-d
// inputs; the token layout (N, C) read row by row with the bits of a channel-at-a-time walk, at any
// thread count; finite differences in f64; error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attn/attn.h"
#include "attn/ops/batch_norm.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::torch_ref;

TEST(BatchNorm, MatchesTorchTrainAndEval) {
  Generator gen(301);
  const Shape shapes[] = {{6, 5}, {300, 48}, {4, 3, 7}, {3, 7, 5, 6}, {2, 4, 3, 5, 3}, {16, 32, 9, 9}};
  for (const Shape& s : shapes)
    for (DType dt : {DType::f32, DType::f64})
      for (bool training : {true, false})
        for (bool affine : {true, false})
          for (bool running : {true, false}) {
            if (!training && !running) continue;   // eval needs running stats
            const int64_t C = s[1];
            Tensor x = randn(s, gen, dt) * 2.0 + 0.7;
            Tensor w = affine ? randn({C}, gen, dt) : Tensor();
            Tensor b = affine ? randn({C}, gen, dt) : Tensor();
            Tensor rm = running ? randn({C}, gen, dt) : Tensor();
            Tensor rv = running ? rand({C}, gen, dt) + 0.5 : Tensor();
            Tensor g = randn(s, gen, dt);
            test::Tensors in{{"x", x}, {"g", g}};
            if (affine) { in["w"] = w; in["b"] = b; }
            if (running) { in["rm"] = rm; in["rv"] = rv; }
            nlohmann::json args{{"training", training}, {"momentum", 0.3}, {"eps", 1e-3}};
            auto ref = torch_ref("conv.batch_norm", in, args);

            Tensor xx = x.clone().requires_grad_();
            Tensor ww = affine ? w.clone().requires_grad_() : Tensor();
            Tensor bb = affine ? b.clone().requires_grad_() : Tensor();
            Tensor rm2 = running ? rm.clone() : Tensor(), rv2 = running ? rv.clone() : Tensor();
            Tensor y = batch_norm(xx, rm2, rv2, ww, bb, training, 0.3, 1e-3);
            y.backward(g);
            const double tol = dt == DType::f32 ? 2e-5 : 1e-11;
            const std::string ctx = shape_str(s) + " " + dtype_name(dt) + (training ? " train" : " eval") +
                                    (affine ? " affine" : "") + (running ? " running" : "");
            EXPECT_TENSOR_NEAR(y, ref.at("out"), tol, tol) << ctx;
            EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), tol, tol) << ctx;
            if (affine) {
              EXPECT_TENSOR_NEAR(ww.grad(), ref.at("dw"), tol * 10, tol) << ctx;
              EXPECT_TENSOR_NEAR(bb.grad(), ref.at("db"), tol * 10, tol) << ctx;
            }
            if (running) {
              EXPECT_TENSOR_NEAR(rm2, ref.at("rm"), tol, tol) << ctx;
              EXPECT_TENSOR_NEAR(rv2, ref.at("rv"), tol, tol) << ctx;
            }
          }
}

TEST(BatchNorm, TokensAddEachChannelInRowOrder) {
  // Tokens (N, C) are read row by row for a range of channels; each channel's statistics are still
  // its values added one at a time in row order, in double: the bits of a channel-at-a-time walk.
  Generator gen(305);
  const int64_t N = 517, C = 24;
  const double eps = 1e-5;
  Tensor x = randn({N, C}, gen) * 3.0 + 0.5, w = randn({C}, gen), b = randn({C}, gen);
  Tensor y = batch_norm(x, Tensor(), Tensor(), w, b, true, 0.1, eps);
  const float* xp = x.data<float>();
  std::vector<float> want(size_t(N * C));
  for (int64_t c = 0; c < C; ++c) {
    double s = 0, q = 0;
    for (int64_t n = 0; n < N; ++n) s += double(xp[n * C + c]);
    const double m = s / double(N);
    for (int64_t n = 0; n < N; ++n) {
      const double d = double(xp[n * C + c]) - m;
      q += d * d;
    }
    const double is = 1.0 / std::sqrt(q / double(N) + eps), wc = double(w.data<float>()[c]);
    const float scale = float(wc * is), shift = float(double(b.data<float>()[c]) - m * wc * is);
    for (int64_t n = 0; n < N; ++n) want[size_t(n * C + c)] = xp[n * C + c] * scale + shift;
  }
  EXPECT_TENSOR_NEAR(y, Tensor::from_vector<float>(want, {N, C}), 0, 0);
}

TEST(BatchNorm, IndependentOfThreadCount) {
  Generator gen(306);
  for (const Shape& s : {Shape{613, 40}, Shape{9, 40, 5}}) {
    const int64_t C = s[1];
    Tensor x = randn(s, gen), g = randn(s, gen), w = randn({C}, gen), b = randn({C}, gen);
    std::vector<Tensor> first;
    const int prev = get_num_threads();
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      Tensor xx = x.clone().requires_grad_(), ww = w.clone().requires_grad_(), bb = b.clone().requires_grad_();
      Tensor rm = Tensor::zeros({C}), rv = Tensor::ones({C});
      Tensor y = batch_norm(xx, rm, rv, ww, bb, true);
      y.backward(g);
      const std::vector<Tensor> got{y, xx.grad(), ww.grad(), bb.grad(), rm, rv};
      if (first.empty()) first = got;
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_TENSOR_NEAR(got[i], first[i], 0, 0) << shape_str(s) << ", " << threads << " threads, output " << i;
    }
    set_num_threads(prev);
  }
}

TEST(BatchNorm, RunningStatsUpdatedInPlaceThroughViews) {
  // Buffers that are views of one storage, as a module's state: the update lands in the storage.
  Generator gen(302);
  Tensor buf = Tensor::zeros({2, 4});
  buf.select(0, 1).fill_(1.0);
  Tensor rm = buf.select(0, 0), rv = buf.select(0, 1);
  Tensor x = randn({8, 4, 3}, gen);
  auto ref = torch_ref("conv.batch_norm", {{"x", x}, {"g", Tensor::ones({8, 4, 3})}, {"rm", rm.contiguous()},
                                           {"rv", rv.contiguous()}},
                       {{"training", true}, {"momentum", 0.1}, {"eps", 1e-5}});
  batch_norm(x, rm, rv, Tensor(), Tensor(), true);
  EXPECT_TENSOR_NEAR(buf.select(0, 0), ref.at("rm"), 1e-6, 1e-6);
  EXPECT_TENSOR_NEAR(buf.select(0, 1), ref.at("rv"), 1e-6, 1e-6);
}

TEST(BatchNorm, SpecialValuesAsTorch) {
  Generator gen(303);
  Tensor x = randn({4, 3, 5}, gen);
  x.data<float>()[7] = NAN;          // channel 1: all NaN
  x.data<float>()[35] = INFINITY;    // channel 1 of sample 2
  Tensor big = randn({4, 3, 5}, gen) * 1e6 + 1e7;   // large mean: needs a stable variance
  for (const Tensor& in : {x, big}) {
    auto ref = torch_ref("conv.batch_norm", {{"x", in}, {"g", Tensor::ones({4, 3, 5})}},
                         {{"training", true}, {"momentum", 0.1}, {"eps", 1e-5}});
    EXPECT_TENSOR_NEAR(batch_norm(in, Tensor(), Tensor(), Tensor(), Tensor(), true), ref.at("out"), 1e-4, 1e-4);
  }
}

TEST(BatchNorm, FiniteDifferencesF64) {
  Generator gen(304);
  Tensor x = randn({4, 3, 2, 3}, gen, DType::f64), w = randn({3}, gen, DType::f64), b = randn({3}, gen, DType::f64);
  for (bool training : {true, false}) {
    EXPECT_TRUE(test::gradcheck(
        [&](const std::vector<Tensor>& in) {
          Tensor rm = Tensor::full({3}, 0.2, DType::f64), rv = Tensor::full({3}, 1.5, DType::f64);
          return batch_norm(in[0], rm, rv, in[1], in[2], training);
        },
        {x, w, b}))
        << (training ? "train" : "eval");
  }
  EXPECT_TRUE(test::gradcheck(
      [&](const std::vector<Tensor>& in) { return batch_norm(in[0], Tensor(), Tensor(), Tensor(), Tensor(), true); },
      {x}));
}

TEST(BatchNorm, ErrorMessages) {
  Tensor x = Tensor::zeros({4, 3, 5, 5});
  EXPECT_EQ(error_of([&] { batch_norm(Tensor::zeros({5}), Tensor(), Tensor(), Tensor(), Tensor(), true); }),
            "batch_norm: expected input with at least 2 dims (N, C, ...), got shape [5]");
  EXPECT_EQ(error_of([&] { batch_norm(x, Tensor(), Tensor(), Tensor::ones({4}), Tensor(), true); }),
            "batch_norm: expected weight of shape [3], got [4]");
  EXPECT_EQ(error_of([&] { batch_norm(x, Tensor::zeros({3}), Tensor::ones({2}), Tensor(), Tensor(), true); }),
            "batch_norm: expected running_var of shape [3], got [2]");
  EXPECT_EQ(error_of([&] { batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false); }),
            "batch_norm: running_mean and running_var are required in eval mode");
  EXPECT_EQ(error_of([&] { batch_norm(Tensor::zeros({1, 4}), Tensor(), Tensor(), Tensor(), Tensor(), true); }),
            "batch_norm: expected more than 1 value per channel when training, got input shape [1, 4]");
  EXPECT_EQ(error_of([&] { batch_norm(x, Tensor(), Tensor(), Tensor::ones({3}, DType::f64), Tensor(), true); }),
            "batch_norm: input is f32 but weight is f64");
  EXPECT_EQ(error_of([&] { batch_norm(x, Tensor::zeros({3}), Tensor(), Tensor(), Tensor(), true); }),
            "batch_norm: expected running_mean and running_var both defined or both undefined");
}

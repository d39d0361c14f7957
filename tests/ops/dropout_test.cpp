// dropout: against a naive per-element oracle on philox_uniform (sizes around the group of 4 and
// primes), keep-rate statistics, thread-count independence, backward reusing the forward's mask,
// p = 0 / p = 1 / eval mode, special values (as PyTorch: out = x * (keep ? 1/(1-p) : 0)), errors.
#include <gtest/gtest.h>

#include <cmath>

#include "attn/attn.h"
#include "attn/ops/dropout.h"
#include "errors.h"
#include "isa.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;

namespace {

// The definition, element by element: the oracle for the grouped kernel.
template <class T>
Tensor dropout_oracle(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  std::vector<T> v = x.to_vector<T>();
  const T scale = T(1) / T(1 - p);
  for (size_t i = 0; i < v.size(); ++i) {
    const bool keep = double(philox_uniform(seed, offset, i)) >= p;
    v[i] = v[i] * (keep ? scale : T(0));
  }
  return Tensor::from_vector<T>(v, x.shape());
}

}  // namespace

// Every ISA path the CPU runs, at sizes around the 4-element Philox group and the 32-element
// AVX2 block (smaller, equal, multiples, larger; primes).
TEST(Dropout, MatchesOracleOnEveryIsa) {
  test::for_each_isa([&](Isa isa) {
    Generator data(301);
    for (DType dt : {DType::f32, DType::f64}) {
      for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 13, 31, 32, 33, 64, 67, 96, 1031, 65537}) {
        for (double p : {0.1, 0.5, 0.9, 1.0 / 3.0}) {
          Tensor x = randn({n}, data, dt);
          Generator g(77 + uint64_t(n));
          g.reserve(uint64_t(n % 3));                       // start at an offset that is not 0
          const uint64_t seed = g.seed(), off = g.offset();
          Tensor y = dropout(x, p, true, g);
          EXPECT_EQ(g.offset(), off + uint64_t(n)) << "reserves numel counters";
          Tensor expect = dt == DType::f32 ? dropout_oracle<float>(x, p, seed, off) : dropout_oracle<double>(x, p, seed, off);
          EXPECT_TENSOR_NEAR(y, expect, 0, 0) << isa_name(isa) << " " << dtype_name(dt) << " n=" << n << " p=" << p;
        }
      }
    }
    // A seed with both 32-bit halves set and an offset past 2^32 (the counter's high word).
    Tensor x = randn({1000}, data);
    Generator g(0x123456789abcdefULL);
    g.set_state(0x123456789abcdefULL, (uint64_t(1) << 32) - 100);
    Tensor y = dropout(x, 0.3, true, g);
    EXPECT_TENSOR_NEAR(y, dropout_oracle<float>(x, 0.3, 0x123456789abcdefULL, (uint64_t(1) << 32) - 100), 0, 0)
        << isa_name(isa);
  });
}

TEST(Dropout, KeepRateAndMean) {
  Generator g(302);
  const int64_t n = 200003;
  for (double p : {0.1, 0.3, 0.5, 0.8}) {
    Tensor y = dropout(Tensor::ones({n}), p, true, g);
    std::vector<float> v = y.to_vector<float>();
    int64_t kept = 0;
    double total = 0;
    for (float f : v) { kept += f != 0.f; total += f; }
    const double rate = double(kept) / double(n);
    const double sigma = std::sqrt(p * (1 - p) / double(n));
    EXPECT_NEAR(rate, 1 - p, 5 * sigma) << "p=" << p;
    EXPECT_NEAR(total / double(n), 1.0, 5 * sigma / (1 - p)) << "p=" << p;
    for (float f : v) ASSERT_TRUE(f == 0.f || f == 1.f / float(1 - p)) << "kept values are scaled by 1/(1-p)";
  }
}

TEST(Dropout, IndependentOfThreadCount) {
  Generator data(303);
  Tensor x = randn({7, 30011}, data);
  const int prev = get_num_threads();
  set_num_threads(1);
  Generator g1(9);
  Tensor y1 = dropout(x, 0.37, true, g1);
  set_num_threads(2);
  Generator g2(9);
  Tensor y2 = dropout(x, 0.37, true, g2);
  set_num_threads(prev);
  EXPECT_TENSOR_NEAR(y1, y2, 0, 0);
}

TEST(Dropout, BackwardUsesTheSameMask) {
  Generator data(304);
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = randn({13, 17}, data, dt);
    Tensor gout = randn({13, 17}, data, dt);
    Generator g(41);
    Tensor xx = x.clone().requires_grad_();
    Tensor y = dropout(xx, 0.4, true, g);
    y.backward(gout);
    Tensor expect = dt == DType::f32 ? dropout_oracle<float>(gout, 0.4, 41, 0) : dropout_oracle<double>(gout, 0.4, 41, 0);
    EXPECT_TENSOR_NEAR(xx.grad(), expect, 0, 0) << dtype_name(dt);
    // Dropped outputs are exactly the positions with zero gradient.
    std::vector<double> yv = y.to_vector<double>(), gv = xx.grad().to_vector<double>();
    for (size_t i = 0; i < yv.size(); ++i) EXPECT_EQ(yv[i] == 0, gv[i] == 0) << i;
  }
}

TEST(Dropout, FiniteDifferencesWithFixedMask) {
  Generator data(305);
  Tensor x = randn({4, 5}, data, DType::f64);
  EXPECT_TRUE(test::gradcheck(
      [&](const std::vector<Tensor>& in) {
        Generator g(3);   // the same mask on every evaluation
        return dropout(in[0], 0.3, true, g);
      },
      {x}));
}

TEST(Dropout, IdentityWhenEvalOrPZero) {
  Generator data(306);
  Tensor x = randn({5, 3}, data);
  Generator g(1);
  EXPECT_TRUE(dropout(x, 0.5, false, g).is_same(x));
  EXPECT_TRUE(dropout(x, 0.0, true, g).is_same(x));
  EXPECT_EQ(g.offset(), 0u) << "no counters drawn";
}

TEST(Dropout, POneGivesZerosAndNaNsAsTorch) {
  Tensor x = Tensor::from_vector<float>({1.f, -2.f, 0.f, NAN, INFINITY, 3.f}, {6});
  Generator g(2);
  Tensor xx = x.clone().requires_grad_();
  Tensor y = dropout(xx, 1.0, true, g);
  EXPECT_TENSOR_NEAR(y, x * 0.0, 0, 0);   // zeros; NaN for NaN and inf (x * 0)
  y.backward(Tensor::ones({6}));
  EXPECT_TENSOR_NEAR(xx.grad(), Tensor::zeros({6}), 0, 0);
}

TEST(Dropout, SpecialValuesKeptOrDropped) {
  const int64_t n = 1001;
  Tensor x = Tensor::full({n}, INFINITY);
  Generator g(5);
  Tensor y = dropout(x, 0.5, true, g);
  Tensor expect = dropout_oracle<float>(x, 0.5, 5, 0);   // kept: inf, dropped: inf * 0 = NaN
  EXPECT_TENSOR_NEAR(y, expect, 0, 0);
  std::vector<float> v = y.to_vector<float>();
  int64_t infs = 0, nans = 0;
  for (float f : v) { infs += std::isinf(f); nans += std::isnan(f); }
  EXPECT_EQ(infs + nans, n);
  EXPECT_GT(infs, 0);
  EXPECT_GT(nans, 0);
}

TEST(Dropout, NonContiguousInputAndDefaultGenerator) {
  Generator data(307);
  Tensor x = randn({9, 11}, data).t();   // (11, 9)
  Generator g1(8), g2(8);
  EXPECT_TENSOR_NEAR(dropout(x, 0.25, true, g1), dropout(x.contiguous(), 0.25, true, g2), 0, 0);
  manual_seed(12);
  Tensor a = dropout(x, 0.25, true);
  Generator g3(12);
  EXPECT_TENSOR_NEAR(a, dropout(x, 0.25, true, g3), 0, 0);
  EXPECT_EQ(default_generator().offset(), uint64_t(x.numel()));
}

TEST(Dropout, Errors) {
  Tensor x = Tensor::zeros({3});
  EXPECT_EQ(error_of([&] { dropout(x, 1.5, true); }), "dropout: p must be in [0, 1], got 1.5");
  EXPECT_EQ(error_of([&] { dropout(x, -0.1, false); }), "dropout: p must be in [0, 1], got -0.1");
  EXPECT_EQ(error_of([&] { dropout(Tensor::zeros({3}, DType::i64), 0.5, true); }),
            "dropout: expected a f32 or f64 tensor, got i64");
}

// relu_dropout is dropout(relu(x)) in one pass: the same values bit for bit, the same draws, on
// every ISA path, at sizes around the 4-element group, the 32-element AVX2 block and the 8-wide
// backward, with NaN, ±inf and ±0 among the inputs.
TEST(ReluDropout, EqualsDropoutOfReluOnEveryIsa) {
  test::for_each_isa([&](Isa isa) {
    Generator data(311);
    for (DType dt : {DType::f32, DType::f64}) {
      for (int64_t n : {1, 3, 4, 7, 8, 9, 31, 32, 33, 67, 1031, 65537}) {
        for (double p : {0.1, 0.5, 1.0 / 3.0}) {
          std::vector<double> v = randn({n}, data, DType::f64).to_vector<double>();
          const double specials[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0};
          for (size_t i = 0; i < v.size() && i < 40; i += 7) v[i] = specials[(i / 7) % 5];
          Tensor x = Tensor::from_vector<double>(v, {n}).to(dt);
          Tensor gout = randn({n}, data, dt);
          Generator g1(91 + uint64_t(n)), g2(91 + uint64_t(n));
          g1.reserve(5);
          g2.reserve(5);
          Tensor x1 = x.clone().requires_grad_(), x2 = x.clone().requires_grad_();
          Tensor y1 = relu_dropout(x1, p, true, g1);
          Tensor y2 = dropout(relu(x2), p, true, g2);
          const std::string at = std::string(isa_name(isa)) + " " + dtype_name(dt) + " n=" + std::to_string(n) +
                                 " p=" + std::to_string(p);
          EXPECT_TENSOR_NEAR(y1, y2, 0, 0) << at;
          EXPECT_EQ(g1.offset(), g2.offset()) << at;
          y1.backward(gout);
          y2.backward(gout);
          // relu's backward passes dy where x > 0; the fused one where y > 0: the same elements
          // (+inf kept included, NaN excluded by both).
          EXPECT_TENSOR_NEAR(x1.grad(), x2.grad(), 0, 0) << at;
        }
      }
    }
  });
}

TEST(ReluDropout, ReluWhenEvalOrPZeroAndZerosAtPOne) {
  Generator data(312);
  Tensor x = randn({5, 7}, data);
  Generator g(1);
  EXPECT_TENSOR_NEAR(relu_dropout(x, 0.5, false, g), relu(x), 0, 0);
  EXPECT_TENSOR_NEAR(relu_dropout(x, 0.0, true, g), relu(x), 0, 0);
  EXPECT_EQ(g.offset(), 0u) << "no counters drawn";
  Tensor xx = x.clone().requires_grad_();
  Tensor y = relu_dropout(xx, 1.0, true, g);
  EXPECT_TENSOR_NEAR(y, Tensor::zeros({5, 7}), 0, 0);
  sum(y).backward();
  EXPECT_TENSOR_NEAR(xx.grad(), Tensor::zeros({5, 7}), 0, 0);
  EXPECT_EQ(error_of([&] { relu_dropout(x, 2.0, true, g); }), "relu_dropout: p must be in [0, 1], got 2");
}

TEST(ReluDropout, FiniteDifferencesWithFixedMaskAndStridedInput) {
  Generator data(313);
  Tensor x = randn({6, 5}, data, DType::f64).t();   // non-contiguous (5, 6)
  EXPECT_TRUE(test::gradcheck(
      [&](const std::vector<Tensor>& in) {
        Generator g(4);
        return relu_dropout(in[0], 0.3, true, g);
      },
      {x}));
  Generator g1(9), g2(9);
  EXPECT_TENSOR_NEAR(relu_dropout(x, 0.3, true, g1), relu_dropout(x.contiguous(), 0.3, true, g2), 0, 0);
}

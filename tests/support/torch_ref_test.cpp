// The tests' own comparison (torch_ref.h: compare, near): values within tolerance pass, a value
// outside, a NaN against a number, another dtype, another shape or two empty tensors (unless the
// test says so) fail, each with a message that says why.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "attn/attn.h"
#include "torch_ref.h"

using namespace attn;
using test::compare;
using test::Empty;

TEST(Compare, ValuesWithinToleranceAndNot) {
  const Tensor a = Tensor::from_vector<float>({1.f, 2.f, NAN, INFINITY}, {4});
  EXPECT_TRUE(compare(a, a.clone(), 0, 0).ok);
  const Tensor b = Tensor::from_vector<float>({1.f, 2.001f, NAN, INFINITY}, {4});
  EXPECT_TRUE(compare(a, b, 1e-2, 0).ok);
  const auto c = compare(a, b, 1e-4, 0);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.detail.find("first mismatch at flat index 1"), std::string::npos) << c.detail;
  EXPECT_FALSE(compare(a, Tensor::from_vector<float>({1.f, 2.f, 3.f, INFINITY}, {4}), 1, 1).ok) << "NaN vs 3";
  EXPECT_FALSE(compare(a, Tensor::from_vector<float>({1.f, 2.f, NAN, -INFINITY}, {4}), 1, 1).ok) << "inf vs -inf";
}

TEST(Compare, DtypesMustAgree) {
  const Tensor f = Tensor::from_vector<float>({1.f, 2.f}, {2});
  const auto c = compare(f, f.to(DType::f64), 1, 1);
  EXPECT_FALSE(c.ok) << "the same values in f32 and f64";
  EXPECT_EQ(c.detail, "dtype f32 vs expected f64 (shapes [2] and [2])");
  EXPECT_FALSE(compare(f.to(DType::i64), f, 1, 1).ok) << "i64 vs f32";
  EXPECT_FALSE(test::near(f.to(DType::u8), f, 1, 1)) << "near() too";
  EXPECT_TRUE(compare(f.to(DType::i64), f.to(DType::i64), 0, 0).ok);
}

TEST(Compare, ShapesMustAgree) {
  const Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({3, 2}), c = Tensor::zeros({6});
  EXPECT_EQ(compare(a, b, 1, 1).detail, "shape [2, 3] vs expected [3, 2]");
  EXPECT_FALSE(compare(a, c, 1, 1).ok);
  EXPECT_FALSE(compare(Tensor::zeros({1}), Tensor::scalar(0.0), 1, 1).ok) << "(1) vs a 0-d scalar";
}

TEST(Compare, TwoEmptyTensorsFailUnlessExpected) {
  const Tensor e = Tensor::zeros({0, 3});
  const auto c = compare(e, e.clone(), 0, 0);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.detail.find("both tensors are empty (shape [0, 3]): nothing was compared"), std::string::npos)
      << c.detail;
  EXPECT_FALSE(test::near(e, e, 0, 0));
  EXPECT_TRUE(compare(e, e.clone(), 0, 0, Empty::expected).ok);
  EXPECT_TRUE(test::near(e, e, 0, 0, Empty::expected));
  EXPECT_TENSOR_NEAR_OR_EMPTY(e, e, 0, 0);
  // Expected emptiness does not excuse another shape or dtype.
  EXPECT_FALSE(compare(e, Tensor::zeros({3, 0}), 0, 0, Empty::expected).ok);
  EXPECT_FALSE(compare(e, Tensor::zeros({0, 3}, DType::f64), 0, 0, Empty::expected).ok);
  EXPECT_FALSE(compare(e, Tensor::zeros({1, 3}), 0, 0, Empty::expected).ok);
  // A 0-d scalar has one element: not empty.
  EXPECT_TRUE(compare(Tensor::scalar(1.0), Tensor::scalar(1.0), 0, 0).ok);
}

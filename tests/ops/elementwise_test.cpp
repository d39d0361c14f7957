// Elementwise ops, reductions and matmul: against PyTorch (forward + backward) on seeded inputs,
// gradients against finite differences in f64, on every ISA path.
#include <gtest/gtest.h>

#include "attn/attn.h"
#include "attn/core/parallel.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::torch_ref;

namespace {
const char* kUnary[] = {"neg", "exp", "log", "sqrt", "rsqrt", "abs", "tanh", "sigmoid", "relu", "gelu", "gelu_tanh"};

Tensor apply_unary(const std::string& op, const Tensor& x) {
  if (op == "neg") return neg(x);
  if (op == "exp") return exp(x);
  if (op == "log") return log(x);
  if (op == "sqrt") return sqrt(x);
  if (op == "rsqrt") return rsqrt(x);
  if (op == "abs") return abs(x);
  if (op == "tanh") return tanh(x);
  if (op == "sigmoid") return sigmoid(x);
  if (op == "relu") return relu(x);
  if (op == "gelu") return gelu(x);
  if (op == "gelu_tanh") return gelu(x, GeluApprox::tanh);
  fail("unknown op ", op);
}

Tensor apply_binary(const std::string& op, const Tensor& a, const Tensor& b) {
  if (op == "add") return a + b;
  if (op == "sub") return a - b;
  if (op == "mul") return a * b;
  if (op == "div") return a / b;
  if (op == "maximum") return maximum(a, b);
  if (op == "minimum") return minimum(a, b);
  fail("unknown op ", op);
}

bool positive_domain(const std::string& op) { return op == "log" || op == "sqrt" || op == "rsqrt"; }
}  // namespace

class UnaryOps : public ::testing::TestWithParam<const char*> {};

TEST_P(UnaryOps, MatchesTorchForwardBackward) {
  const std::string op = GetParam();
  Generator g(11);
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = randn({5, 37}, g, dt) * 3.0;
    if (positive_domain(op)) x = abs(x) + 0.1;
    Tensor gout = randn({5, 37}, g, dt);
    auto ref = torch_ref("elementwise.unary", {{"x", x}, {"g", gout}}, {{"op", op}});
    Tensor xx = x.clone().requires_grad_();
    Tensor y = apply_unary(op, xx);
    y.backward(gout);
    const double tol = dt == DType::f32 ? 2e-6 : 1e-12;
    EXPECT_TENSOR_NEAR(y, ref.at("out"), tol, tol);
    EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), tol, tol);
  }
}

TEST_P(UnaryOps, FiniteDifferences) {
  const std::string op = GetParam();
  if (op == "relu" || op == "abs") return;  // kinks: checked against torch above
  Generator g(12);
  Tensor x = randn({3, 4}, g, DType::f64);
  if (positive_domain(op)) x = abs(x) + 0.5;
  EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return apply_unary(op, in[0]); }, {x}));
}

INSTANTIATE_TEST_SUITE_P(All, UnaryOps, ::testing::ValuesIn(kUnary));

TEST(UnaryOps, SpecialValuesAsTorch) {
  Tensor x = Tensor::from_vector<float>({0.f, -0.f, INFINITY, -INFINITY, NAN, 100.f, -100.f}, {7});
  Tensor g = Tensor::ones({7});
  for (const char* op : kUnary) {
    auto ref = torch_ref("elementwise.unary", {{"x", x}, {"g", g}}, {{"op", op}});
    EXPECT_TENSOR_NEAR(apply_unary(op, x), ref.at("out"), 1e-6, 1e-6) << op;
  }
}

class BinaryOps : public ::testing::TestWithParam<const char*> {};

TEST_P(BinaryOps, BroadcastMatchesTorch) {
  const std::string op = GetParam();
  Generator g(21);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{4, 5}, {4, 5}}, {{4, 5}, {5}}, {{3, 1, 5}, {4, 1}}, {{}, {2, 3}}, {{2, 1, 3}, {2, 4, 1}}, {{0, 3}, {3}}};
  for (const auto& [sa, sb] : cases) {
    Tensor a = randn(sa, g, DType::f64), b = randn(sb, g, DType::f64);
    if (op == "div") b = abs(b) + 0.5;
    Tensor gout = randn(broadcast_shapes(sa, sb, "test"), g, DType::f64);
    auto ref = torch_ref("elementwise.binary", {{"a", a}, {"b", b}, {"g", gout}}, {{"op", op}});
    Tensor aa = a.clone().requires_grad_(), bb = b.clone().requires_grad_();
    Tensor y = apply_binary(op, aa, bb);
    y.backward(gout);
    EXPECT_TENSOR_NEAR_OR_EMPTY(y, ref.at("out"), 1e-12, 1e-12);   // (0, 3) + (3): empty by design
    if (y.numel() > 0) {
      EXPECT_TENSOR_NEAR(aa.grad(), ref.at("da"), 1e-12, 1e-12);
      EXPECT_TENSOR_NEAR(bb.grad(), ref.at("db"), 1e-12, 1e-12);
    }
  }
}

TEST_P(BinaryOps, FiniteDifferences) {
  const std::string op = GetParam();
  Generator g(22);
  Tensor a = randn({3, 4}, g, DType::f64), b = randn({4}, g, DType::f64);
  if (op == "div") b = abs(b) + 0.5;
  EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return apply_binary(op, in[0], in[1]); }, {a, b}));
}

INSTANTIATE_TEST_SUITE_P(All, BinaryOps, ::testing::Values("add", "sub", "mul", "div", "maximum", "minimum"));

TEST(BinaryOps, NonContiguousOperands) {
  Generator g(23);
  Tensor a = randn({6, 5}, g).t();          // (5, 6), strided
  Tensor b = randn({5, 12}, g).slice(1, 0, 12, 2);
  Tensor y = a + b;
  Tensor expect = a.contiguous() + b.contiguous();
  EXPECT_TENSOR_NEAR(y, expect, 0, 0);
}

TEST(BinaryOps, BadShapesMessage) {
  EXPECT_EQ(error_of([&] { Tensor::zeros({2, 3}) + Tensor::zeros({4}); }),
            "add: shapes [2, 3] and [4] do not broadcast (dim 1: 3 vs 4)");
  EXPECT_EQ(error_of([&] { Tensor::zeros({2}) * Tensor::zeros({2}, DType::f64); }),
            "mul: dtypes differ (f32 and f64); convert one with .to()");
}

TEST(Reduce, MatchesTorch) {
  Generator g(31);
  struct Case { std::string op; Shape shape; std::vector<int64_t> dims; bool keep; };
  const std::vector<Case> cases = {
      {"sum", {4, 5, 6}, {1}, false}, {"sum", {4, 5, 6}, {0, 2}, true}, {"sum", {4, 5, 6}, {0, 1}, false},
      {"mean", {4, 5, 6}, {-1}, true}, {"mean", {7, 3}, {0}, false}, {"var", {4, 5, 6}, {2}, false},
      {"var", {4, 5, 6}, {0, 1}, true}, {"max", {4, 5, 6}, {1}, false}, {"max", {4, 5, 6}, {2}, true}};
  for (const auto& c : cases) {
    Tensor x = randn(c.shape, g, DType::f64);
    Tensor xx = x.clone().requires_grad_();
    Tensor y;
    if (c.op == "sum") y = sum(xx, c.dims, c.keep);
    else if (c.op == "mean") y = mean(xx, c.dims, c.keep);
    else if (c.op == "var") y = var(xx, c.dims, 1, c.keep);
    else y = max(xx, c.dims[0], c.keep).first;
    Tensor gout = randn(y.shape(), g, DType::f64);
    y.backward(gout);
    auto ref = torch_ref("elementwise.reduce", {{"x", x}, {"g", gout}},
                         {{"op", c.op}, {"dims", c.dims}, {"keepdim", c.keep}});
    EXPECT_TENSOR_NEAR(y, ref.at("out"), 1e-12, 1e-12) << c.op;
    EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), 1e-12, 1e-12) << c.op;
  }
}

TEST(Reduce, ArgmaxAndNaN) {
  Tensor x = Tensor::from_vector<float>({1, 5, 5, 2, NAN, 3}, {2, 3});
  EXPECT_EQ(argmax(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 1}));
  EXPECT_TRUE(std::isnan(max(x, 1).first.at({1})));
  EXPECT_EQ(sum(Tensor::zeros({0, 3}), {0}).to_vector<float>(), (std::vector<float>{0, 0, 0}));
}

// The column-sum fast path (a bias gradient: sum over the leading dims of a contiguous tensor) in
// its three shapes: few rows (column chunks), tall (row blocks), wide (row blocks, column tiles).
// Same result at 1 and 2 threads, and within float rounding of a double reference.
TEST(Reduce, ColumnSumsTallWideAndThreadInvariant) {
  Generator g(37);
  for (Shape shape : {Shape{5, 3000}, Shape{6400, 24}, Shape{300, 5000}, Shape{2, 90, 7}}) {
    Tensor x = randn(shape, g, DType::f32);
    const int64_t cols = shape.back(), rows = x.numel() / cols;
    const std::vector<int64_t> dims = shape.size() == 3 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0};
    const int threads = get_num_threads();
    set_num_threads(1);
    Tensor one = sum(x, dims);
    set_num_threads(2);
    Tensor two = sum(x, dims);
    set_num_threads(threads);
    EXPECT_TENSOR_NEAR(one, two, 0, 0) << rows << " x " << cols;
    Tensor ref = sum(x.to(DType::f64).reshape({rows, cols}), {0}).to(DType::f32);
    EXPECT_TENSOR_NEAR(two, ref, 1e-5, 1e-6) << rows << " x " << cols;
  }
}

TEST(Matmul, MatchesTorchIncludingTransposedAndBatched) {
  Generator g(41);
  struct Case { Shape a, b; bool tb; };
  const std::vector<Case> cases = {{{7, 13}, {13, 5}, false}, {{3, 7, 13}, {13, 5}, false},
                                   {{2, 3, 7, 13}, {2, 3, 5, 13}, true}, {{2, 1, 7, 13}, {3, 13, 5}, false},
                                   {{13}, {13, 5}, false}, {{4, 7, 13}, {13}, false}};
  for (DType dt : {DType::f32, DType::f64}) {
    for (const auto& c : cases) {
      Tensor a = randn(c.a, g, dt), b = randn(c.b, g, dt);
      Tensor aa = a.clone().requires_grad_(), bb = b.clone().requires_grad_();
      Tensor y = matmul(aa, c.tb ? bb.transpose(-1, -2) : bb);
      Tensor gout = randn(y.shape(), g, dt);
      y.backward(gout);
      auto ref = torch_ref("elementwise.matmul", {{"a", a}, {"b", b}, {"g", gout}}, {{"transpose_b", c.tb}});
      const double tol = dt == DType::f32 ? 1e-4 : 1e-12;
      EXPECT_TENSOR_NEAR(y, ref.at("out"), tol, tol);
      EXPECT_TENSOR_NEAR(aa.grad(), ref.at("da"), tol, tol);
      EXPECT_TENSOR_NEAR(bb.grad(), ref.at("db"), tol, tol);
    }
  }
}

TEST(Matmul, OneDnnEqualsNaiveOracle) {
  Generator g(42);
  for (int64_t m : {1, 7, 64, 197}) {
    Tensor a = randn({m, 61}, g), b = randn({61, 67}, g);
    EXPECT_TENSOR_NEAR(matmul(a, b), reference::matmul_naive(a, b), 1e-4, 1e-4);
    EXPECT_TENSOR_NEAR(matmul(a, b.t().contiguous().t()), reference::matmul_naive(a, b), 1e-4, 1e-4);
  }
}

// Operands walked along K >= 1024 with a row stride of 4 KiB (or 12 KiB) are copied into padded
// rows before oneDNN sees them (4K aliasing, see matmul.cpp): the weight gradients of a 1024-wide
// layer, a 12 KiB-strided view, a batched case and linear's gradients must give the oracle's values.
TEST(Matmul, AliasingStridesGiveTheSameProducts) {
  Generator g(44);
  Tensor h = randn({1030, 1024}, g), dy = randn({1030, 72}, g);
  EXPECT_TENSOR_NEAR(matmul(dy.t(), h), reference::matmul_naive(dy.t().contiguous(), h), 1e-3, 1e-4);   // B row-major
  EXPECT_TENSOR_NEAR(matmul(h.t(), dy), reference::matmul_naive(h.t().contiguous(), dy), 1e-3, 1e-4);   // A transposed
  Tensor wide = randn({1100, 3072}, g).slice(1, 0, 80);   // a view with a 12 KiB row stride, walked down 1100 rows
  Tensor y = randn({1100, 70}, g);
  EXPECT_TENSOR_NEAR(matmul(y.t(), wide), reference::matmul_naive(y.t().contiguous(), wide.contiguous()), 1e-3, 1e-4);
  EXPECT_TENSOR_NEAR(matmul(wide.t(), y), reference::matmul_naive(wide.t().contiguous(), y), 1e-3, 1e-4);
  Tensor hb = randn({2, 1030, 1024}, g), db = randn({2, 1030, 64}, g);
  Tensor got = matmul(db.transpose(1, 2), hb);
  for (int64_t i = 0; i < 2; ++i)
    EXPECT_TENSOR_NEAR(got.select(0, i), reference::matmul_naive(db.select(0, i).t().contiguous(), hb.select(0, i)),
                       1e-3, 1e-4) << "batch " << i;
  // Linear's weight gradient through the same path: dW = dYᵀ X with X 1024 wide.
  Tensor x = randn({1030, 1024}, g), w = randn({64, 1024}, g);
  Tensor xx = x.clone().requires_grad_(), ww = w.clone().requires_grad_();
  Tensor gout = randn({1030, 64}, g);
  linear(xx, ww).backward(gout);
  EXPECT_TENSOR_NEAR(ww.grad(), reference::matmul_naive(gout.t().contiguous(), x), 1e-3, 1e-4);
  EXPECT_TENSOR_NEAR(xx.grad(), reference::matmul_naive(gout, w), 1e-3, 1e-4);
}

TEST(Linear, MatchesTorch) {
  Generator g(43);
  Tensor x = randn({2, 9, 16}, g), w = randn({24, 16}, g), b = randn({24}, g);
  Tensor xx = x.clone().requires_grad_(), ww = w.clone().requires_grad_(), bb = b.clone().requires_grad_();
  Tensor y = linear(xx, ww, bb);
  Tensor gout = randn(y.shape(), g);
  y.backward(gout);
  auto ref = torch_ref("elementwise.linear", {{"x", x}, {"w", w}, {"b", b}, {"g", gout}});
  EXPECT_TENSOR_NEAR(y, ref.at("out"), 1e-5, 1e-5);
  EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), 1e-5, 1e-5);
  EXPECT_TENSOR_NEAR(ww.grad(), ref.at("dw"), 1e-5, 1e-5);
  EXPECT_TENSOR_NEAR(bb.grad(), ref.at("db"), 1e-5, 1e-5);
  EXPECT_EQ(error_of([&] { linear(x, Tensor::zeros({24, 15}), b); }),
            "linear: input shape [2, 9, 16] does not end in the weight's in_features 15 "
            "(weight shape [24, 15])");
}

// The strided walk (core/strided.h) merges dims that every operand walks as one and splits rows
// longer than 32768 elements into segments. Against index arithmetic on the raw data, at 1 and 2
// threads: per-sample scales (B, 1, 1) and scalar-on-the-left operands, transposed operands, rows
// of 60,000 and 40,000 elements (segmented), in-place add_ and a strided copy of long rows.
TEST(BinaryOps, StridedWalkMergesDimsAndSplitsLongRows) {
  const int threads = get_num_threads();
  for (int nt : {1, 2}) {
    set_num_threads(nt);
    Generator g(24);
    {   // (B, T, C) op (B, 1, 1), both orders
      Tensor a = randn({8, 50, 128}, g), m = randn({8, 1, 1}, g);
      const auto va = a.to_vector<float>(), vm = m.to_vector<float>();
      const auto ym = (a * m).to_vector<float>(), ys = (m - a).to_vector<float>(), yd = (a / m).to_vector<float>();
      for (size_t i = 0; i < va.size(); ++i) {
        const float s = vm[i / (50 * 128)];
        ASSERT_EQ(ym[i], va[i] * s) << i;
        ASSERT_EQ(ys[i], s - va[i]) << i;
        ASSERT_EQ(yd[i], va[i] / s) << i;
      }
    }
    {   // rows of 60,000 after merging (2, 300, 200) against (2, 1, 1): segmented
      Tensor a = randn({2, 300, 200}, g), m = randn({2, 1, 1}, g);
      const auto va = a.to_vector<float>(), vm = m.to_vector<float>(), y = (a + m).to_vector<float>();
      for (size_t i = 0; i < va.size(); ++i) ASSERT_EQ(y[i], va[i] + vm[i / 60000]) << i;
    }
    {   // (3, 40000) against (1, 40000): rows of 40,000 that cannot merge, segmented
      Tensor a = randn({3, 40000}, g), b = randn({1, 40000}, g);
      const auto va = a.to_vector<float>(), vb = b.to_vector<float>(), y = (b - a).to_vector<float>();
      for (size_t i = 0; i < va.size(); ++i) ASSERT_EQ(y[i], vb[i % 40000] - va[i]) << i;
    }
    {   // a transposed operand: (C, T)ᵀ + (T, C)
      Tensor at = randn({64, 50}, g), b = randn({50, 64}, g);
      const auto vat = at.to_vector<float>(), vb = b.to_vector<float>(), y = (at.t() + b).to_vector<float>();
      for (int64_t t = 0; t < 50; ++t)
        for (int64_t c = 0; c < 64; ++c) ASSERT_EQ(y[size_t(t * 64 + c)], vat[size_t(c * 50 + t)] + vb[size_t(t * 64 + c)]);
    }
    {   // in-place add_ over 70,000 contiguous elements, and with a broadcast (1, C) operand
      Tensor a = randn({70000}, g), b = randn({70000}, g);
      const auto va = a.to_vector<float>(), vb = b.to_vector<float>();
      add_(a, b, 0.5);
      const auto y = a.to_vector<float>();
      for (size_t i = 0; i < va.size(); ++i) ASSERT_EQ(y[i], va[i] + 0.5f * vb[i]) << i;
      Tensor c = randn({300, 256}, g), r = randn({1, 256}, g);
      const auto vc = c.to_vector<float>(), vr = r.to_vector<float>();
      add_(c, r, 1.0);
      const auto yc = c.to_vector<float>();
      for (size_t i = 0; i < vc.size(); ++i) ASSERT_EQ(yc[i], vc[i] + vr[i % 256]) << i;
    }
    {   // a strided copy of long rows: every other column of (3, 100000)
      Tensor a = randn({3, 100000}, g);
      const auto va = a.to_vector<float>();
      const auto y = a.slice(1, 0, 100000, 2).contiguous().to_vector<float>();
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t j = 0; j < 50000; ++j) ASSERT_EQ(y[size_t(r * 50000 + j)], va[size_t(r * 100000 + 2 * j)]);
    }
  }
  set_num_threads(threads);
}

// s - x and s / x (rsub, rdiv; also `s - x`, `s / x`): forward and backward against PyTorch in f32
// and f64, operator spellings, division by signed zeros, and finite differences.
TEST(ScalarLeftOps, MatchTorchForwardBackward) {
  Generator g(41);
  for (const char* op : {"rsub", "rdiv"})
    for (DType dt : {DType::f32, DType::f64})
      for (double s : {2.5, -0.75}) {
        Tensor x = randn({6, 33}, g, dt) * 2.0;
        if (std::string(op) == "rdiv") x = abs(x) + 0.2;
        const Tensor gout = randn({6, 33}, g, dt);
        auto ref = torch_ref("elementwise.scalar_left", {{"x", x}, {"g", gout}}, {{"op", op}, {"s", s}});
        Tensor xx = x.clone().requires_grad_();
        Tensor y = std::string(op) == "rsub" ? rsub(s, xx) : rdiv(s, xx);
        y.backward(gout);
        const double tol = dt == DType::f32 ? 2e-6 : 1e-12;
        EXPECT_TENSOR_NEAR(y, ref.at("out"), tol, tol) << op << " " << dtype_name(dt) << " s " << s;
        EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), tol, tol) << op << " " << dtype_name(dt) << " s " << s;
        const Tensor spelled = std::string(op) == "rsub" ? s - x : s / x;
        EXPECT_TENSOR_NEAR(spelled, y.detach(), 0, 0) << op << ": the operator form";
      }
  const Tensor z = Tensor::from_vector<float>({0.f, -0.f, INFINITY, -2.f}, {4});
  auto ref = torch_ref("elementwise.scalar_left", {{"x", z}, {"g", Tensor::ones({4})}}, {{"op", "rdiv"}, {"s", 1.0}});
  EXPECT_TENSOR_NEAR(rdiv(1.0, z), ref.at("out"), 0, 0) << "1 / [0, -0, inf, -2]";
  Tensor a = randn({3, 4}, g, DType::f64);
  EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& in) { return rsub(1.5, in[0]); }, {a}));
  EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& in) { return rdiv(-3.0, in[0]); }, {abs(a) + 0.5}));
}

// eq: broadcast like the arithmetic ops, u8 0/1 out as torch.eq, NaN unequal to itself, -0 == 0,
// on f32, f64 and i64; no history even for inputs that require gradients; mixed dtypes refused.
TEST(Compare, EqMatchesTorch) {
  Generator g(42);
  const std::vector<std::pair<Shape, Shape>> shapes = {{{4, 5}, {4, 5}}, {{3, 1, 5}, {4, 1}}, {{}, {2, 3}}};
  double equal = 0, unequal = 0;
  for (DType dt : {DType::f32, DType::f64, DType::i64})
    for (const auto& [sa, sb] : shapes) {
      // Small integers, so that about a third of the pairs are equal.
      const Tensor a = (rand(sa, g, DType::f64) * 3.0 - 0.5).to(DType::i64).to(dt);
      const Tensor b = (rand(sb, g, DType::f64) * 3.0 - 0.5).to(DType::i64).to(dt);
      auto ref = torch_ref("elementwise.eq", {{"a", a}, {"b", b}});
      const Tensor y = eq(a, b);
      EXPECT_EQ(y.dtype(), DType::u8);
      EXPECT_TENSOR_NEAR(y, ref.at("out"), 0, 0) << dtype_name(dt) << " " << shape_str(sa) << " == " << shape_str(sb);
      const double ones = sum(y.to(DType::f64)).item();
      equal += ones;
      unequal += double(y.numel()) - ones;
    }
  EXPECT_GT(equal, 0.0) << "no equal pair: the cases test only one answer";
  EXPECT_GT(unequal, 0.0) << "no unequal pair: the cases test only one answer";
  const Tensor s = Tensor::from_vector<float>({NAN, 0.f, -0.f, INFINITY, 1.f}, {5});
  const Tensor t = Tensor::from_vector<float>({NAN, -0.f, 0.f, INFINITY, 1.0000001f}, {5});
  auto ref = torch_ref("elementwise.eq", {{"a", s}, {"b", t}});
  EXPECT_TENSOR_NEAR(eq(s, t), ref.at("out"), 0, 0) << "NaN, signed zeros, infinity, one ulp apart";
  Tensor x = randn({3}, g).requires_grad_();
  const Tensor y = eq(x, x);
  EXPECT_FALSE(y.requires_grad()) << "a comparison records no history";
  EXPECT_EQ(y.to_vector<uint8_t>(), (std::vector<uint8_t>{1, 1, 1}));
  EXPECT_EQ(error_of([&] { eq(Tensor::zeros({2}), Tensor::zeros({2}, DType::f64)); }), "eq: dtypes differ (f32 and f64)");
  EXPECT_NE(error_of([&] { eq(Tensor::zeros({2, 3}), Tensor::zeros({4})); }).find("do not broadcast"), std::string::npos);
}

// sum_to, the backward of broadcasting, as torch's Tensor.sum_to_size: leading dims summed away,
// size-1 dims kept, the identity when the shapes agree; its own backward (an expand) against
// torch's; and the shapes it cannot reach named.
TEST(Reduce, SumToMatchesTorch) {
  Generator g(43);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 4}, {3, 1}}, {{2, 3, 4}, {1, 1, 4}}, {{2, 3, 4}, {4}}, {{2, 3}, {}}, {{5, 2}, {5, 2}}, {{4, 1, 3}, {1, 3}}};
  for (const auto& [from, to] : cases)
    for (DType dt : {DType::f32, DType::f64}) {
      const Tensor x = randn(from, g, dt), gout = randn(to, g, dt);
      nlohmann::json shape = nlohmann::json::array();
      for (int64_t d : to) shape.push_back(d);
      auto ref = torch_ref("elementwise.sum_to", {{"x", x}, {"g", gout}}, {{"shape", shape}});
      Tensor xx = x.clone().requires_grad_();
      Tensor y = sum_to(xx, to);
      y.backward(gout);
      const double tol = dt == DType::f32 ? 2e-6 : 1e-12;
      EXPECT_TENSOR_NEAR(y, ref.at("out"), tol, tol) << shape_str(from) << " -> " << shape_str(to);
      EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), tol, tol) << shape_str(from) << " -> " << shape_str(to);
    }
  EXPECT_EQ(error_of([&] { sum_to(Tensor::zeros({2, 3}), {4}); }), "sum_to: cannot sum shape [2, 3] to [4]");
  EXPECT_EQ(error_of([&] { sum_to(Tensor::zeros({3}), {2, 3}); }), "sum_to: cannot sum shape [3] to [2, 3]");
  Tensor a = randn({2, 3, 4}, g, DType::f64);
  EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& in) { return sum_to(in[0], {3, 1}); }, {a}));
}

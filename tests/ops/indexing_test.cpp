// embedding, index_select, gather, masked_fill, where: against PyTorch (forward + backward, f32
// and f64, odd shapes, negative dims, broadcast masks, special values), finite differences in f64,
// thread-count independence of the scatter-add backward passes, and the error messages.
#include <gtest/gtest.h>

#include <cmath>

#include "attn/attn.h"
#include "attn/ops/indexing.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::torch_ref;

namespace {

Tensor rand_index(const Shape& s, int64_t n, Generator& g, DType dt = DType::i64) {
  std::vector<int64_t> v(size_t(shape_numel(s)));
  for (auto& x : v) x = g.randint(n);
  return Tensor::from_vector<int64_t>(v, s).to(dt);
}

Tensor rand_mask(const Shape& s, Generator& g) {
  return lt(rand(s, g, DType::f64), 0.4);   // u8
}

// JSON has no inf/nan: pass those as strings (Python's float() reads both).
nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(std::to_string(v)); }

double tol(DType dt) { return dt == DType::f32 ? 1e-6 : 1e-12; }

// The gradient of sum(op(x) * gout) with respect to x is the same, bit for bit, with 1 thread and
// with 2 (the thread count is restored).
template <class Op>
void expect_backward_thread_independent(const Tensor& x, const Tensor& gout, Op&& op) {
  const int prev = get_num_threads();
  Tensor grads[2];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Tensor xx = x.clone().requires_grad_();
    op(xx).backward(gout);
    grads[threads - 1] = xx.grad();
  }
  set_num_threads(prev);
  EXPECT_TENSOR_NEAR(grads[0], grads[1], 0, 0);
}

}  // namespace

// ---------------------------------------------------------------- embedding

TEST(Embedding, MatchesTorch) {
  Generator g(101);
  struct Case { int64_t V, C; Shape idx; DType idt; };
  const std::vector<Case> cases = {{11, 7, {3, 5}, DType::i64}, {37, 130, {2, 3, 17}, DType::i32},
                                   {1, 1, {4}, DType::i64},     {5, 3, {}, DType::i64},
                                   {6, 4, {0}, DType::i64},     {97, 33, {61}, DType::i32}};
  for (DType dt : {DType::f32, DType::f64}) {
    for (const auto& c : cases) {
      Tensor w = randn({c.V, c.C}, g, dt);
      Tensor idx = rand_index(c.idx, c.V, g, c.idt);
      Shape os = c.idx;
      os.push_back(c.C);
      Tensor gout = randn(os, g, dt);
      auto ref = torch_ref("indexing.embedding", {{"w", w}, {"idx", idx}, {"g", gout}});
      Tensor ww = w.clone().requires_grad_();
      Tensor y = embedding(ww, idx);
      y.backward(gout);
      const std::string ctx = dtype_name(dt) + std::string(" V=") + std::to_string(c.V) + " idx " + shape_str(c.idx);
      // No indices (0): no rows, by design.
      EXPECT_TRUE(test::near(y, ref.at("out"), 0, 0, shape_numel(os) == 0 ? test::Empty::expected : test::Empty::fails))
          << ctx;
      EXPECT_TENSOR_NEAR(ww.grad(), ref.at("dw"), tol(dt), tol(dt)) << ctx;
    }
  }
}

TEST(Embedding, NonContiguousWeightAndSpecialValues) {
  Generator g(102);
  Tensor w = randn({9, 13}, g).t();   // (13, 9), strided
  Tensor idx = rand_index({4, 6}, 13, g);
  auto ref = torch_ref("indexing.embedding", {{"w", w.contiguous()}, {"idx", idx}, {"g", randn({4, 6, 9}, g)}});
  EXPECT_TENSOR_NEAR(embedding(w, idx), ref.at("out"), 0, 0);
  Tensor s = Tensor::from_vector<float>({NAN, INFINITY, -INFINITY, 1e30f}, {2, 2});
  Tensor i2 = Tensor::from_vector<int64_t>({1, 0, 1}, {3});
  Tensor gs = Tensor::ones({3, 2});
  auto r2 = torch_ref("indexing.embedding", {{"w", s}, {"idx", i2}, {"g", gs}});
  EXPECT_TENSOR_NEAR(embedding(s, i2), r2.at("out"), 0, 0);
}

TEST(Embedding, BackwardIndependentOfThreadCount) {
  Generator g(103);
  Tensor w = randn({17, 301}, g);
  Tensor idx = rand_index({4099}, 17, g);   // many repeats per row
  Tensor gout = randn({4099, 301}, g);
  expect_backward_thread_independent(w, gout, [&](const Tensor& ww) { return embedding(ww, idx); });
}

TEST(Embedding, FiniteDifferences) {
  Generator g(104);
  Tensor w = randn({5, 3}, g, DType::f64);
  Tensor idx = Tensor::from_vector<int64_t>({0, 4, 4, 2, 0, 4}, {2, 3});
  EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return embedding(in[0], idx); }, {w}));
}

TEST(Embedding, Errors) {
  Tensor w = Tensor::zeros({11, 4});
  EXPECT_EQ(error_of([&] { embedding(w, Tensor::from_vector<int64_t>({0, 3, 1, 2, 11}, {5})); }),
            "embedding: index 11 at flat position 4 is out of range [0, 11)");
  EXPECT_EQ(error_of([&] { embedding(w, Tensor::from_vector<int32_t>({-1}, {1})); }),
            "embedding: index -1 at flat position 0 is out of range [0, 11)");
  EXPECT_EQ(error_of([&] { embedding(w, Tensor::zeros({3})); }),
            "embedding: expected indices of dtype i64 or i32, got f32");
  EXPECT_EQ(error_of([&] { embedding(Tensor::zeros({11}), Tensor::zeros({3}, DType::i64)); }),
            "embedding: expected a 2-d weight (V, C), got shape [11]");
}

// ---------------------------------------------------------------- index_select

TEST(IndexSelect, MatchesTorch) {
  Generator g(111);
  struct Case { Shape x; int64_t dim; int64_t k; DType idt; };
  const std::vector<Case> cases = {{{4, 6, 5}, 0, 7, DType::i64}, {{4, 6, 5}, 1, 3, DType::i32},
                                   {{4, 6, 5}, -1, 11, DType::i64}, {{13}, 0, 29, DType::i64},
                                   {{3, 17, 2}, -2, 0, DType::i64}, {{2, 3, 37}, 2, 1, DType::i32}};
  for (DType dt : {DType::f32, DType::f64}) {
    for (const auto& c : cases) {
      Tensor x = randn(c.x, g, dt);
      const int64_t d = c.dim < 0 ? c.dim + int64_t(c.x.size()) : c.dim;
      Tensor idx = rand_index({c.k}, c.x[d], g, c.idt);
      Shape os = c.x;
      os[d] = c.k;
      Tensor gout = randn(os, g, dt);
      auto ref = torch_ref("indexing.index_select", {{"x", x}, {"idx", idx}, {"g", gout}}, {{"dim", c.dim}});
      Tensor xx = x.clone().requires_grad_();
      Tensor y = index_select(xx, c.dim, idx);
      y.backward(gout);
      const std::string ctx = shape_str(c.x) + " dim " + std::to_string(c.dim);
      // k = 0 indices select nothing, by design.
      EXPECT_TRUE(test::near(y, ref.at("out"), 0, 0, c.k == 0 ? test::Empty::expected : test::Empty::fails)) << ctx;
      EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), tol(dt), tol(dt)) << ctx;
    }
  }
}

TEST(IndexSelect, NonContiguousInputAndIntegers) {
  Generator g(112);
  Tensor x = randn({7, 5, 3}, g).permute({2, 0, 1});   // (3, 7, 5)
  Tensor idx = rand_index({9}, 7, g);
  auto ref = torch_ref("indexing.index_select", {{"x", x.contiguous()}, {"idx", idx}, {"g", randn({3, 9, 5}, g)}},
                       {{"dim", 1}});
  EXPECT_TENSOR_NEAR(index_select(x, 1, idx), ref.at("out"), 0, 0);
  Tensor xi = Tensor::arange(12).reshape({3, 4});
  Tensor yi = index_select(xi, -1, Tensor::from_vector<int64_t>({3, 0, 3}, {3}));
  EXPECT_EQ(yi.to_vector<int64_t>(), (std::vector<int64_t>{3, 0, 3, 7, 4, 7, 11, 8, 11}));
}

TEST(IndexSelect, BackwardIndependentOfThreadCount) {
  Generator g(113);
  Tensor x = randn({3, 19, 257}, g);
  Tensor idx = rand_index({1031}, 19, g);
  Tensor gout = randn({3, 1031, 257}, g);
  expect_backward_thread_independent(x, gout, [&](const Tensor& xx) { return index_select(xx, 1, idx); });
}

TEST(IndexSelect, FiniteDifferences) {
  Generator g(114);
  Tensor x = randn({3, 4, 2}, g, DType::f64);
  Tensor idx = Tensor::from_vector<int64_t>({3, 1, 3, 0, 3}, {5});
  EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return index_select(in[0], -2, idx); }, {x}));
}

TEST(IndexSelect, Errors) {
  Tensor x = Tensor::zeros({4, 6, 5});
  EXPECT_EQ(error_of([&] { index_select(x, 1, Tensor::from_vector<int64_t>({0, 5, 6}, {3})); }),
            "index_select: index 6 at flat position 2 is out of range [0, 6) for dim 1 of shape [4, 6, 5]");
  EXPECT_EQ(error_of([&] { index_select(x, 1, Tensor::zeros({2, 2}, DType::i64)); }),
            "index_select: expected a 1-d index, got shape [2, 2]");
  EXPECT_EQ(error_of([&] { index_select(x, 0, Tensor::zeros({2}, DType::u8)); }),
            "index_select: expected an index of dtype i64 or i32, got u8");
  EXPECT_EQ(error_of([&] { index_select(x, 3, Tensor::zeros({2}, DType::i64)); }),
            "index_select: dim 3 is out of range for shape [4, 6, 5]");
}

// ---------------------------------------------------------------- gather

TEST(Gather, MatchesTorch) {
  Generator g(121);
  struct Case { Shape x; int64_t dim; Shape idx; };
  const std::vector<Case> cases = {{{4, 6, 5}, 1, {4, 3, 5}}, {{4, 6, 5}, -1, {3, 6, 2}},
                                   {{4, 6, 5}, 0, {7, 5, 5}}, {{17}, 0, {31}},
                                   {{5, 37}, -1, {5, 1}},     {{3, 2, 7}, 1, {2, 5, 3}},
                                   {{2, 3}, 0, {0, 3}}};
  for (DType dt : {DType::f32, DType::f64}) {
    for (const auto& c : cases) {
      Tensor x = randn(c.x, g, dt);
      const int64_t d = c.dim < 0 ? c.dim + int64_t(c.x.size()) : c.dim;
      Tensor idx = rand_index(c.idx, c.x[d], g);
      Tensor gout = randn(c.idx, g, dt);
      auto ref = torch_ref("indexing.gather", {{"x", x}, {"idx", idx}, {"g", gout}}, {{"dim", c.dim}});
      Tensor xx = x.clone().requires_grad_();
      Tensor y = gather(xx, c.dim, idx);
      y.backward(gout);
      const std::string ctx = shape_str(c.x) + " dim " + std::to_string(c.dim) + " idx " + shape_str(c.idx);
      // An empty index (0, 3) gathers nothing, by design.
      EXPECT_TRUE(test::near(y, ref.at("out"), 0, 0, shape_numel(c.idx) == 0 ? test::Empty::expected : test::Empty::fails))
          << ctx;
      EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), tol(dt), tol(dt)) << ctx;
    }
  }
}

TEST(Gather, NonContiguousInput) {
  Generator g(122);
  Tensor x = randn({6, 4}, g).t();   // (4, 6)
  Tensor idx = rand_index({4, 9}, 6, g);
  auto ref = torch_ref("indexing.gather", {{"x", x.contiguous()}, {"idx", idx}, {"g", randn({4, 9}, g)}},
                       {{"dim", 1}});
  EXPECT_TENSOR_NEAR(gather(x, 1, idx), ref.at("out"), 0, 0);
}

TEST(Gather, BackwardIndependentOfThreadCount) {
  Generator g(123);
  Tensor x = randn({5, 7, 301}, g);
  Tensor idx = rand_index({5, 211, 301}, 7, g);
  Tensor gout = randn({5, 211, 301}, g);
  expect_backward_thread_independent(x, gout, [&](const Tensor& xx) { return gather(xx, 1, idx); });
}

TEST(Gather, FiniteDifferences) {
  Generator g(124);
  Tensor x = randn({3, 4}, g, DType::f64);
  Tensor idx = Tensor::from_vector<int64_t>({0, 0, 3, 2, 1, 1}, {3, 2});
  EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return gather(in[0], 1, idx); }, {x}));
  Tensor idx0 = Tensor::from_vector<int64_t>({2, 0, 2, 2, 1, 0, 0, 1}, {2, 4});
  EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return gather(in[0], 0, idx0); }, {x}));
}

TEST(Gather, Errors) {
  Tensor x = Tensor::zeros({3, 5});
  EXPECT_EQ(error_of([&] { gather(x, 1, Tensor::from_vector<int64_t>({0, 5, 1}, {3, 1})); }),
            "gather: index 5 at flat position 1 is out of range [0, 5) for dim 1 of shape [3, 5]");
  EXPECT_EQ(error_of([&] { gather(x, 1, Tensor::zeros({3, 1}, DType::i32)); }),
            "gather: expected an index of dtype i64, got i32");
  EXPECT_EQ(error_of([&] { gather(x, 1, Tensor::zeros({3}, DType::i64)); }),
            "gather: expected an index of the same rank as x (2), got index shape [3] for x shape [3, 5]");
  EXPECT_EQ(error_of([&] { gather(x, 1, Tensor::zeros({4, 2}, DType::i64)); }),
            "gather: index shape [4, 2] is larger than x shape [3, 5] at dim 0 (only dim 1 may differ)");
  EXPECT_EQ(error_of([&] { gather(x, -3, Tensor::zeros({3, 1}, DType::i64)); }),
            "gather: dim -3 is out of range for shape [3, 5]");
}

// ---------------------------------------------------------------- masked_fill

TEST(MaskedFill, MatchesTorchBroadcastMasks) {
  Generator g(131);
  const Shape xs = {2, 3, 4, 5};
  const std::vector<Shape> masks = {{4, 5}, {2, 1, 1, 5}, {2, 3, 4, 5}, {}, {3, 1, 1}, {1}};
  const std::vector<double> values = {-INFINITY, 0.5, NAN, -1e9};
  for (DType dt : {DType::f32, DType::f64}) {
    for (const auto& ms : masks) {
      for (double v : values) {
        Tensor x = randn(xs, g, dt);
        Tensor m = rand_mask(ms, g);
        Tensor gout = randn(xs, g, dt);
        auto ref = torch_ref("indexing.masked_fill", {{"x", x}, {"mask", m}, {"g", gout}}, {{"value", num(v)}});
        Tensor xx = x.clone().requires_grad_();
        Tensor y = masked_fill(xx, m, v);
        y.backward(gout);
        const std::string ctx = "mask " + shape_str(ms) + " value " + std::to_string(v);
        EXPECT_TENSOR_NEAR(y, ref.at("out"), 0, 0) << ctx;
        EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), 0, 0) << ctx;
      }
    }
  }
}

TEST(MaskedFill, NonContiguousAndSpecialValues) {
  Generator g(132);
  Tensor x = randn({7, 6}, g).t();   // (6, 7)
  Tensor m = rand_mask({7}, g);
  auto ref = torch_ref("indexing.masked_fill", {{"x", x.contiguous()}, {"mask", m}, {"g", randn({6, 7}, g)}},
                       {{"value", 2.0}});
  EXPECT_TENSOR_NEAR(masked_fill(x, m, 2.0), ref.at("out"), 0, 0);
  Tensor s = Tensor::from_vector<float>({NAN, INFINITY, -INFINITY, NAN, 3.f}, {5});
  Tensor sm = Tensor::from_vector<uint8_t>({1, 0, 1, 0, 1}, {5});
  auto r2 = torch_ref("indexing.masked_fill", {{"x", s}, {"mask", sm}, {"g", Tensor::ones({5})}}, {{"value", 7.0}});
  EXPECT_TENSOR_NEAR(masked_fill(s, sm, 7.0), r2.at("out"), 0, 0);
  Tensor xi = Tensor::arange(6).reshape({2, 3});
  Tensor yi = masked_fill(xi, Tensor::from_vector<uint8_t>({1, 0, 1}, {3}), -5);
  EXPECT_EQ(yi.to_vector<int64_t>(), (std::vector<int64_t>{-5, 1, -5, -5, 4, -5}));
}

TEST(MaskedFill, FiniteDifferences) {
  Generator g(133);
  Tensor x = randn({3, 4}, g, DType::f64);
  Tensor m = Tensor::from_vector<uint8_t>({1, 0, 0, 1}, {4});
  EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return masked_fill(in[0], m, -3.0); }, {x}));
}

TEST(MaskedFill, Errors) {
  Tensor x = Tensor::zeros({2, 3, 4, 5});
  EXPECT_EQ(error_of([&] { masked_fill(x, Tensor::zeros({3, 5}, DType::u8), 0.0); }),
            "masked_fill: mask of shape [3, 5] does not broadcast to x of shape [2, 3, 4, 5]");
  EXPECT_EQ(error_of([&] { masked_fill(Tensor::zeros({4, 5}), Tensor::zeros({2, 4, 5}, DType::u8), 0.0); }),
            "masked_fill: mask of shape [2, 4, 5] does not broadcast to x of shape [4, 5]");
  EXPECT_EQ(error_of([&] { masked_fill(x, Tensor::zeros({4, 5}), 0.0); }),
            "masked_fill: expected a u8 mask, got f32");
  EXPECT_EQ(error_of([&] { masked_fill(Tensor::zeros({2}, DType::i64), Tensor::zeros({2}, DType::u8), INFINITY); }),
            "masked_fill: value inf does not fit dtype i64");
}

// ---------------------------------------------------------------- where

TEST(Where, MatchesTorchBroadcast) {
  Generator g(141);
  struct Case { Shape c, a, b; };
  const std::vector<Case> cases = {{{4, 5}, {4, 5}, {4, 5}}, {{4, 1}, {3, 1, 5}, {5}}, {{}, {2, 3}, {}},
                                   {{2, 1, 7}, {1, 3, 1}, {2, 3, 7}}, {{37}, {1}, {37}}, {{0, 3}, {3}, {1}}};
  for (DType dt : {DType::f32, DType::f64}) {
    for (const auto& c : cases) {
      Tensor cond = rand_mask(c.c, g);
      Tensor a = randn(c.a, g, dt), b = randn(c.b, g, dt);
      const Shape s = broadcast_shapes(broadcast_shapes(c.c, c.a, "t"), c.b, "t");
      Tensor gout = randn(s, g, dt);
      auto ref = torch_ref("indexing.where", {{"cond", cond}, {"a", a}, {"b", b}, {"g", gout}});
      Tensor aa = a.clone().requires_grad_(), bb = b.clone().requires_grad_();
      Tensor y = where(cond, aa, bb);
      y.backward(gout);
      const std::string ctx = shape_str(c.c) + " " + shape_str(c.a) + " " + shape_str(c.b);
      // A (0, 3) condition selects nothing, by design.
      EXPECT_TRUE(test::near(y, ref.at("out"), 0, 0, shape_numel(s) == 0 ? test::Empty::expected : test::Empty::fails))
          << ctx;
      EXPECT_TENSOR_NEAR(aa.grad(), ref.at("da"), tol(dt), tol(dt)) << ctx;
      EXPECT_TENSOR_NEAR(bb.grad(), ref.at("db"), tol(dt), tol(dt)) << ctx;
    }
  }
}

TEST(Where, NonContiguousAndOneSideGrad) {
  Generator g(142);
  Tensor a = randn({5, 8}, g).t();              // (8, 5)
  Tensor b = randn({8, 10}, g).slice(1, 0, 10, 2);
  Tensor cond = rand_mask({8, 5}, g);
  Tensor gout = randn({8, 5}, g);
  auto ref = torch_ref("indexing.where", {{"cond", cond}, {"a", a.contiguous()}, {"b", b.contiguous()}, {"g", gout}});
  Tensor bb = b.contiguous().requires_grad_();
  Tensor y = where(cond, a, bb);
  y.backward(gout);
  EXPECT_TENSOR_NEAR(y, ref.at("out"), 0, 0);
  EXPECT_TENSOR_NEAR(bb.grad(), ref.at("db"), 0, 0);
}

TEST(Where, FiniteDifferences) {
  Generator g(143);
  Tensor a = randn({3, 4}, g, DType::f64), b = randn({4}, g, DType::f64);
  Tensor cond = Tensor::from_vector<uint8_t>({1, 0, 1}, {3, 1});
  EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return where(cond, in[0], in[1]); }, {a, b}));
}

TEST(Where, Errors) {
  EXPECT_EQ(error_of([&] { where(Tensor::zeros({3}), Tensor::zeros({3}), Tensor::zeros({3})); }),
            "where: expected a u8 condition, got f32");
  EXPECT_EQ(error_of([&] { where(Tensor::zeros({3}, DType::u8), Tensor::zeros({3}), Tensor::zeros({3}, DType::f64)); }),
            "where: a and b dtypes differ (f32 and f64); convert one with .to()");
  EXPECT_EQ(error_of([&] { where(Tensor::zeros({3}, DType::u8), Tensor::zeros({4}), Tensor::zeros({4})); }),
            "where: shapes [3] and [4] do not broadcast (dim 0: 3 vs 4)");
}

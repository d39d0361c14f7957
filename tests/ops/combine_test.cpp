// concat, stack, split, chunk: against PyTorch (forward + backward, f32 and f64, negative dims,
// odd and large sizes, non-contiguous inputs), finite differences in f64, and the error messages.
#include <gtest/gtest.h>

#include "attn/attn.h"
#include "attn/ops/combine.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::torch_ref;

namespace {

double tol(DType dt) { return dt == DType::f32 ? 1e-6 : 1e-12; }

std::string shapes_str(const std::vector<Shape>& ss) {
  std::string s;
  for (const auto& x : ss) s += shape_str(x) + " ";
  return s;
}

// sum_i <piece_i, g_i>, the scalar whose gradient the Python side also takes.
Tensor pieces_dot(const std::vector<Tensor>& pieces, const std::vector<Tensor>& gs) {
  Tensor total;
  for (size_t i = 0; i < pieces.size(); ++i) {
    Tensor t = sum(pieces[i] * gs[i]);
    total = total.defined() ? total + t : t;
  }
  return total;
}

// pieces (of xx, a grad-requiring copy of x) against PyTorch's `op` on x with args (tests/golden/gen/
// indexing.py): as many pieces as op_count gives, each one the same (a view of xx when views), and
// the gradient of sum_i <piece_i, g_i> for random g_i.
void expect_pieces_like_torch(const std::string& op, const nlohmann::json& args, const Tensor& x, const Tensor& xx,
                              const std::vector<Tensor>& pieces, bool views, Generator& g, const std::string& ctx) {
  auto count = torch_ref("indexing." + op + "_count", {{"x", x}}, args);
  ASSERT_EQ(int64_t(pieces.size()), int64_t(count.at("n").item())) << ctx;
  test::Tensors in = {{"x", x}};
  std::vector<Tensor> gs;
  for (size_t i = 0; i < pieces.size(); ++i) {
    gs.push_back(randn(pieces[i].shape(), g, x.dtype()));
    in["g" + std::to_string(i)] = gs.back();
    if (views) EXPECT_TRUE(pieces[i].shares_storage(xx)) << ctx << " piece " << i << " is a view";
  }
  auto ref = torch_ref("indexing." + op, in, args);
  for (size_t i = 0; i < pieces.size(); ++i)   // a piece of size 0 (sizes {4, 0, ...}, or of an empty x) by design
    EXPECT_TRUE(test::near(pieces[i], ref.at("out" + std::to_string(i)), 0, 0,
                           pieces[i].numel() == 0 ? test::Empty::expected : test::Empty::fails))
        << ctx << " piece " << i;
  if (x.numel() > 0) {
    pieces_dot(pieces, gs).backward();
    EXPECT_TENSOR_NEAR(xx.grad(), ref.at("dx"), tol(x.dtype()), tol(x.dtype())) << ctx;
  }
}

}  // namespace

TEST(Concat, MatchesTorch) {
  Generator g(201);
  struct Case { std::vector<Shape> xs; int64_t dim; };
  const std::vector<Case> cases = {
      {{{2, 3, 4}, {2, 5, 4}, {2, 1, 4}}, 1},
      {{{3, 4, 7}, {3, 4, 2}}, -1},
      {{{300, 1000}, {17, 1000}}, 0},          // blocks larger than one memcpy piece
      {{{13}, {0}, {29}}, 0},
      {{{5, 0, 3}, {5, 2, 3}}, -2},
      {{{2, 3}, {0}, {4, 3}}, 0},              // legacy empty 1-d tensors are skipped
      {{{1, 1, 1}}, 2},
      {{{3, 7}, {3, 11}, {3, 1}, {3, 5}}, 1}};
  for (DType dt : {DType::f32, DType::f64}) {
    for (const auto& c : cases) {
      std::vector<Tensor> xs;
      test::Tensors in;
      for (size_t i = 0; i < c.xs.size(); ++i) {
        xs.push_back(randn(c.xs[i], g, dt));
        in["x" + std::to_string(i)] = xs.back();
      }
      std::vector<Tensor> leaves;
      for (const auto& x : xs) leaves.push_back(x.clone().requires_grad_());
      Tensor y = concat(leaves, c.dim);
      Tensor gout = randn(y.shape(), g, dt);
      in["g"] = gout;
      auto ref = torch_ref("indexing.concat", in, {{"n", c.xs.size()}, {"dim", c.dim}});
      y.backward(gout);
      const std::string ctx = shapes_str(c.xs) + "dim " + std::to_string(c.dim);
      EXPECT_TENSOR_NEAR(y, ref.at("out"), 0, 0) << ctx;
      for (size_t i = 0; i < leaves.size(); ++i) {
        const std::string k = "dx" + std::to_string(i);
        // An empty input ({0}, (5, 0, 3)) has an empty gradient, by design.
        const test::Empty empty = leaves[i].numel() == 0 ? test::Empty::expected : test::Empty::fails;
        if (ref.count(k)) EXPECT_TRUE(test::near(leaves[i].grad(), ref.at(k), 0, 0, empty)) << ctx << k;
        else EXPECT_FALSE(leaves[i].grad().defined()) << ctx << k;
      }
    }
  }
}

TEST(Concat, NonContiguousAndPartialGrad) {
  Generator g(202);
  Tensor a = randn({6, 4}, g).t();                  // (4, 6) strided
  Tensor b = randn({4, 10}, g).slice(1, 0, 10, 3);  // (4, 4) strided
  Tensor c = randn({4, 2}, g);
  Tensor gout = randn({4, 12}, g);
  auto ref = torch_ref("indexing.concat",
                       {{"x0", a.contiguous()}, {"x1", b.contiguous()}, {"x2", c}, {"g", gout}},
                       {{"n", 3}, {"dim", 1}});
  Tensor cc = c.clone().requires_grad_();
  Tensor y = concat({a, b, cc}, -1);
  y.backward(gout);
  EXPECT_TENSOR_NEAR(y, ref.at("out"), 0, 0);
  EXPECT_TENSOR_NEAR(cc.grad(), ref.at("dx2"), 0, 0);
  // Integer tensors concatenate too.
  Tensor i = concat({Tensor::arange(3).reshape({1, 3}), Tensor::arange(3).reshape({1, 3})}, 0);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
}

TEST(Concat, IndependentOfThreadCount) {
  Generator g(203);
  Tensor a = randn({3, 70001}, g), b = randn({3, 5}, g);
  const int prev = get_num_threads();
  set_num_threads(1);
  Tensor y1 = concat({a, b}, 1);
  set_num_threads(2);
  Tensor y2 = concat({a, b}, 1);
  set_num_threads(prev);
  EXPECT_TENSOR_NEAR(y1, y2, 0, 0);
  EXPECT_TENSOR_NEAR(y1.slice(1, 0, 70001), a, 0, 0);
  EXPECT_TENSOR_NEAR(y1.slice(1, 70001, 70006), b, 0, 0);
}

TEST(Concat, FiniteDifferences) {
  Generator g(204);
  Tensor a = randn({2, 3}, g, DType::f64), b = randn({2, 2}, g, DType::f64);
  EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return concat({in[0], in[1], in[0]}, 1); }, {a, b}));
}

TEST(Concat, Errors) {
  EXPECT_EQ(error_of([&] { concat({}, 0); }), "concat: expected a non-empty list of tensors");
  EXPECT_EQ(error_of([&] { concat({Tensor::zeros({2, 3}), Tensor::zeros({3, 3})}, 1); }),
            "concat: tensor 1 has shape [3, 3] but tensor 0 has shape [2, 3]; sizes must match except in dim 1");
  EXPECT_EQ(error_of([&] { concat({Tensor::zeros({2, 3}), Tensor::zeros({2, 3, 1})}, 0); }),
            "concat: tensor 1 has shape [2, 3, 1] but tensor 0 has shape [2, 3]; sizes must match except in dim 0");
  EXPECT_EQ(error_of([&] { concat({Tensor::zeros({2, 3}), Tensor::zeros({2, 3}, DType::f64)}, 0); }),
            "concat: tensor 1 has dtype f64 but tensor 0 has dtype f32");
  EXPECT_EQ(error_of([&] { concat({Tensor::zeros({2, 3})}, 2); }), "concat: dim 2 is out of range for shape [2, 3]");
  EXPECT_EQ(error_of([&] { concat({Tensor::scalar(1.0)}, 0); }),
            "concat: tensor 0 is 0-d (shape []); only tensors with dims can be concatenated");
}

TEST(Stack, MatchesTorch) {
  Generator g(211);
  struct Case { Shape s; int64_t n; int64_t dim; };
  const std::vector<Case> cases = {{{3, 4}, 2, 0}, {{3, 4}, 3, 1}, {{3, 4}, 4, -1}, {{3, 4}, 2, 2},
                                   {{}, 5, 0},     {{7, 1, 5}, 3, -2}};
  for (DType dt : {DType::f32, DType::f64}) {
    for (const auto& c : cases) {
      std::vector<Tensor> leaves;
      test::Tensors in;
      for (int64_t i = 0; i < c.n; ++i) {
        Tensor x = randn(c.s, g, dt);
        in["x" + std::to_string(i)] = x;
        leaves.push_back(x.clone().requires_grad_());
      }
      Tensor y = stack(leaves, c.dim);
      Tensor gout = randn(y.shape(), g, dt);
      in["g"] = gout;
      auto ref = torch_ref("indexing.stack", in, {{"n", c.n}, {"dim", c.dim}});
      y.backward(gout);
      const std::string ctx = shape_str(c.s) + " dim " + std::to_string(c.dim);
      EXPECT_TENSOR_NEAR(y, ref.at("out"), 0, 0) << ctx;
      for (int64_t i = 0; i < c.n; ++i)
        EXPECT_TENSOR_NEAR(leaves[size_t(i)].grad(), ref.at("dx" + std::to_string(i)), 0, 0) << ctx << i;
    }
  }
}

TEST(Stack, FiniteDifferencesAndErrors) {
  Generator g(212);
  Tensor a = randn({2, 3}, g, DType::f64), b = randn({2, 3}, g, DType::f64);
  EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return stack({in[0], in[1]}, 1); }, {a, b}));
  EXPECT_EQ(error_of([&] { stack({Tensor::zeros({2, 3}), Tensor::zeros({3, 2})}, 0); }),
            "stack: tensor 1 has shape [3, 2] but tensor 0 has shape [2, 3]; all must have the same shape");
  EXPECT_EQ(error_of([&] { stack({Tensor::zeros({2, 3})}, 3); }),
            "stack: dim 3 is out of range for stacking tensors of shape [2, 3] (expected a dim in [-3, 2])");
  EXPECT_EQ(error_of([&] { stack({}, 0); }), "stack: expected a non-empty list of tensors");
  EXPECT_EQ(error_of([&] { stack({Tensor::zeros({2}), Tensor::zeros({2}, DType::i64)}, 0); }),
            "stack: tensor 1 has dtype i64 but tensor 0 has dtype f32");
}

TEST(Split, MatchesTorch) {
  Generator g(221);
  struct Case { Shape s; int64_t dim; int64_t split_size; std::vector<int64_t> sizes; };
  const std::vector<Case> cases = {{{7, 10}, 1, 3, {}},   {{7, 10}, -2, 2, {}},  {{7, 10}, 0, 100, {}},
                                   {{5, 13, 2}, 1, 0, {4, 0, 6, 3}}, {{31}, -1, 0, {31}},
                                   {{4, 9}, -1, 0, {2, 7}}, {{3, 0}, 1, 2, {}}};
  for (DType dt : {DType::f32, DType::f64}) {
    for (const auto& c : cases) {
      Tensor x = randn(c.s, g, dt);
      Tensor xx = x.clone().requires_grad_();
      std::vector<Tensor> pieces = c.sizes.empty() ? split(xx, c.split_size, c.dim) : split(xx, c.sizes, c.dim);
      nlohmann::json args = {{"dim", c.dim}};
      if (c.sizes.empty()) args["split_size"] = c.split_size;
      else args["sizes"] = c.sizes;
      expect_pieces_like_torch("split", args, x, xx, pieces, true, g,
                               shape_str(c.s) + " dim " + std::to_string(c.dim));
    }
  }
}

TEST(Chunk, MatchesTorch) {
  Generator g(231);
  struct Case { Shape s; int64_t chunks; int64_t dim; };
  const std::vector<Case> cases = {{{5, 13}, 4, -1}, {{5, 13}, 6, 0}, {{5, 13}, 13, 1}, {{5, 13}, 1, 0},
                                   {{2, 3, 17}, 3, 2}, {{12}, 5, 0}, {{4, 0}, 3, 1}};
  for (DType dt : {DType::f32, DType::f64}) {
    for (const auto& c : cases) {
      Tensor x = randn(c.s, g, dt);
      Tensor xx = x.clone().requires_grad_();
      std::vector<Tensor> pieces = chunk(xx, c.chunks, c.dim);
      nlohmann::json args = {{"dim", c.dim}, {"chunks", c.chunks}};
      expect_pieces_like_torch("chunk", args, x, xx, pieces, false, g,
                               shape_str(c.s) + " chunks " + std::to_string(c.chunks));
    }
  }
}

TEST(Split, FiniteDifferences) {
  Generator g(241);
  Tensor x = randn({3, 7}, g, DType::f64);
  EXPECT_TRUE(test::gradcheck(
      [&](const std::vector<Tensor>& in) {
        auto p = split(in[0], 3, -1);                    // 3, 3, 1
        return concat({p[2], p[0] * p[1]}, 1);
      },
      {x}));
  EXPECT_TRUE(test::gradcheck(
      [&](const std::vector<Tensor>& in) {
        auto p = chunk(in[0], 2, 0);                     // 2, 1 rows
        return sum(p[0]) * p[1];
      },
      {x}));
}

TEST(Split, Errors) {
  Tensor x = Tensor::zeros({4, 6});
  EXPECT_EQ(error_of([&] { split(x, std::vector<int64_t>{2, 3}, 1); }),
            "split: sizes [2, 3] sum to 5 but dim 1 of shape [4, 6] has size 6");
  EXPECT_EQ(error_of([&] { split(x, std::vector<int64_t>{7, -1}, 1); }),
            "split: sizes must be non-negative, got [7, -1]");
  EXPECT_EQ(error_of([&] { split(x, 0, 1); }), "split: split_size must be positive, got 0");
  EXPECT_EQ(error_of([&] { split(x, 2, -3); }), "split: dim -3 is out of range for shape [4, 6]");
  EXPECT_EQ(error_of([&] { chunk(x, 0, 0); }), "chunk: chunks must be positive, got 0");
  EXPECT_EQ(error_of([&] { chunk(Tensor::scalar(1.0), 2, 0); }),
            "chunk: expected a tensor with at least 1 dim, got shape []");
}

// The ops' side of data parallelism, in one process: (1) with Generator::set_batch_shard, dropout,
// attention dropout and drop-path on a part of a batch draw exactly what they draw for that part of
// the whole batch, and the parts never share counters; (2) synchronized batch norm with a stand-in sum
// over two identical processes gives the outputs and input gradients of one process on the batch
// twice over, and the running statistics of the combined batch.
#include <gtest/gtest.h>

#include <vector>

#include "attn/attn.h"
#include "attn/nn/drop_path.h"

using namespace attn;

namespace {

Tensor part(const Tensor& t, int64_t rank, int64_t parts) {
  const int64_t n = t.size(0) / parts;
  return t.slice(0, rank * n, (rank + 1) * n).contiguous();
}

void expect_same(const Tensor& a, const Tensor& b) {
  const auto x = a.contiguous().to_vector<float>(), y = b.contiguous().to_vector<float>();
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], y[i]) << i;
}

TEST(DataParallelDraws, EachPartDrawsWhatItDrawsInTheWholeBatch) {
  manual_seed(0);
  const Tensor x = Tensor::randn({8, 5, 6});
  Generator whole(11);
  whole.set_state(11, 1000);
  const Tensor full_dropout = dropout(x, 0.3, true, whole);
  const Tensor full_path = nn::drop_path(x, 0.5, true, whole);
  const uint64_t whole_end = whole.offset();
  for (int64_t r = 0; r < 2; ++r) {
    Generator g(11);
    g.set_state(11, 1000);
    g.set_batch_shard(r, 2);
    const Tensor xr = part(x, r, 2);
    expect_same(dropout(xr, 0.3, true, g), part(full_dropout, r, 2));
    expect_same(nn::drop_path(xr, 0.5, true, g), part(full_path, r, 2));
    EXPECT_EQ(g.offset(), whole_end) << "every part leaves the generator where the whole batch does";
  }
  // Without a shard, reserve_batch is reserve: the one-process stream is unchanged.
  Generator a(3), b(3);
  EXPECT_EQ(a.reserve_batch(17), b.reserve(17));
  EXPECT_EQ(a.offset(), b.offset());
}

TEST(DataParallelDraws, AttentionDropoutOfAPartIsThatPartOfTheWholeBatch) {
  manual_seed(1);
  const Tensor q = Tensor::randn({4, 2, 7, 8}), k = Tensor::randn({4, 2, 7, 8}), v = Tensor::randn({4, 2, 7, 8});
  Generator whole(5);
  SdpaOptions o;
  o.dropout_p = 0.2;
  o.generator = &whole;
  const Tensor full = scaled_dot_product_attention(q, k, v, Tensor(), o).out;
  for (int64_t r = 0; r < 2; ++r) {
    Generator g(5);
    g.set_batch_shard(r, 2);
    SdpaOptions po = o;
    po.generator = &g;
    expect_same(scaled_dot_product_attention(part(q, r, 2), part(k, r, 2), part(v, r, 2), Tensor(), po).out,
                part(full, r, 2));
  }
}

TEST(SyncBatchNorm, TwoIdenticalProcessesEqualOneOnTheBatchTwice) {
  manual_seed(2);
  const Tensor x = Tensor::randn({3, 4, 5, 5}, DType::f64);
  const Tensor dy = Tensor::randn({3, 4, 5, 5}, DType::f64);
  const Tensor x2 = concat({x, x}, 0), dy2 = concat({dy, dy}, 0);
  auto run = [](const Tensor& in, const Tensor& dout, bool synced, Tensor& rm, Tensor& rv, Tensor& dx, Tensor& dw) {
    Tensor xi = in.detach().requires_grad_();
    Tensor w = Tensor::ones({4}, DType::f64).requires_grad_(), b = Tensor::zeros({4}, DType::f64).requires_grad_();
    rm = Tensor::zeros({4}, DType::f64);
    rv = Tensor::ones({4}, DType::f64);
    if (synced) set_batch_norm_sync([](double* v, int64_t n) { for (int64_t i = 0; i < n; ++i) v[i] *= 2; });
    Tensor y = batch_norm(xi, rm, rv, w, b, true);
    set_batch_norm_sync({});   // the forward kept it for its backward
    sum(mul(y, dout)).backward();
    dx = xi.grad();
    dw = w.grad();
    return y;
  };
  Tensor rm1, rv1, dx1, dw1, rm2, rv2, dx2, dw2;
  const Tensor y1 = run(x, dy, true, rm1, rv1, dx1, dw1);
  const Tensor y2 = run(x2, dy2, false, rm2, rv2, dx2, dw2);
  auto near = [](const Tensor& a, const Tensor& b) {
    const auto u = a.contiguous().to_vector<double>(), w = b.contiguous().to_vector<double>();
    ASSERT_EQ(u.size(), w.size());
    for (size_t i = 0; i < u.size(); ++i) ASSERT_NEAR(u[i], w[i], 1e-12) << i;
  };
  near(y1, part(y2, 0, 2));
  near(dx1, part(dx2, 0, 2));
  near(rm1, rm2);
  near(rv1, rv2);   // the unbiased variance of the combined batch (count 2 x 75)
  near(mul(dw1, Tensor::scalar(2.0, DType::f64)), dw2);   // the weight gradient stays this process's own
}

}  // namespace

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "attn/attn.h"
#include "errors.h"
#include "isa.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;

TEST(Tensor, StorageIsAligned) {
  Tensor t = Tensor::empty({3, 5});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
  EXPECT_EQ(t.strides(), (Shape{5, 1}));
  EXPECT_TRUE(t.is_contiguous());
}

TEST(Memory, LargeTensorsReuseCachedBlocksOfTheirSizeClass) {
  if (!block_cache_enabled()) GTEST_SKIP() << "sanitizer build: every tensor comes from malloc";
  release_cached_memory();
  ASSERT_EQ(memory_stats().cached_bytes, 0);
  const int64_t n = (int64_t(3) << 20) / 4;   // 3 MiB of f32: its own size class
  void* first = nullptr;
  {
    Tensor t = Tensor::empty({n});
    first = t.raw_data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
    std::memset(first, 1, size_t(n) * 4);   // all of it is writable
  }
  EXPECT_EQ(memory_stats().cached_bytes, int64_t(3) << 20);
  {
    Tensor a = Tensor::empty({n - 100});   // a little smaller: the same class, the same block
    EXPECT_EQ(a.raw_data(), first);
    EXPECT_EQ(memory_stats().cached_bytes, 0);
    Tensor b = Tensor::empty({n});   // nothing cached now: a new block
    EXPECT_NE(b.raw_data(), first);
    Tensor c = Tensor::zeros({2 * n});   // zeros() still clears a reused block
    c.fill_(7.0);
  }
  {
    Tensor c = Tensor::zeros({2 * n});   // takes the block the first c freed
    const float* pc = c.data<float>();
    int64_t nonzero = 0;
    for (int64_t i = 0; i < 2 * n; ++i) nonzero += pc[i] != 0.0f;
    EXPECT_EQ(nonzero, 0);
  }
  EXPECT_EQ(memory_stats().cached_bytes, (int64_t(3) << 20) * 2 + (int64_t(6) << 20));
  { Tensor small = Tensor::empty({1000}); }   // under 1 MiB: malloc, never cached
  EXPECT_EQ(memory_stats().cached_bytes, (int64_t(3) << 20) * 2 + (int64_t(6) << 20));
  release_cached_memory();
  EXPECT_EQ(memory_stats().cached_bytes, 0);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = Tensor::arange(24, DType::f32).reshape({2, 3, 4});
  Tensor p = t.permute({2, 0, 1});
  EXPECT_TRUE(p.shares_storage(t));
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.at({3, 1, 2}), t.at({1, 2, 3}));
  EXPECT_FALSE(p.is_contiguous());
  Tensor c = p.contiguous();
  EXPECT_FALSE(c.shares_storage(t));
  EXPECT_EQ(c.at({3, 1, 2}), 23.0);
  Tensor s = t.slice(2, 1, 4, 2);   // [..., 1::2]
  EXPECT_EQ(s.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(s.at({1, 2, 1}), 23.0);
  Tensor e = t.select(0, 1).unsqueeze(0).expand({5, 3, 4});
  EXPECT_EQ(e.strides()[0], 0);
  EXPECT_EQ(e.at({4, 0, 0}), 12.0);
  s.fill_(-1.0);
  EXPECT_EQ(t.at({0, 0, 1}), -1.0);
  EXPECT_EQ(t.at({0, 0, 2}), 2.0);
}

TEST(Tensor, ViewVersusReshape) {
  Tensor t = Tensor::arange(12, DType::f32).reshape({3, 4});
  Tensor tt = t.t();
  EXPECT_EQ(error_of([&] { tt.view({12}); }),
            "view: shape [12] is not compatible with the strides of input shape [4, 3] "
            "(strides [1, 4]); use reshape()");
  Tensor r = tt.reshape({12});
  EXPECT_EQ(r.at({1}), 4.0);
  EXPECT_EQ(t.reshape({2, -1}).shape(), (Shape{2, 6}));
}

TEST(Tensor, DTypeConversion) {
  Tensor f = Tensor::from_vector<float>({1.5f, -2.25f, 3.0e38f, 1.0f / 3.0f}, {4});
  Tensor b = f.to(DType::bf16);
  Tensor back = b.to(DType::f32);
  EXPECT_EQ(back.at({0}), 1.5);
  EXPECT_EQ(back.at({1}), -2.25);
  EXPECT_NEAR(back.at({3}), 1.0 / 3.0, 1e-2);
  EXPECT_EQ(f.to(DType::i64).at({1}), -2.0);
  EXPECT_EQ(f.to(DType::f64).dtype(), DType::f64);
  // Out-of-range float -> integer: defined as x86's truncating conversions (what PyTorch and NumPy
  // give there), not left undefined: NaN and overflow -> the conversion's minimum, u8 wraps.
  Tensor g = Tensor::from_vector<float>({3.0e38f, NAN, -354.26f, 300.7f, 3.0e9f, -7.9f}, {6});
  EXPECT_EQ(g.to(DType::i64).to_vector<int64_t>(),
            (std::vector<int64_t>{INT64_MIN, INT64_MIN, -354, 300, 3000000000LL, -7}));
  EXPECT_EQ(g.to(DType::i32).to_vector<int32_t>(),
            (std::vector<int32_t>{INT32_MIN, INT32_MIN, -354, 300, INT32_MIN, -7}));
  EXPECT_EQ(g.to(DType::u8).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 0, 158, 44, 0, 249}));
  EXPECT_EQ(g.to(DType::bf16).to(DType::u8).to_vector<uint8_t>()[2], 158);   // bf16(-354.26) = -354
}

TEST(Tensor, Bf16ConversionOfEveryKindOfFloatEqualsTheScalarDefinition) {
  // The contiguous f32 -> bf16 copy (the vector kernels of each ISA, split across threads) must give
  // the scalar conversion's bits for ties (even and odd), values that round up into the next binade or to infinity,
  // subnormals, +-0, +-inf and NaNs with payloads, here among random bit patterns; and bf16 -> f32 is exact.
  std::vector<uint32_t> bits = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u,
                                0x7f800001u, 0x7fbfffffu, 0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x7f7fffffu,
                                0x7f7f8000u, 0x00000001u, 0x807fffffu, 0x0000ffffu, 0x00008000u, 0x3fffffffu,
                                0xff800001u, 0xffffffffu, 0x7fffffffu, 0xbf808000u, 0xbf818000u};
  Generator g(5);
  // More than one thread's chunk (2^18 elements), and a length that leaves a tail for every vector width.
  for (int i = 0; i < 600013; ++i) bits.push_back(uint32_t(g.next_u64()));
  std::vector<float> f(bits.size());
  std::memcpy(f.data(), bits.data(), bits.size() * 4);
  const Tensor ft = Tensor::from_vector<float>(f, {int64_t(f.size())});
  test::IsaRestore restore;
  for (Isa isa : test::supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    set_isa(isa);
    for (int64_t n : {int64_t(f.size()), int64_t(23), int64_t(7)}) {
      Tensor b = ft.slice(0, 0, n).to(DType::bf16);
      const bf16* p = b.data<bf16>();
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i)
        if (p[i].bits != bf16::from_float(f[size_t(i)]).bits && wrong++ < 5)
          ADD_FAILURE() << "f32 bits 0x" << std::hex << bits[size_t(i)] << ": got 0x" << p[i].bits << ", expected 0x"
                        << bf16::from_float(f[size_t(i)]).bits;
      EXPECT_EQ(wrong, 0);
      EXPECT_EQ(p[3].bits, 0xff80u);                  // -inf
      if (n > 12) {
        EXPECT_EQ(p[8].bits, 0x3f80u);                // a tie with an even lower half stays
        EXPECT_EQ(p[9].bits, 0x3f82u);                // a tie with an odd lower half rounds up
        EXPECT_EQ(p[12].bits, 0x7f80u);               // the largest values round to infinity
      }
      // Back to f32: the bf16 bits in the high half, exactly.
      const std::vector<float> back = b.to(DType::f32).to_vector<float>();
      int64_t wrong_back = 0;
      for (int64_t i = 0; i < n; ++i) {
        uint32_t u;
        std::memcpy(&u, &back[size_t(i)], 4);
        if (u != uint32_t(p[i].bits) << 16 && wrong_back++ < 5)
          ADD_FAILURE() << "bf16 0x" << std::hex << p[i].bits << " -> f32 0x" << u;
      }
      EXPECT_EQ(wrong_back, 0);
    }
    // A strided view whose rows are contiguous (the heads of a packed projection: rows of 32 of every 96)
    // and a transposed one: the same bits as the contiguous conversion of the same values, both ways.
    const Tensor rows = ft.slice(0, 0, 600000).view({1000, 2, 3, 100}).permute({1, 0, 2, 3}).select(2, 1);
    const Tensor cols = ft.slice(0, 0, 600000).view({600, 1000}).transpose(0, 1);
    auto raw = [](const Tensor& t) {   // the bytes of a contiguous tensor (NaNs compare by their bits)
      const auto* p = static_cast<const uint8_t*>(t.raw_data());
      return std::vector<uint8_t>(p, p + t.numel() * int64_t(dtype_size(t.dtype())));
    };
    for (const Tensor& view : {rows, cols}) {
      const Tensor b = view.to(DType::bf16);
      EXPECT_EQ(raw(b), raw(view.contiguous().to(DType::bf16)));
      const Tensor bt = b.transpose(0, 1);
      EXPECT_EQ(raw(bt.to(DType::f32)), raw(bt.contiguous().to(DType::f32)));
    }
  }
}

TEST(Tensor, BadInputMessages) {
  Tensor t = Tensor::zeros({2, 3});
  EXPECT_EQ(error_of([&] { t.reshape({4, 2}); }),
            "reshape: shape [4, 2] is invalid for input of shape [2, 3] (6 elements)");
  EXPECT_EQ(error_of([&] { t.expand({2, 4}); }), "expand: cannot expand shape [2, 3] to [2, 4] (dim 1: 3 vs 4)");
  EXPECT_EQ(error_of([&] { t.data<double>(); }), "Tensor::data: tensor is f32, accessed as f64");
  EXPECT_THROW(t.select(1, 3), Error);
  EXPECT_THROW(t.permute({0, 0}), Error);
}

TEST(Tensor, PrintIsReadable) {
  Tensor t = Tensor::arange(6, DType::i64).reshape({2, 3});
  EXPECT_EQ(t.str(), "Tensor(i64, shape=[2, 3])\n[[0, 1, 2],\n [3, 4, 5]]");
}

TEST(Rng, SeededAndThreadIndependent) {
  Generator g1(42), g2(42);
  Tensor a = randn({1000}, g1), b = randn({1000}, g2);
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  set_num_threads(1);
  Generator g3(42);
  Tensor c = randn({1000}, g3);
  set_num_threads(2);
  EXPECT_EQ(a.to_vector<float>(), c.to_vector<float>());
  // Moments of N(0,1) and U[0,1).
  Generator g(7);
  Tensor n = randn({200000}, g, DType::f64);
  EXPECT_NEAR(mean(n).item(), 0.0, 0.01);
  EXPECT_NEAR(var(n, {0}).item(), 1.0, 0.02);
  Tensor u = rand({200000}, g, DType::f64);
  EXPECT_NEAR(mean(u).item(), 0.5, 0.005);
  Tensor bern = bernoulli({200000}, 0.3, g);
  EXPECT_NEAR(mean(bern).item(), 0.3, 0.005);
  Tensor perm = randperm(100, g);
  std::vector<int64_t> v = perm.to_vector<int64_t>();
  std::sort(v.begin(), v.end());
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(v[i], i);
}

TEST(Rng, TruncNormalStaysInBounds) {
  Generator g(3);
  Tensor t = trunc_normal({100000}, 0.0, 0.02, -0.04, 0.04, g, DType::f64);
  std::vector<double> v = t.to_vector<double>();
  for (double x : v) ASSERT_TRUE(x >= -0.04 && x <= 0.04);
  // Variance of N(0, s) truncated at +-2s: s^2 (1 - 2*2*phi(2)/(Phi(2)-Phi(-2))) = 0.7737 s^2.
  EXPECT_NEAR(var(t, {0}).item() / (0.02 * 0.02), 0.7737, 0.01);
}

TEST(Autograd, AccumulatesAndRetains) {
  Tensor x = Tensor::from_vector<double>({1, 2, 3}, {3});
  x.requires_grad_();
  Tensor y = x * x;
  y.retain_grad();
  Tensor z = sum(y) + sum(x * 3.0);
  z.backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(y.grad().to_vector<double>(), (std::vector<double>{1, 1, 1}));
  // A second backward accumulates into x.grad.
  sum(x * 2.0).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{7, 9, 11}));
  {
    NoGradGuard g;
    Tensor w = x * 2.0;
    EXPECT_FALSE(w.requires_grad());
  }
  EXPECT_EQ(error_of([&] { (x * 2.0).backward(); }),
            "backward: a gradient is needed for a non-scalar output of shape [3]");
}

// Slice / select gradients are added in place into one buffer per input (Node::grad_is_view) instead
// of one full-size zero tensor per view: q, k, v selected from a packed qkv, overlapping slices, a view
// of a view, a view gradient meeting an ordinary one, a retained intermediate (whose .grad must not be
// written through), a second backward with retain_graph. Every gradient equals the one built by hand.
TEST(Autograd, ViewGradientsAccumulateInOneBuffer) {
  Generator g(5);
  Tensor x = randn({4, 3, 5}, g, DType::f64);
  Tensor w = randn({4, 5}, g, DType::f64);
  x.requires_grad_();
  Tensor h = x * 2.0;            // a node: the slices below feed it, not a leaf
  h.retain_grad();
  Tensor q = h.select(1, 0), k = h.select(1, 1), v = h.select(1, 2);
  Tensor a = h.slice(2, 1, 4), b = h.slice(2, 0, 2);           // overlapping at column 1
  Tensor c = h.slice(0, 1, 3).select(1, 2);                    // a view of a view
  Tensor loss = sum(q * w) + sum(k * k) + sum(v) * 3.0 + sum(a * a) + sum(b) + sum(c * 5.0) + sum(h * h);
  loss.backward(Tensor(), true);
  // By hand: dL/dh, then dL/dx = 2 dL/dh.
  Tensor hd = h.detach();
  Tensor gh = hd * 2.0;                                       // sum(h * h)
  Tensor ref = gh.clone();
  {
    NoGradGuard ng;
    auto at = [&](int64_t i, int64_t j, int64_t l) -> double& {
      return static_cast<double*>(ref.impl().storage->data)[(i * 3 + j) * 5 + l];
    };
    auto hv = [&](int64_t i, int64_t j, int64_t l) { return hd.at({i, j, l}); };
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t l = 0; l < 5; ++l) {
        at(i, 0, l) += w.at({i, l});
        at(i, 1, l) += 2.0 * hv(i, 1, l);
        at(i, 2, l) += 3.0;
        for (int64_t j = 0; j < 3; ++j) {
          if (l >= 1 && l < 4) at(i, j, l) += 2.0 * hv(i, j, l);
          if (l < 2) at(i, j, l) += 1.0;
        }
        if (i >= 1 && i < 3) at(i, 2, l) += 5.0;
      }
  }
  EXPECT_TENSOR_NEAR(h.grad(), ref, 1e-12, 0);
  EXPECT_TENSOR_NEAR(x.grad(), ref * 2.0, 1e-12, 0);
  // The retained gradient is not written through by the second pass's in-place view additions: the
  // tensor handed out after the first pass keeps its values; both .grad fields accumulate.
  Tensor hg = h.grad();
  Tensor snapshot = hg.clone();
  loss.backward();
  EXPECT_TENSOR_NEAR(x.grad(), ref * 4.0, 1e-12, 0);
  EXPECT_TENSOR_NEAR(h.grad(), ref * 2.0, 1e-12, 0);
  EXPECT_TENSOR_NEAR(hg, snapshot, 0, 0);
  // Views of a leaf take the ordinary path (the leaf's .grad).
  Tensor y = randn({3, 4}, g, DType::f64);
  y.requires_grad_();
  (sum(y.select(0, 1) * 2.0) + sum(y.slice(1, 0, 2))).backward();
  Tensor yref = Tensor::zeros({3, 4}, DType::f64);
  {
    NoGradGuard ng;
    yref.select(0, 1).fill_(2.0);
    Tensor part = yref.slice(1, 0, 2);
    add_(part, Tensor::ones({3, 2}, DType::f64));
  }
  EXPECT_TENSOR_NEAR(y.grad(), yref, 0, 0);
}

TEST(Autograd, ViewGradients) {
  Tensor x = Tensor::randn({2, 3, 4}, DType::f64);
  EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& in) {
    return in[0].permute({2, 0, 1}).slice(0, 1, 4, 2).reshape({2, 6}).select(1, 3) * 2.0 +
           sum(in[0].select(1, 0).unsqueeze(1).expand({2, 3, 4}), {1, 2});
  }, {x}));
}

// Under a ShapesOnlyGuard tensors get shapes, strides and dtypes but no storage: nothing is allocated
// (memory_stats unchanged), writes into them (fill_, copy_, the initialisers) do nothing, their views
// stay shapes-only after the guard ends, and reading or computing with one is an error naming the guard.
TEST(ShapesOnly, TensorsUnderTheGuardHaveShapesButNoStorage) {
  const Tensor real = Tensor::ones({3});
  Generator g(1);
  const MemoryStats before = memory_stats();
  Tensor a, b, c, d, e;
  {
    ShapesOnlyGuard shapes;
    EXPECT_TRUE(shapes_only_mode());
    {
      ShapesOnlyGuard nested;
      a = Tensor::zeros({1000, 1000});
    }
    EXPECT_TRUE(shapes_only_mode()) << "the outer guard still holds";
    b = Tensor::randn({10, 4}, DType::f64);
    c = Tensor::from_vector<float>({1, 2, 3}, {3});
    d = a.t().narrow(0, 2, 5);
    e = Tensor::arange(7).to(DType::f32);
    a.fill_(2.0);
    c.copy_(real);
    nn::init::trunc_normal_(a, g, 0.0, 0.02);
    nn::init::kaiming_uniform_(a, g);
    EXPECT_EQ(concat({c, c}, 0).shape(), (Shape{6}));
  }
  EXPECT_FALSE(shapes_only_mode());
  const MemoryStats after = memory_stats();
  EXPECT_EQ(after.allocations, before.allocations);
  EXPECT_EQ(after.live_bytes, before.live_bytes);
  EXPECT_EQ(a.shape(), (Shape{1000, 1000}));
  EXPECT_EQ(b.dtype(), DType::f64);
  EXPECT_EQ(d.shape(), (Shape{5, 1000}));
  EXPECT_EQ(d.strides(), (Shape{1, 1000}));
  EXPECT_EQ(e.shape(), (Shape{7}));
  for (const Tensor* t : {&a, &b, &c, &d, &e}) EXPECT_TRUE(t->is_shapes_only());
  EXPECT_FALSE(real.is_shapes_only());
  EXPECT_FALSE(Tensor::zeros({2}).is_shapes_only()) << "after the guard, tensors have storage again";

  const std::string want = "Tensor: this f32 tensor of shape [3] has shapes only (it was made under an "
                           "attn::ShapesOnlyGuard, e.g. by models::parameter_count or models::create_shapes_only): "
                           "it holds no values to read or compute with";
  EXPECT_EQ(error_of([&] { c.data<float>(); }), want);
  EXPECT_EQ(error_of([&] { c.raw_data(); }), want);
  EXPECT_EQ(error_of([&] { c.at({0}); }), want);
  EXPECT_EQ(error_of([&] { c.to_vector<float>(); }), want);
  EXPECT_EQ(error_of([&] { (void)(c + real); }), want);
  EXPECT_EQ(error_of([&] { Tensor r = Tensor::zeros({3}); r.copy_(c); }), want);
  EXPECT_EQ(error_of([&] { (void)c.clone(); }), want);
}

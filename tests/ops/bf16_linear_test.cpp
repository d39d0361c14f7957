// bf16 weights for inference: attn::linear(x f32, w bf16, b f32) equals the f64 product of the
// bf16-rounded operands (native oneDNN bf16 matmul where this CPU has one, and the emulated path
// always); no gradient through a bf16 weight; nn::convert_linear_weights_to_bf16. The model-level
// parity against PyTorch is in tests/models/name_maps_test.cpp (Bf16Inference.*).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attn/attn.h"
#include "attn/autograd/grad_mode.h"
#include "attn/nn/linear.h"
#include "attn/ops/matmul.h"
#include "errors.h"

using namespace attn;
using test::error_of;

namespace {

// Restores automatic choice at the end of a test.
struct Bf16Mode {
  explicit Bf16Mode(bool emulated) { set_bf16_gemm_emulated(emulated); }
  ~Bf16Mode() { set_bf16_gemm_emulated(false); }
};

std::vector<bool> modes() {
  std::vector<bool> m{true};                         // emulated: runs everywhere
  if (bf16_gemm_native_available()) m.push_back(false);   // native: AVX-512 BF16 / AMX
  return m;
}

// y = round_bf16(x) · w_bf16ᵀ + b in double; bound[i] = sum_k |x_k w_k| (for the f32-accumulation error).
void expected_product(const Tensor& x, const Tensor& wb, const Tensor& b, std::vector<double>& y, std::vector<double>& mag) {
  const int64_t N = wb.size(0), K = wb.size(1);
  const Tensor x2 = x.reshape({-1, K});
  const int64_t M = x2.size(0);
  const std::vector<double> xv = x2.to(DType::bf16).to_vector<double>(), wv = wb.to_vector<double>();
  const std::vector<double> bv = b.defined() ? b.to_vector<double>() : std::vector<double>(size_t(N), 0.0);
  y.assign(size_t(M * N), 0.0);
  mag.assign(size_t(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t n = 0; n < N; ++n) {
      double s = bv[size_t(n)], a = std::abs(bv[size_t(n)]);
      for (int64_t k = 0; k < K; ++k) {
        const double p = xv[size_t(i * K + k)] * wv[size_t(n * K + k)];
        s += p;
        a += std::abs(p);
      }
      y[size_t(i * N + n)] = s;
      mag[size_t(i * N + n)] = a;
    }
}

}  // namespace

TEST(Bf16Linear, EqualsTheProductOfRoundedOperands) {
  NoGradGuard ng;
  Generator g(7);
  struct Case { Shape x; int64_t n; bool bias; };
  for (const Case& c : {Case{{5, 33}, 17, true}, Case{{2, 7, 64}, 48, false}, Case{{1, 197, 192}, 576, true},
                        Case{{3, 1}, 1, true},
                        // Weights over 2 MiB in f32: the emulated path widens them in blocks of rows
                        // (640 + 60 and 464 + 56 rows here), each block's columns one GEMM.
                        Case{{3, 800}, 700, true}, Case{{2, 5, 1100}, 520, false}}) {
    const int64_t K = c.x.back();
    const Tensor x = randn(c.x, g), w = randn({c.n, K}, g).to(DType::bf16);
    const Tensor b = c.bias ? randn({c.n}, g) : Tensor();
    std::vector<double> ref, mag;
    expected_product(x, w, b, ref, mag);
    for (bool emulated : modes()) {
      Bf16Mode mode(emulated);
      SCOPED_TRACE(std::string(bf16_gemm_name(bf16_gemm_mode())) + " x " + shape_str(c.x) + " n " +
                   std::to_string(c.n));
      const Tensor y = linear(x, w, b);
      ASSERT_EQ(y.dtype(), DType::f32);
      Shape os = c.x;
      os.back() = c.n;
      ASSERT_EQ(y.shape(), os);
      const std::vector<double> yv = y.to_vector<double>();
      double worst = 0;
      for (size_t i = 0; i < yv.size(); ++i) {
        // f32 accumulation of K exact products: |error| <= ~K * 2^-24 * sum |p|; 4x margin.
        const double bound = 4.0 * double(K + 1) * 5.96e-8 * mag[i] + 1e-30;
        worst = std::max(worst, std::abs(yv[i] - ref[i]) / bound);
      }
      EXPECT_LE(worst, 1.0);
    }
  }
}

TEST(Bf16Linear, RoundsTheInputToBf16) {
  // 1 + 2^-9 is not a bf16 value: it rounds to 1, so x·w must come out as exactly 1·w.
  NoGradGuard ng;
  Bf16Mode mode(true);
  const Tensor x = Tensor::from_vector(std::vector<float>{1.0f + 1.0f / 512.0f}, {1, 1});
  const Tensor w = Tensor::from_vector(std::vector<float>{3.0f}, {1, 1}).to(DType::bf16);
  EXPECT_EQ(linear(x, w).to_vector<double>()[0], 3.0);
}

TEST(Bf16Linear, NoGradientThroughABf16Weight) {
  Generator g(1);
  const Tensor x = randn({2, 8}, g).requires_grad_();
  const Tensor w = randn({4, 8}, g).to(DType::bf16);
  const std::string e = error_of([&] { (void)linear(x, w); });
  EXPECT_NE(e.find("inference"), std::string::npos) << e;
}

TEST(Bf16Linear, ForcedEmulationIsReported) {
  {
    Bf16Mode mode(true);
    EXPECT_EQ(bf16_gemm_mode(), Bf16Gemm::emulated);
  }
  EXPECT_EQ(bf16_gemm_mode(), bf16_gemm_native_available() ? Bf16Gemm::native : Bf16Gemm::emulated);
}

TEST(Bf16Linear, ConvertsEveryLinearWeightAndNothingElse) {
  struct Net : nn::Module {
    std::shared_ptr<nn::Linear> a, b;
    Tensor& scale;
    Net()
        : a(register_module("a", std::make_shared<nn::Linear>(8, 16))),
          b(register_module("b", std::make_shared<nn::Linear>(16, 4, false))),
          scale(register_parameter("scale", Tensor::ones({4}))) {}
  };
  Net net;
  const Tensor a_w = net.a->weight.detach().clone();
  EXPECT_EQ(nn::convert_linear_weights_to_bf16(net), (8 * 16 + 16 * 4) * 2);
  EXPECT_EQ(net.a->weight.dtype(), DType::bf16);
  EXPECT_EQ(net.b->weight.dtype(), DType::bf16);
  EXPECT_EQ(net.a->bias.dtype(), DType::f32);
  EXPECT_EQ(net.scale.dtype(), DType::f32);
  // The module lists the converted tensors, rounded to nearest even.
  for (const auto& [name, p] : net.named_parameters())
    if (name == "a.weight") {
      EXPECT_EQ(p.dtype(), DType::bf16);
      EXPECT_EQ(p.to_vector<double>(), a_w.to(DType::bf16).to_vector<double>());
    }
  EXPECT_EQ(nn::convert_linear_weights_to_bf16(net), 0);   // already bf16
  NoGradGuard ng;
  Generator g(3);
  const Tensor y = net.b->forward(net.a->forward(randn({3, 8}, g)));
  EXPECT_EQ(y.dtype(), DType::f32);
  EXPECT_EQ(y.shape(), Shape({3, 4}));
}

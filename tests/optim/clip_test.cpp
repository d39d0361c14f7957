// clip_grad_norm_ against torch.nn.utils.clip_grad_norm_ (total norm and clipped gradients).
#include <gtest/gtest.h>

#include <cmath>

#include "attn/attn.h"
#include "attn/optim/clip.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::torch_ref;

namespace {
// Gradients of sizes around and across the chunking (primes, and one > 2^15 elements).
std::vector<Tensor> make_grads(Generator& g, DType dt) {
  return {randn({7, 13}, g, dt), randn({1}, g, dt) * 5.0, randn({40009}, g, dt) * 0.01, randn({3, 2, 5}, g, dt)};
}
}  // namespace

TEST(ClipGradNorm, MatchesTorch) {
  Generator g(1);
  for (DType dt : {DType::f32, DType::f64}) {
    for (const char* norm : {"2", "inf"}) {
      for (double max_norm : {0.5, 1e6}) {   // clipping, and coefficient clamped to 1
        std::vector<Tensor> grads = make_grads(g, dt);
        std::vector<Tensor> params;
        test::Tensors in;
        nlohmann::json args = {{"n", grads.size()}, {"max_norm", max_norm}, {"norm_type", norm}};
        for (size_t i = 0; i < grads.size(); ++i) {
          Tensor p = Tensor::zeros(grads[i].shape(), dt).requires_grad_();
          if (i != 1) p.set_grad(grads[i].clone());   // parameter 1 has no gradient: skipped
          else args["nograd.1"] = true;
          params.push_back(p);
          in["g." + std::to_string(i)] = grads[i];
        }
        auto ref = torch_ref("optim.clip", in, args);
        const double norm_type = std::string(norm) == "inf" ? INFINITY : 2.0;
        const double total = optim::clip_grad_norm_(params, max_norm, norm_type);
        const double tol = dt == DType::f32 ? 1e-6 : 1e-12;
        EXPECT_NEAR(total, ref.at("total").item(), tol * ref.at("total").item()) << norm << " " << max_norm;
        for (size_t i = 0; i < params.size(); ++i) {
          if (i == 1) {
            EXPECT_FALSE(params[i].grad().defined());
            continue;
          }
          EXPECT_TENSOR_NEAR(params[i].grad(), ref.at("g." + std::to_string(i)), tol, tol)
              << norm << " max_norm " << max_norm << " param " << i;
        }
      }
    }
  }
}

TEST(ClipGradNorm, NoGradientsAndNonFinite) {
  Tensor p = Tensor::zeros({4}).requires_grad_();
  EXPECT_EQ(optim::clip_grad_norm_({p}, 1.0), 0.0);
  p.set_grad(Tensor::from_vector<float>({1.f, INFINITY, 0.f, 2.f}, {4}));
  auto ref = torch_ref("optim.clip", {{"g.0", p.grad().clone()}}, {{"n", 1}, {"max_norm", 1.0}, {"norm_type", "2"}});
  const double total = optim::clip_grad_norm_({p}, 1.0);
  EXPECT_TRUE(std::isinf(total));
  EXPECT_TENSOR_NEAR(p.grad(), ref.at("g.0"), 0, 0);   // torch: inf coefficient 0 -> 0 * inf = NaN
  p.set_grad(Tensor::from_vector<float>({1.f, NAN, 0.f, 2.f}, {4}));
  EXPECT_EQ(error_of([&] { optim::clip_grad_norm_({p}, 1.0, 2.0, /*error_if_nonfinite=*/true); }),
            "clip_grad_norm_: the total norm of order 2 of the gradients is non-finite (nan), so it "
            "cannot be clipped");
}

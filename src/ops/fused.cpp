// Fused bias + GELU: gelu(x + bias) in one pass forward and one pass backward (dx and dbias
// together). f32 runs the vectorised row kernels (backend/cpu/vec_dispatch.h), f64 the reference
// kernels. (The other fused op, add_layer_norm, lives with layer_norm in norm.cpp.)
#include "attn/core/profile.h"
#include "attn/ops/fused.h"

#include <vector>

#include "attn/autograd/grad_mode.h"
#include "attn/autograd/node.h"
#include "attn/core/parallel.h"
#include "../backend/cpu/convert_kernels.h"
#include "../backend/cpu/vec_dispatch.h"
#include "../backend/reference/norm_reference.h"

namespace attn {

namespace {

constexpr int64_t kGrainElems = 16384;

int64_t row_grain(int64_t C) { return std::max<int64_t>(1, kGrainElems / std::max<int64_t>(C, 1)); }

// f32 x contiguous (rows, C), bias contiguous (C) or undefined: y in bf16, each block of rows computed
// in f32 into a scratch that stays in cache and rounded from there (the convert kernels' rounding).
Tensor forward_bf16(const Tensor& x, const Tensor& bias, bool tanh) {
  Tensor y = Tensor::empty(x.shape(), DType::bf16);
  const int64_t numel = x.numel();
  if (numel == 0) return y;
  const int64_t C = x.dim() ? x.size(-1) : 1, rows = numel / C;
  const float* px = x.data<float>();
  const float* pb = bias.defined() ? bias.data<float>() : nullptr;
  auto* py = static_cast<uint16_t*>(y.raw_data());
  const auto& k = kernels::row_kernels();
  const auto& cv = kernels::convert_kernels();
  const int64_t block = row_grain(C);
  parallel_for(0, rows, block, [&](int64_t r0, int64_t r1) {
    std::vector<float> tmp(size_t(std::min(block, r1 - r0) * C));
    for (int64_t r = r0; r < r1; r += block) {
      const int64_t n = std::min(block, r1 - r);
      k.gelu_fwd(px + r * C, pb, tmp.data(), n, C, tanh);
      cv.f32_to_bf16(tmp.data(), py + r * C, n * C);
    }
  });
  return y;
}

// x contiguous (rows, C); bias contiguous (C) or undefined.
Tensor forward(const Tensor& x, const Tensor& bias, bool tanh) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  const int64_t numel = x.numel();
  if (numel == 0) return y;
  const int64_t C = x.dim() ? x.size(-1) : 1, rows = numel / C;
  if (x.dtype() == DType::f32) {
    const float* px = x.data<float>();
    float* py = y.data<float>();
    const auto& k = kernels::row_kernels();
    if (!bias.defined()) {
      parallel_for(0, numel, kGrainElems, [&](int64_t b, int64_t e) { k.gelu_fwd(px + b, nullptr, py + b, 1, e - b, tanh); });
    } else {
      const float* pb = bias.data<float>();
      parallel_for(0, rows, row_grain(C), [&](int64_t r0, int64_t r1) {
        k.gelu_fwd(px + r0 * C, pb, py + r0 * C, r1 - r0, C, tanh);
      });
    }
    return y;
  }
  ATTN_DISPATCH_FLOAT(x.dtype(), "bias_gelu", [&] {
    reference::gelu_forward<T>(x.data<T>(), bias.defined() ? bias.data<T>() : nullptr, y.data<T>(), rows, C, tanh);
  });
  return y;
}

struct BiasGeluNode : autograd::Node {
  Tensor x, bias;   // contiguous; bias may be undefined
  bool tanh = false;
  const char* name() const override { return "bias_gelu"; }
  std::vector<Tensor> backward(const Tensor& dout_in) override {
    ATTN_CHECK(dout_in.dtype() == x.dtype(), "bias_gelu: expected a gradient of dtype ", dtype_name(x.dtype()),
               ", got ", dtype_name(dout_in.dtype()));
    const Tensor dout = dout_in.contiguous();
    const int64_t numel = x.numel();
    const int64_t C = x.dim() ? x.size(-1) : 1, rows = C ? numel / C : 0;
    const bool want_db = bias.defined() && (next[1].fn || next[1].leaf);
    Tensor dx = Tensor::empty(x.shape(), x.dtype());
    Tensor db = want_db ? Tensor::zeros({C}, x.dtype()) : Tensor();
    if (numel == 0) return {dx, db};
    if (x.dtype() == DType::f32) {
      const float* pg = dout.data<float>();
      const float* px = x.data<float>();
      float* pd = dx.data<float>();
      const auto& k = kernels::row_kernels();
      if (!bias.defined()) {
        parallel_for(0, numel, kGrainElems, [&](int64_t b, int64_t e) {
          k.gelu_bwd(pg + b, px + b, nullptr, pd + b, nullptr, 1, e - b, tanh);
        });
      } else {
        const float* pb = bias.data<float>();
        kernels::blocked_rows(rows, C, row_grain(C), want_db ? db.data<float>() : nullptr,
                              [&](int64_t r0, int64_t r1, float* acc) {
                                const int64_t o = r0 * C;
                                k.gelu_bwd(pg + o, px + o, pb, pd + o, acc, r1 - r0, C, tanh);
                              });
      }
    } else {
      ATTN_DISPATCH_FLOAT(x.dtype(), "bias_gelu", [&] {
        reference::gelu_backward<T>(dout.data<T>(), x.data<T>(), bias.defined() ? bias.data<T>() : nullptr,
                                    dx.data<T>(), want_db ? db.data<T>() : nullptr, rows, C, tanh);
      });
    }
    return {dx, db};
  }
  void release() override { x = Tensor(); bias = Tensor(); }
};

}  // namespace

Tensor bias_gelu(const Tensor& x, const Tensor& bias, GeluApprox approx, DType result) {
  ATTN_PROFILE("bias_gelu");
  ATTN_CHECK(x.defined(), "bias_gelu: expected an input, got an undefined tensor");
  ATTN_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, "bias_gelu: expected a f32 or f64 tensor, got ",
             dtype_name(x.dtype()));
  if (bias.defined()) {
    ATTN_CHECK(x.dim() >= 1, "bias_gelu: expected an input with at least 1 dim, got shape ", x.shape());
    const int64_t C = x.size(-1);
    ATTN_CHECK(bias.dim() == 1 && bias.size(0) == C, "bias_gelu: expected bias of shape [", C, "], got ",
               bias.shape());
    ATTN_CHECK(bias.dtype() == x.dtype(), "bias_gelu: expected bias of dtype ", dtype_name(x.dtype()), ", got ",
               dtype_name(bias.dtype()));
  }
  ATTN_CHECK(result == DType::f32 || (result == DType::bf16 && x.dtype() == DType::f32),
             "bias_gelu: expected an f32 result, or a bf16 one of an f32 input; got ", dtype_name(result), " of ",
             dtype_name(x.dtype()));
  const bool tanh = approx == GeluApprox::tanh;
  const Tensor xc = x.detach().contiguous();
  const Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  Tensor y = result == DType::bf16 ? forward_bf16(xc, bc, tanh) : forward(xc, bc, tanh);
  if (autograd::needs_grad({x, bias})) {
    auto n = std::make_shared<BiasGeluNode>();
    n->x = xc;
    n->bias = bc;
    n->tanh = tanh;
    autograd::attach(y, n, {x, bias});
  }
  return y;
}

}  // namespace attn

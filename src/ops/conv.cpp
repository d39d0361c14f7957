// conv2d forward and backward: validation, path choice (oneDNN / im2col + GEMM / patch GEMM /
// naive reference) and the autograd node. Shapes: x (N, C, H, W), w (O, C/G, kh, kw) -> (N, O, Ho, Wo).
#include "attn/core/profile.h"
#include "attn/ops/conv.h"

#include "attn/autograd/grad_mode.h"
#include "attn/autograd/node.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/matmul.h"
#include "attn/ops/reduce.h"
#include "../backend/cpu/conv_kernels.h"
#include "../backend/reference/conv_reference.h"

namespace attn {

namespace {

using kernels::ConvParams;
using kernels::ConvPath;

Shape pair_shape(Pair p) { return {p[0], p[1]}; }

void validate(const Tensor& x, const Tensor& w, const Tensor& b, Pair stride, Pair padding, Pair dilation,
              int64_t groups) {
  ATTN_CHECK(x.defined() && w.defined(), "conv2d: expected defined input and weight tensors");
  ATTN_CHECK(x.dim() == 4, "conv2d: expected input with 4 dims (N, C, H, W), got shape ", x.shape());
  ATTN_CHECK(w.dim() == 4, "conv2d: expected weight with 4 dims (O, C/groups, kH, kW), got shape ", w.shape());
  ATTN_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, "conv2d: expected a f32 or f64 input, got ",
             dtype_name(x.dtype()));
  ATTN_CHECK(w.dtype() == x.dtype(), "conv2d: input is ", dtype_name(x.dtype()), " but weight is ",
             dtype_name(w.dtype()));
  ATTN_CHECK(groups >= 1, "conv2d: expected groups >= 1, got ", groups);
  ATTN_CHECK(stride[0] >= 1 && stride[1] >= 1, "conv2d: expected stride >= 1, got ", pair_shape(stride));
  ATTN_CHECK(padding[0] >= 0 && padding[1] >= 0, "conv2d: expected padding >= 0, got ", pair_shape(padding));
  ATTN_CHECK(dilation[0] >= 1 && dilation[1] >= 1, "conv2d: expected dilation >= 1, got ", pair_shape(dilation));
  const int64_t O = w.shape()[0];
  ATTN_CHECK(O % groups == 0, "conv2d: expected out channels divisible by groups ", groups, ", got weight shape ",
             w.shape());
  ATTN_CHECK(x.shape()[1] == w.shape()[1] * groups, "conv2d: expected input with ", w.shape()[1] * groups,
             " channels (weight shape ", w.shape(), ", groups ", groups, "), got shape ", x.shape());
  ATTN_CHECK(w.shape()[2] >= 1 && w.shape()[3] >= 1, "conv2d: expected a kernel of at least 1x1, got weight shape ",
             w.shape());
  if (b.defined()) {
    ATTN_CHECK(b.dim() == 1 && b.shape()[0] == O, "conv2d: expected bias of shape [", O, "], got ", b.shape());
    ATTN_CHECK(b.dtype() == x.dtype(), "conv2d: input is ", dtype_name(x.dtype()), " but bias is ",
               dtype_name(b.dtype()));
  }
  const Shape padded{x.shape()[2] + 2 * padding[0], x.shape()[3] + 2 * padding[1]};
  const Shape kext{dilation[0] * (w.shape()[2] - 1) + 1, dilation[1] * (w.shape()[3] - 1) + 1};
  ATTN_CHECK(kext[0] <= padded[0] && kext[1] <= padded[1], "conv2d: kernel size ", kext,
             " (dilated) is larger than the padded input ", padded, " (input shape ", x.shape(), ", padding ",
             pair_shape(padding), ")");
}

bool patch_applies(const ConvParams& p) {
  return p.kh == p.sh && p.kw == p.sw && p.ph == 0 && p.pw == 0 && p.dh == 1 && p.dw == 1 && p.groups == 1;
}

ConvPath choose(const ConvParams& p, DType dt) {
  ConvPath forced = kernels::conv_path();
  if (forced == ConvPath::reference || forced == ConvPath::im2col) return forced;
  if (forced == ConvPath::onednn && kernels::conv_onednn_supports(dt)) return forced;
  if (forced == ConvPath::patch && patch_applies(p)) return forced;
  if (forced == ConvPath::automatic && patch_applies(p)) return ConvPath::patch;
  return kernels::conv_onednn_supports(dt) ? ConvPath::onednn : ConvPath::im2col;
}

// Patch embedding: non-overlapping kh x kw windows are rows of a matrix, one GEMM with the
// flattened weight -> (N Ho Wo, O). Built from differentiable ops, so autograd needs no node of its own.
Tensor patch_rows_gemm(const Tensor& x, const Tensor& w, const Tensor& b, const ConvParams& p) {
  Tensor xc = x;
  if (p.Ho * p.kh != p.H) xc = xc.slice(2, 0, p.Ho * p.kh);
  if (p.Wo * p.kw != p.W) xc = xc.slice(3, 0, p.Wo * p.kw);
  // (N, C, Ho, kh, Wo, kw) -> (N, Ho, Wo, C, kh, kw) -> (N Ho Wo, C kh kw)
  Tensor rows = xc.reshape({p.N, p.C, p.Ho, p.kh, p.Wo, p.kw}).permute({0, 2, 4, 1, 3, 5})
                    .reshape({p.N * p.Ho * p.Wo, p.C * p.kh * p.kw});
  return linear(rows, w.reshape({p.O, p.C * p.kh * p.kw}), b);
}

Tensor conv2d_patch(const Tensor& x, const Tensor& w, const Tensor& b, const ConvParams& p) {
  return patch_rows_gemm(x, w, b, p).reshape({p.N, p.Ho, p.Wo, p.O}).permute({0, 3, 1, 2}).contiguous();
}

// im2col + GEMM, no autograd. col (N, G, K, L); w as (G, Og, K).
Tensor forward_im2col(const Tensor& x, const Tensor& w, const Tensor& b, const ConvParams& p) {
  Tensor col = kernels::im2col(x, p);
  Tensor w3 = w.contiguous().view({p.groups, p.Og(), p.K()});
  Tensor y = matmul(w3, col).view({p.N, p.O, p.Ho, p.Wo});   // (N, G, Og, L)
  if (b.defined()) add_(y, b.view({1, p.O, 1, 1}));
  return y;
}

Tensor backward_input_im2col(const Tensor& dout, const Tensor& w, const ConvParams& p) {
  Tensor g4 = dout.contiguous().view({p.N, p.groups, p.Og(), p.L()});
  Tensor wt = w.contiguous().view({p.groups, p.Og(), p.K()}).transpose(1, 2);   // (G, K, Og)
  return kernels::col2im(matmul(wt, g4), p);                                    // (N, G, K, L)
}

Tensor backward_weight_im2col(const Tensor& dout, const Tensor& x, const ConvParams& p) {
  Tensor g4 = dout.contiguous().view({p.N, p.groups, p.Og(), p.L()});
  Tensor col = kernels::im2col(x, p);                                           // (N, G, K, L)
  Tensor dw = sum(matmul(g4, col.transpose(2, 3)), {0});                        // (G, Og, K)
  return dw.reshape({p.O, p.Cg(), p.kh, p.kw});
}

struct Conv2dNode : autograd::Node {
  Tensor x, w;
  ConvParams p;
  ConvPath path;
  bool has_bias = false;
  const char* name() const override { return "conv2d"; }
  std::vector<Tensor> backward(const Tensor& dout) override {
    const bool want_x = next[0].fn || next[0].leaf;
    const bool want_w = next[1].fn || next[1].leaf;
    const bool want_b = has_bias && (next[2].fn || next[2].leaf);
    Tensor dx, dw, db;
    switch (path) {
      case ConvPath::onednn:
        kernels::conv2d_onednn_backward(dout, x, w, p, want_x, want_w, want_b, dx, dw, db);
        break;
      case ConvPath::reference:
        if (want_x) dx = reference::conv2d_backward_input_naive(dout, w, p);
        if (want_w) dw = reference::conv2d_backward_weight_naive(dout, x, p);
        break;
      default:
        if (want_x) dx = backward_input_im2col(dout, w, p);
        if (want_w) dw = backward_weight_im2col(dout, x, p);
        break;
    }
    if (want_b && !db.defined()) db = sum(dout, {0, 2, 3});
    if (!want_w) dw = Tensor();
    if (has_bias) return {dx, dw, db};
    return {dx, dw};
  }
  void release() override { x = Tensor(); w = Tensor(); }
};

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Pair stride, Pair padding, Pair dilation,
              int64_t groups) {
  ATTN_PROFILE("conv2d");
  validate(x, weight, bias, stride, padding, dilation, groups);
  const ConvParams p = kernels::conv_params(x.shape(), weight.shape(), stride, padding, dilation, groups);
  // Empty batch, channels or filters: the loops of the reference handle them.
  const ConvPath path = (p.N == 0 || p.C == 0 || p.O == 0) ? ConvPath::reference : choose(p, x.dtype());
  if (path == ConvPath::patch) return conv2d_patch(x, weight, bias, p);
  Tensor out;
  {
    NoGradGuard ng;
    Tensor xd = x.detach(), wd = weight.detach(), bd = bias.defined() ? bias.detach() : Tensor();
    if (path == ConvPath::onednn) out = kernels::conv2d_onednn_forward(xd, wd, bd, p);
    else if (path == ConvPath::reference) out = reference::conv2d_forward_naive(xd, wd, bd, p);
    else out = forward_im2col(xd, wd, bd, p);
  }
  std::vector<Tensor> ins{x, weight};
  if (bias.defined()) ins.push_back(bias);
  if (autograd::needs_grad(ins)) {
    auto n = std::make_shared<Conv2dNode>();
    n->x = x.detach(); n->w = weight.detach(); n->p = p; n->path = path; n->has_bias = bias.defined();
    autograd::attach(out, n, ins);
  }
  return out;
}

Tensor conv2d_patch_tokens(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  ATTN_PROFILE("patch embedding");
  ATTN_CHECK(weight.defined() && weight.dim() == 4, "conv2d_patch_tokens: expected a weight (O, C, kH, kW), got ",
             weight.defined() ? weight.shape() : Shape{});
  const Pair k{weight.shape()[2], weight.shape()[3]};
  validate(x, weight, bias, k, {0, 0}, {1, 1}, 1);
  const ConvParams p = kernels::conv_params(x.shape(), weight.shape(), k, {0, 0}, {1, 1}, 1);
  if (p.N == 0 || p.C == 0 || p.O == 0)   // empty: the general path's loops handle it
    return conv2d(x, weight, bias, k).flatten(2).transpose(1, 2).contiguous();
  return patch_rows_gemm(x, weight, bias, p).reshape({p.N, p.Ho * p.Wo, p.O});
}

}  // namespace attn

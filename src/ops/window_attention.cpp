// window_attention_packed: validation, the fused kernels' arguments (backend/cpu/window_attention*),
// the work split and the autograd node; see attn/ops/window_attention.h.
#include "attn/core/profile.h"
#include "attn/ops/window_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "attn/autograd/grad_mode.h"
#include "attn/autograd/node.h"
#include "attn/core/parallel.h"
#include "../backend/cpu/attention_bf16.h"
#include "../backend/cpu/window_attention.h"
#include "gemm_record.h"
#include "work_items.h"

namespace attn {

namespace {

constexpr const char* kWinOp = "window_attention_packed";

struct WinShape {
  int64_t Bw, N, C, NH, HS, nW;
};

WinShape validate_window(const Tensor& qkv, int64_t NH, const Tensor& bias, const Tensor& mask, const WindowAttentionOptions& o) {
  ATTN_CHECK(qkv.defined() && qkv.dim() == 3 && (qkv.dtype() == DType::f32 || qkv.dtype() == DType::bf16),
             kWinOp, ": expected a f32 (or, in inference, bf16) qkv of shape (windows, N, 3 C), got ",
             qkv.defined() ? dtype_name(qkv.dtype()) : "undefined", " ", qkv.defined() ? qkv.shape() : Shape{});
  ATTN_CHECK(NH > 0 && qkv.size(2) % (3 * NH) == 0 && qkv.size(2) > 0, kWinOp, ": the last dim of qkv ", qkv.shape(),
             " is not 3 x num_heads (", NH, ") x a head size");
  WinShape s{qkv.size(0), qkv.size(1), qkv.size(2) / 3, NH, qkv.size(2) / 3 / NH, 1};
  if (bias.defined())
    ATTN_CHECK(bias.dtype() == DType::f32 && bias.shape() == Shape({NH, s.N, s.N}), kWinOp,
               ": expected a f32 bias of shape ", Shape({NH, s.N, s.N}), ", got ", dtype_name(bias.dtype()), " ",
               bias.shape());
  if (mask.defined()) {
    ATTN_CHECK(mask.dtype() == DType::f32 && mask.dim() == 3 && mask.size(1) == s.N && mask.size(2) == s.N &&
                   mask.size(0) > 0 && s.Bw % mask.size(0) == 0,
               kWinOp, ": expected a f32 mask of shape (nW, ", s.N, ", ", s.N, ") with nW dividing the ", s.Bw,
               " windows, got ", dtype_name(mask.dtype()), " ", mask.shape());
    ATTN_CHECK(!autograd::needs_grad({mask}), kWinOp, ": the mask is a constant, but it requires grad");
    s.nW = mask.size(0);
  }
  if (o.logit_scale.defined())
    ATTN_CHECK(o.logit_scale.dtype() == DType::f32 && o.logit_scale.numel() == NH, kWinOp,
               ": expected a f32 logit_scale of ", NH, " elements (one per head), got ",
               dtype_name(o.logit_scale.dtype()), " ", o.logit_scale.shape());
  return s;
}

// Everything the kernels read, and the tensors that own it.
struct WinSetup {
  WinShape s{};
  Tensor qkv, bias, mask, logit_raw;   // detached; qkv with unit column stride, the others contiguous
  std::vector<float> ls;               // V2: exp(min(logit_scale, log 100))
  float scale = 1.f;

  kernels::WinAttnGeometry geometry() const {
    kernels::WinAttnGeometry g;
    g.Bw = s.Bw; g.nW = s.nW; g.NH = s.NH; g.N = s.N; g.HS = s.HS;
    g.qkv = qkv.data<float>();
    g.qkv_sw = qkv.stride(0);
    g.qkv_st = qkv.stride(1);
    g.bias = bias.defined() ? bias.data<float>() : nullptr;
    g.mask = mask.defined() ? mask.data<float>() : nullptr;
    g.scale = scale;
    g.logit_scale = ls.empty() ? nullptr : ls.data();
    return g;
  }
};

struct WindowAttentionNode : autograd::Node {
  WinSetup st;
  Tensor probs;
  bool bias_grad = false, ls_grad = false;
  const char* name() const override { return "window_attention_packed"; }

  std::vector<Tensor> backward(const Tensor& dout_in) override {
    ATTN_CHECK(dout_in.dtype() == DType::f32, kWinOp, ": expected a f32 gradient, got ", dtype_name(dout_in.dtype()));
    const WinShape& s = st.s;
    const Tensor dout = dout_in.contiguous();
    Tensor dqkv = Tensor::empty({s.Bw, s.N, 3 * s.C});
    Tensor dscores, dls;
    if (bias_grad) dscores = Tensor::empty({s.Bw, s.NH, s.N, s.N});
    if (!st.ls.empty()) dls = Tensor::empty({s.Bw, s.NH});
    kernels::WinAttnBwdArgs a;
    a.g = st.geometry();
    a.probs = probs.data<float>();
    a.dout = dout.data<float>();
    a.dqkv = dqkv.data<float>();
    a.dscores = bias_grad ? dscores.data<float>() : nullptr;
    a.dls = dls.defined() ? dls.data<float>() : nullptr;
    const auto& kern = kernels::window_attention_kernels();
    run_items(s.Bw * s.NH, kernels::window_attention_bwd_scratch(a.g),
              [&](int64_t it, float* scratch) { kern.bwd(a, it, scratch); });
    Tensor dbias, dlogit;
    if (bias_grad) {   // the sum over windows, in window order (deterministic)
      dbias = Tensor::empty({s.NH, s.N, s.N});
      const float* ps = dscores.data<float>();
      float* pb = dbias.data<float>();
      const int64_t per = s.NH * s.N * s.N;
      parallel_for(0, per, 1024, [&](int64_t e0, int64_t e1) {
        for (int64_t e = e0; e < e1; ++e) {
          float acc = 0.f;
          for (int64_t w = 0; w < s.Bw; ++w) acc += ps[w * per + e];
          pb[e] = acc;
        }
      });
    }
    if (ls_grad) {   // d logit_scale = Σ_w d ls · ls where the clamp passes it
      dlogit = Tensor::empty(st.logit_raw.shape());
      const float* pl = dls.data<float>();
      const float* raw = st.logit_raw.data<float>();
      float* pd = dlogit.data<float>();
      for (int64_t h = 0; h < s.NH; ++h) {
        double acc = 0.0;
        for (int64_t w = 0; w < s.Bw; ++w) acc += pl[w * s.NH + h];
        pd[h] = raw[h] <= float(std::log(100.0)) ? float(acc) * st.ls[size_t(h)] : 0.f;
      }
    }
    return {dqkv, dbias, dlogit};
  }
  void release() override {
    st.qkv = Tensor(); st.bias = Tensor(); st.mask = Tensor();
    probs = Tensor();
  }
};

// A bf16 qkv (a bf16 model's projection, linear_bf16_out) in inference: attn's bf16 attention kernel
// (backend/cpu/attention_bf16.h) with the bias and the shift mask as its two added terms; bf16 out.
Tensor window_attention_bf16(const WinShape& s, const Tensor& qkv_in, const Tensor& bias_in, const Tensor& mask_in,
                             double scale) {
  const Tensor qkv = qkv_in.contiguous(), bias = bias_in.defined() ? bias_in.contiguous() : Tensor(),
               mask = mask_in.defined() ? mask_in.contiguous() : Tensor();
  Tensor out = Tensor::empty({s.Bw, s.N, s.C}, DType::bf16);
  kernels::AttnBf16Args a = kernels::attention_bf16_packed_args(
      static_cast<const uint16_t*>(qkv.raw_data()), static_cast<uint16_t*>(out.raw_data()), s.Bw, s.NH, s.N, s.HS,
      float(std::isnan(scale) ? 1.0 / std::sqrt(double(s.HS)) : scale));
  if (bias.defined()) a.bias[0] = bias.data<float>(), a.bias_sh[0] = s.N * s.N, a.bias_si[0] = s.N;
  if (mask.defined())
    a.bias[1] = mask.data<float>(), a.bias_sb[1] = s.N * s.N, a.bias_si[1] = s.N, a.bias_bmod[1] = s.nW;
  detail::record_attention_gemms(s.Bw * s.NH, s.N, s.N, s.HS, DType::bf16);
  kernels::attention_bf16_run(a);
  return out;
}

}  // namespace

WindowAttentionResult window_attention_packed(const Tensor& qkv, int64_t num_heads, const Tensor& bias,
                                              const Tensor& mask, const WindowAttentionOptions& opts) {
  ATTN_PROFILE("window attention");
  WinSetup st;
  st.s = validate_window(qkv, num_heads, bias, mask, opts);
  if (qkv.dtype() == DType::bf16) {
    const bool kernel = !opts.logit_scale.defined() && !opts.need_weights &&
                        !autograd::needs_grad({qkv, bias}) && kernels::attention_bf16_kernel_available() &&
                        kernels::attention_bf16_shape_ok(st.s.N, st.s.HS);
    if (kernel) return {window_attention_bf16(st.s, qkv, bias, mask, opts.scale), Tensor()};
    return window_attention_packed(qkv.to(DType::f32), num_heads, bias, mask, opts);
  }
  const WinShape& s = st.s;
  st.qkv = qkv.stride(2) == 1 ? qkv.detach() : qkv.detach().contiguous();
  if (bias.defined()) st.bias = bias.detach().contiguous();
  if (mask.defined()) st.mask = mask.detach().contiguous();
  st.scale = float(std::isnan(opts.scale) ? 1.0 / std::sqrt(double(s.HS)) : opts.scale);
  if (opts.logit_scale.defined()) {
    st.logit_raw = opts.logit_scale.detach().contiguous();
    const float* p = st.logit_raw.data<float>();
    for (int64_t h = 0; h < s.NH; ++h) st.ls.push_back(std::exp(std::min(p[h], float(std::log(100.0)))));
  }
  const bool bias_grad = autograd::needs_grad({bias}), ls_grad = autograd::needs_grad({opts.logit_scale});
  const bool grad = bias_grad || ls_grad || autograd::needs_grad({qkv});
  WindowAttentionResult r;
  r.out = Tensor::empty({s.Bw, s.N, s.C});
  Tensor probs;
  if (grad || opts.need_weights) probs = Tensor::empty({s.Bw, s.NH, s.N, s.N});
  kernels::WinAttnFwdArgs a;
  a.g = st.geometry();
  a.out = r.out.data<float>();
  a.probs = probs.defined() ? probs.data<float>() : nullptr;
  const auto& kern = kernels::window_attention_kernels();
  detail::record_attention_gemms(s.Bw * s.NH, s.N, s.N, s.HS);
  run_items(s.Bw * s.NH, kernels::window_attention_fwd_scratch(a.g),
            [&](int64_t it, float* scratch) { kern.fwd(a, it, scratch); });
  if (opts.need_weights) r.weights = probs;
  if (grad) {
    auto n = std::make_shared<WindowAttentionNode>();
    n->st = std::move(st);
    n->probs = probs;
    n->bias_grad = bias_grad;
    n->ls_grad = ls_grad;
    autograd::attach(r.out, n, {qkv, bias, opts.logit_scale});
  }
  return r;
}

}  // namespace attn

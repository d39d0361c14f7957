// matmul (batched, broadcasting) and linear (fused bias), forward and backward.
// Shapes: a (..., M, K), b (..., K, N) -> (..., M, N); linear x (..., K), w (N, K), b (N).
#include "attn/core/profile.h"
#include "attn/ops/matmul.h"

#include "attn/ops/fused.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>

#include "attn/autograd/grad_mode.h"
#include "attn/autograd/node.h"
#include "attn/core/env.h"
#include "attn/core/rng.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "../backend/cpu/gemm.h"
#include "gemm_record.h"
#include "quantize_internal.h"

namespace attn {

namespace {

// A 2-d or 3-d operand is usable in place when one of its last two dims has unit stride.
Tensor gemm_ready(const Tensor& t) {
  const int64_t n = t.dim();
  const int64_t s1 = t.strides()[n - 1], s0 = t.strides()[n - 2];
  const bool batch_ok = n < 3 || t.shape()[0] == 1 || t.strides()[0] != 0;
  if (batch_ok && ((s1 == 1 || t.shape()[n - 1] == 1) || (s0 == 1 || t.shape()[n - 2] == 1))) return t;
  return t.contiguous();
}

// oneDNN's GEMM packs each operand by walking its K dimension. When the stride of that walk is a
// multiple of 4 KiB, successive rows fall into the same cache sets (4K aliasing) and the GEMM runs at
// about half speed: the weight gradients dW = dYᵀ·H of a 1024- or 3072-wide hidden layer (H walked
// down its rows, or dY1ᵀ walked across a 1024-wide row stride) measured 25–40 GFLOP/s where a
// 768-wide one ran at 70 (2 threads, under load; quiet, the translation step's two FFN dW GEMMs ran at
// 76 and 84 GFLOP/s against 145 for the attention projections'). Such an operand, walked over
// K >= 1024 rows in a GEMM whose other side is at least 64 wide, is copied once into rows padded by
// 64 bytes (the copy costs a tenth of what it saves). Forward operands (activations read along their
// contiguous rows) are not affected and are left alone.
Tensor unaliased(const Tensor& t, bool is_a, int64_t other) {
  const int64_t n = t.dim();
  if (n == 3 && t.strides()[0] == 0 && t.shape()[0] > 1) return t;   // a broadcast batch: no copies
  const int64_t sr = t.strides()[n - 2], sc = t.strides()[n - 1];
  const int64_t rows = t.shape()[n - 2], cols = t.shape()[n - 1];
  // A (M x K) is walked along K when stored transposed (column-major); B (K x N) when row-major.
  const int64_t K = is_a ? cols : rows, width = is_a ? rows : cols;
  const int64_t walk = is_a ? sc : sr, unit = is_a ? sr : sc;
  const auto esize = int64_t(t.element_size());
  if (unit != 1 || K < 1024 || other < 64 || width < 64 || (walk * esize) % 4096 != 0) return t;
  Shape ps(t.shape().begin(), t.shape().end() - 2);
  ps.push_back(K);
  ps.push_back(width + 64 / esize);
  Tensor p = Tensor::empty(ps, t.dtype()).slice(n - 1, 0, width);   // (..., K, width), rows 64 bytes longer
  if (is_a) {
    p.copy_(t.transpose(n - 2, n - 1));
    return p.transpose(n - 2, n - 1);
  }
  p.copy_(t);
  return p;
}

void gemm(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& c) {
  if (c.numel() == 0) return;
  if (a.shape()[a.dim() - 1] == 0) {  // K == 0: bias or zeros
    c.zero_();
    if (bias.defined()) add_(c, bias);
    return;
  }
  if (kernels::gemm_onednn_supports(a.dtype())) {
    const int64_t M = c.shape()[c.dim() - 2], N = c.shape()[c.dim() - 1];
    kernels::gemm_onednn(unaliased(gemm_ready(a), true, N), unaliased(gemm_ready(b), false, M), bias, c);
  } else {
    kernels::gemm_reference(a, b, bias, c);
  }
}

thread_local GemmRecorder* g_recorder = nullptr;
}  // namespace

void detail_record_gemm(GemmCall c) {
  if (g_recorder) g_recorder->calls_.push_back(std::move(c));
}

void detail::record_attention_gemms(int64_t bh, int64_t tq, int64_t tk, int64_t hs, DType dtype) {
  if (!g_recorder || bh <= 0 || tq <= 0 || tk <= 0) return;
  detail_record_gemm({bh, tq, hs, tk, dtype, Tensor(), false});   // Q Kᵀ
  detail_record_gemm({bh, tq, tk, hs, dtype, Tensor(), false});   // P V
}

void detail::record_attention_backward_gemms(int64_t bh, int64_t tq, int64_t tk, int64_t hs) {
  if (!g_recorder || bh <= 0 || tq <= 0 || tk <= 0) return;
  detail_record_gemm({bh, tq, hs, tk, DType::f32, Tensor(), false});   // dP = dO Vᵀ
  detail_record_gemm({bh, tk, tq, hs, DType::f32, Tensor(), false});   // dV = Pᵀ dO
  detail_record_gemm({bh, tq, tk, hs, DType::f32, Tensor(), false});   // dQ = dS K
  detail_record_gemm({bh, tk, tq, hs, DType::f32, Tensor(), false});   // dK = dSᵀ Q
}

GemmRecorder::GemmRecorder() {
  ATTN_CHECK(!g_recorder, "GemmRecorder: one at a time on a thread");
  g_recorder = this;
}
GemmRecorder::~GemmRecorder() { g_recorder = nullptr; }

namespace {
// Whether autocast (autograd/grad_mode.h) runs a product of these f32 operands in bf16: linear's rule
// (linear_autocasts) for b, an f32 a.
bool autocast_applies(const Tensor& a, const Tensor& b) { return a.dtype() == DType::f32 && linear_autocasts(b); }

// Computes a @ b for a (..., M, K) and b (..., K, N) (both at least 2-d), no autograd; the result in
// c_dtype (f32 for bf16 operands under autocast), a's dtype by default.
Tensor matmul_forward(const Tensor& a, const Tensor& b, std::optional<DType> c_dtype = std::nullopt) {
  const int64_t M = a.shape()[a.dim() - 2], K = a.shape()[a.dim() - 1];
  const int64_t K2 = b.shape()[b.dim() - 2], N = b.shape()[b.dim() - 1];
  ATTN_CHECK(K == K2, "matmul: inner dims differ: ", a.shape(), " @ ", b.shape(), " (", K, " vs ", K2, ")");
  ATTN_CHECK(a.dtype() == b.dtype(), "matmul: dtypes differ (", dtype_name(a.dtype()), " and ",
             dtype_name(b.dtype()), ")");
  ATTN_CHECK(is_floating(a.dtype()), "matmul: expected floating tensors, got ", dtype_name(a.dtype()));
  Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch = broadcast_shapes(ba, bb, "matmul");
  const int64_t B = shape_numel(batch);
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  Tensor c = Tensor::empty(out_shape, c_dtype.value_or(a.dtype()));
  if (g_recorder)
    detail_record_gemm(
        {shape_numel(bb) == 1 ? 1 : B, shape_numel(bb) == 1 ? B * M : M, K, N, a.dtype(), Tensor(), false});
  // b without real batch: fold a's batch into rows.
  if (shape_numel(bb) == 1) {
    Tensor b2 = b.reshape({K, N});
    Tensor a2 = a.expand([&] { Shape s = batch; s.push_back(M); s.push_back(K); return s; }()).reshape({B * M, K});
    Tensor c2 = c.view({B * M, N});
    gemm(a2, b2, Tensor(), c2);
    return c;
  }
  Shape sa = batch, sb = batch;
  sa.push_back(M); sa.push_back(K);
  sb.push_back(K); sb.push_back(N);
  Tensor a3 = a.expand(sa).reshape({B, M, K});
  Tensor b3 = b.expand(sb).reshape({B, K, N});
  Tensor c3 = c.view({B, M, N});
  gemm(a3, b3, Tensor(), c3);
  return c;
}

struct MatmulNode : autograd::Node {
  Tensor a, b;   // as seen by matmul_forward (at least 2-d); bf16 copies under autocast
  bool bf16 = false;
  const char* name() const override { return "matmul"; }
  std::vector<Tensor> backward(const Tensor& dout_in) override {
    // Under autocast the incoming gradient is rounded to bf16 too, the products summed in f32.
    const Tensor dout = bf16 ? dout_in.to(DType::bf16) : dout_in;
    const std::optional<DType> c_dt = bf16 ? std::optional<DType>(DType::f32) : std::nullopt;
    Tensor da, db;
    if (next[0].fn || next[0].leaf) da = sum_to(matmul_forward(dout, b.transpose(-1, -2), c_dt), a.shape());
    if (next[1].fn || next[1].leaf) db = sum_to(matmul_forward(a.transpose(-1, -2), dout, c_dt), b.shape());
    return {da, db};
  }
  void release() override { a = Tensor(); b = Tensor(); }
};

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  ATTN_PROFILE("matmul");
  ATTN_CHECK(a_in.dim() >= 1 && b_in.dim() >= 1, "matmul: expected tensors of at least 1 dim, got ",
             a_in.shape(), " and ", b_in.shape());
  const bool va = a_in.dim() == 1, vb = b_in.dim() == 1;
  Tensor a = va ? a_in.unsqueeze(0) : a_in;
  Tensor b = vb ? b_in.unsqueeze(-1) : b_in;
  const bool bf16 = autocast_applies(a, b);
  const Tensor ad = bf16 ? a.detach().to(DType::bf16) : a.detach(), bd = bf16 ? b.detach().to(DType::bf16) : b.detach();
  Tensor out = matmul_forward(ad, bd, bf16 ? std::optional<DType>(DType::f32) : std::nullopt);
  if (autograd::needs_grad({a, b})) {
    auto n = std::make_shared<MatmulNode>();
    n->a = ad; n->b = bd; n->bf16 = bf16;
    autograd::attach(out, n, {a, b});
  }
  if (va) out = out.squeeze(-2);
  if (vb) out = out.squeeze(-1);
  return out;
}

namespace {
struct LinearNode : autograd::Node {
  Tensor x2, w;   // x as (M, K), w (N, K); bf16 copies under autocast
  Shape x_shape;
  bool has_bias;
  bool bf16 = false;
  const char* name() const override { return "linear"; }
  std::vector<Tensor> backward(const Tensor& dout) override {
    const int64_t N = w.shape()[0];
    Tensor dy = dout.reshape({-1, N});
    // Under autocast the products take dy rounded to bf16 and sum in f32; the bias gradient is dy's f32 sum.
    const Tensor dy_g = bf16 ? dy.to(DType::bf16) : dy;
    const std::optional<DType> c_dt = bf16 ? std::optional<DType>(DType::f32) : std::nullopt;
    Tensor dx, dw, db;
    if (next[0].fn || next[0].leaf) dx = matmul_forward(dy_g, w, c_dt).reshape(x_shape);   // (M,N)(N,K)
    if (next[1].fn || next[1].leaf) dw = matmul_forward(dy_g.transpose(0, 1), x2, c_dt);   // (N,M)(M,K)
    if (has_bias && (next[2].fn || next[2].leaf)) db = sum(dy, {0});
    if (has_bias) return {dx, dw, db};
    return {dx, dw};
  }
  void release() override { x2 = Tensor(); w = Tensor(); }
};
}  // namespace

namespace {
std::atomic<int> g_bf16_forced{-1};   // -1: not yet set, the default from ATTN_BF16_GEMM to be read

// The emulated bf16 GEMM (no bf16 matmul on this CPU): c (M, N) = xf (M, K) · f32(w)ᵀ + b, xf already
// rounded to bf16 values. The weight is widened to f32 a block of rows at a time into one buffer that
// stays in cache, and each block's columns of c are one GEMM: widening the whole weight per call
// wrote and re-read twice the bf16 weight's bytes (ViT-B/16: 0.5 GB per forward pass), which made
// bf16 11-22% slower than f32 on AVX2 CPUs (docs/design.md, bf16 inference).
void linear_bf16_emulated(const Tensor& xf, const Tensor& w, const Tensor& b, Tensor& c2) {
  const int64_t N = w.size(0), K = w.size(1);
  // The f32 block: 2 MiB (in L3). In-process A/B on an AVX2 Zen 3, ViT-B/16 at batch 1, medians of 12
  // rounds: f32 weights 404 ms, bf16 widened whole 449 ms, in blocks of 512 KiB 399 ms, of 2 MiB 373 ms.
  constexpr int64_t kBlockBytes = int64_t(2) << 20;
  const int64_t rows = std::max<int64_t>(64, kBlockBytes / (K * 4) / 16 * 16);
  if (rows >= N) {
    gemm(xf, w.to(DType::f32).transpose(0, 1), b, c2);
    return;
  }
  Tensor buf = Tensor::empty({rows, K}, DType::f32);
  for (int64_t n0 = 0; n0 < N; n0 += rows) {
    const int64_t nb = std::min(rows, N - n0);
    Tensor wf = buf.slice(0, 0, nb);
    wf.copy_(w.slice(0, n0, n0 + nb));
    Tensor cb = c2.slice(1, n0, n0 + nb);
    gemm(xf, wf.transpose(0, 1), b.defined() ? b.slice(0, n0, n0 + nb) : Tensor(), cb);
  }
}

// x f32 (..., K) times a bf16 weight (N, K), shapes already checked by linear(): see matmul.h.
Tensor linear_bf16_weight(const Tensor& x, const Tensor& w, const Tensor& bias) {
  const int64_t N = w.shape()[0], K = w.shape()[1];
  std::vector<Tensor> ins{x, w};
  if (bias.defined()) ins.push_back(bias);
  ATTN_CHECK(!autograd::needs_grad(ins), "linear: a bf16 weight is for inference, and no gradient flows through "
             "it; run under NoGradGuard, or keep the weight f32 to train");
  Tensor x2 = x.reshape({-1, K});
  Shape os = x.shape();
  os.back() = N;
  Tensor out = Tensor::empty(os, DType::f32);
  Tensor c2 = out.view({x2.shape()[0], N});
  Tensor b = bias.defined() ? bias.to(DType::f32).contiguous() : Tensor();
  Tensor xb = x2.to(DType::bf16);
  if (bf16_gemm_mode() == Bf16Gemm::native) {
    kernels::gemm_onednn(xb, w.transpose(0, 1), b, c2);
  } else {
    linear_bf16_emulated(xb.to(DType::f32), w, b, c2);
  }
  return out;
}
// A weight packed by nn::pack_linear_weights (inference only): the GEMM reads it in oneDNN's layout.
// x · wᵀ + bias through the weight's packed layout, the epilogue applied in the same pass; the
// result f32, or bf16 when `bf16_out` (a bf16 weight only). x f32, or bf16 for a bf16 weight.
Tensor linear_packed_weight(const Tensor& x, const Tensor& w, const Tensor& bias,
                            kernels::GemmEpilogue epilogue = kernels::GemmEpilogue::none, bool bf16_out = false) {
  const int64_t N = w.shape()[0], K = w.shape()[1];
  std::vector<Tensor> ins{x, w};
  if (bias.defined()) ins.push_back(bias);
  ATTN_CHECK(!autograd::needs_grad(ins), "linear: the weight ", w.shape(), " is packed for inference "
             "(nn::pack_linear_weights), and no gradient flows through it; run under NoGradGuard, or unpack it "
             "(nn::unpack_linear_weights) to train");
  ATTN_CHECK(x.dtype() == DType::f32 || (x.dtype() == DType::bf16 && w.dtype() == DType::bf16), "linear: a packed ",
             dtype_name(w.dtype()), " weight takes f32 input", w.dtype() == DType::bf16 ? " or bf16" : "", ", got ",
             dtype_name(x.dtype()));
  ATTN_CHECK(w.dtype() == DType::f32 || bf16_gemm_mode() == Bf16Gemm::native, "linear: the bf16 weight ", w.shape(),
             " is packed for oneDNN's bf16 matmul, which the emulated bf16 GEMM cannot read; unpack it "
             "(nn::unpack_linear_weights) first");
  Tensor x2 = x.reshape({-1, K});
  if (x2.stride(1) != 1) x2 = x2.contiguous();
  Shape os = x.shape();
  os.back() = N;
  Tensor out = Tensor::empty(os, bf16_out && w.dtype() == DType::bf16 ? DType::bf16 : DType::f32);
  Tensor c2 = out.view({x2.shape()[0], N});
  Tensor b = bias.defined() ? bias.to(DType::f32).contiguous() : Tensor();
  kernels::gemm_onednn_packed(x2.to(w.dtype()), w, b, c2, epilogue);
  return out;
}
}  // namespace

bool bf16_gemm_native_available() { return kernels::gemm_onednn_bf16_native(); }

bool bf16_gemm_emulation_forced() {
  int v = g_bf16_forced.load(std::memory_order_relaxed);
  if (v < 0) {
    v = env::bf16_gemm_emulate() ? 1 : 0;
    g_bf16_forced.store(v, std::memory_order_relaxed);
  }
  return v == 1;
}

Bf16Gemm bf16_gemm_mode() {
  return !bf16_gemm_emulation_forced() && kernels::gemm_onednn_bf16_native() ? Bf16Gemm::native : Bf16Gemm::emulated;
}

void set_bf16_gemm_emulated(bool on) { g_bf16_forced.store(on ? 1 : 0, std::memory_order_relaxed); }

bool pack_linear_weight(Tensor& w) {
  if (!w.defined()) return false;
  if (w.is_gemm_packed()) return true;
  // Only a weight that nothing else views or shares (tied weights, slices held elsewhere): the
  // packed bytes are unreadable to every other op.
  if (w.impl_ptr().use_count() != 1 || w.impl().storage.use_count() != 1) return false;
  if (w.dtype() == DType::i8 && !detail::prepare_int8_pack(w)) return false;
  return kernels::gemm_pack_weight(w);
}

void unpack_linear_weight(Tensor& w) { kernels::gemm_unpack_weight(w); }

const char* bf16_gemm_name(Bf16Gemm m) {
  return m == Bf16Gemm::native ? "native (oneDNN bf16 matmul)" : "emulated (f32 GEMM on bf16 values)";
}

namespace {
// Notes linear(x, w, ...)'s GEMM for a live GemmRecorder.
void record_linear(const Tensor& x, const Tensor& w, bool bias) {
  if (!g_recorder) return;
  const int64_t K = w.shape()[1];
  detail_record_gemm({1, x.numel() / std::max<int64_t>(1, K), K, w.shape()[0], x.dtype(), w, bias});
}

// linear(x, w, bias) can run through linear_packed_weight with an epilogue or a bf16 result: an f32 or
// bf16 weight packed for inference, shapes that fit, an f32 x (or a bf16 one for a bf16 weight), and no
// gradient wanted.
bool packed_for_inference(const Tensor& x, const Tensor& w, const Tensor& bias) {
  return w.defined() && w.dim() == 2 && w.is_gemm_packed() && (w.dtype() == DType::f32 || w.dtype() == DType::bf16) &&
         (x.dtype() == DType::f32 || (x.dtype() == DType::bf16 && w.dtype() == DType::bf16)) && x.dim() >= 1 &&
         x.shape().back() == w.shape()[1] && (!bias.defined() || (bias.dim() == 1 && bias.shape()[0] == w.shape()[0])) &&
         !autograd::needs_grad({x, w, bias});
}
}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  ATTN_PROFILE("linear");
  ATTN_CHECK(w.dim() == 2, "linear: expected a 2-d weight (out, in), got shape ", w.shape());
  ATTN_CHECK(x.dim() >= 1 && x.shape().back() == w.shape()[1], "linear: input shape ", x.shape(),
             " does not end in the weight's in_features ", w.shape()[1], " (weight shape ", w.shape(), ")");
  const int64_t N = w.shape()[0], K = w.shape()[1];
  if (bias.defined())
    ATTN_CHECK(bias.dim() == 1 && bias.shape()[0] == N, "linear: expected bias of shape [", N,
               "], got ", bias.shape());
  // Autocast: both operands rounded to bf16 (saved so for the backward; a bf16 x as it is), the result f32.
  const bool bf16 = (x.dtype() == DType::f32 || x.dtype() == DType::bf16) && linear_autocasts(w);
  if (!bf16) record_linear(x, w, bias.defined());
  if (w.dtype() == DType::i8) return detail::linear_int8(x, w, bias);
  if (w.is_gemm_packed()) return linear_packed_weight(x, w, bias);
  if (w.dtype() == DType::bf16 && x.dtype() == DType::f32) return linear_bf16_weight(x, w, bias);
  ATTN_CHECK(x.dtype() == w.dtype() || bf16, "linear: input is ", dtype_name(x.dtype()), ", weight is ",
             dtype_name(w.dtype()));
  Tensor x2 = x.detach().reshape({-1, K});
  const Tensor wd = bf16 ? w.detach().to(DType::bf16) : w.detach();
  if (bf16) {
    x2 = x2.to(DType::bf16);
    record_linear(x, wd, bias.defined());
  }
  Shape os = x.shape();
  os.back() = N;
  Tensor out = Tensor::empty(os, bf16 ? DType::f32 : x.dtype());
  Tensor c2 = out.view({x2.shape()[0], N});
  Tensor b_c = bias.defined() ? bias.detach().contiguous() : Tensor();
  if (bias.defined() && b_c.dtype() != x.dtype() && !kernels::gemm_onednn_supports(x.dtype()))
    b_c = b_c.to(x.dtype());
  gemm(x2, wd.transpose(0, 1), b_c, c2);
  std::vector<Tensor> ins{x, w};
  if (bias.defined()) ins.push_back(bias);
  if (autograd::needs_grad(ins)) {
    auto n = std::make_shared<LinearNode>();
    n->x2 = x2; n->w = wd; n->x_shape = x.shape(); n->has_bias = bias.defined(); n->bf16 = bf16;
    autograd::attach(out, n, ins);
  }
  return out;
}

Tensor linear_bias_gelu(const Tensor& x, const Tensor& w, const Tensor& bias, GeluApprox approx, DType result) {
  if (!packed_for_inference(x, w, bias)) return bias_gelu(linear(x, w), bias, approx, result);
  ATTN_PROFILE("linear");
  record_linear(x, w, bias.defined());
  return linear_packed_weight(x, w, bias, approx == GeluApprox::tanh ? kernels::GemmEpilogue::gelu_tanh
                                                                     : kernels::GemmEpilogue::gelu_erf,
                              /*bf16_out=*/result == DType::bf16);
}

bool linear_autocasts(const Tensor& w) {
  return autocast_bf16() && w.defined() && w.dtype() == DType::f32 && !w.is_gemm_packed() &&
         bf16_gemm_mode() == Bf16Gemm::native;
}

bool linear_reads_bf16(const Tensor& w) {
  return w.defined() && w.dtype() == DType::bf16 && w.is_gemm_packed() && bf16_gemm_mode() == Bf16Gemm::native;
}

Tensor linear_bf16_out(const Tensor& x, const Tensor& w, const Tensor& bias) {
  if (!packed_for_inference(x, w, bias) || !linear_reads_bf16(w)) return linear(x, w, bias);
  ATTN_PROFILE("linear");
  record_linear(x, w, bias.defined());
  return linear_packed_weight(x, w, bias, kernels::GemmEpilogue::none, /*bf16_out=*/true);
}

namespace {
// One recorded GEMM with operands of its own, ready to run.
struct ReadyGemm {
  GemmCall call;
  Tensor a, b, bias, c;
  std::vector<uint8_t> a_u8;
  std::vector<int32_t> c_s32;
};

ReadyGemm ready(const GemmCall& g, Generator& gen) {
  ReadyGemm r{g, {}, {}, {}, {}, {}, {}};
  const Tensor& w = g.weight;
  if (!w.defined()) {   // matmul(): contiguous batched operands of the recorded shapes
    r.a = randn({g.batch, g.M, g.K}, gen).to(g.dtype);
    r.b = randn({g.batch, g.K, g.N}, gen).to(g.dtype);
    r.c = Tensor::empty({g.batch, g.M, g.N}, g.dtype);
    return r;
  }
  if (g.bias) r.bias = Tensor::zeros({g.N});
  if (w.dtype() == DType::i8) {
    r.a_u8.assign(size_t(g.M * g.K), 100);
    r.c_s32.resize(size_t(g.M * g.N));
    return r;
  }
  // As linear() calls the GEMM: f32 input, rounded to bf16 for a bf16 weight; an f32 result. The
  // emulated bf16 GEMM is the f32 one on the widened weight.
  const bool emulated = w.dtype() == DType::bf16 && bf16_gemm_mode() == Bf16Gemm::emulated;
  r.a = randn({g.M, g.K}, gen).to(w.dtype() == DType::bf16 && !emulated ? DType::bf16 : DType::f32);
  if (emulated) r.b = w.to(DType::f32).transpose(0, 1);
  r.c = Tensor::empty({g.M, g.N});
  return r;
}

void run(ReadyGemm& r) {
  const Tensor& w = r.call.weight;
  if (!w.defined()) kernels::gemm_onednn(r.a, r.b, Tensor(), r.c);
  else if (w.dtype() == DType::i8) kernels::gemm_onednn_u8s8(r.a_u8.data(), r.call.M, r.call.K, r.call.K, w, r.c_s32.data());
  else if (r.b.defined()) kernels::gemm_onednn(r.a, r.b, r.bias, r.c);
  else if (w.is_gemm_packed()) kernels::gemm_onednn_packed(r.a, w, r.bias, r.c);
  else kernels::gemm_onednn(r.a, w.transpose(0, 1), r.bias, r.c);
}
}  // namespace

double time_gemm_calls(const std::vector<GemmCall>& calls, double budget_s) {
  Generator gen(1);
  std::vector<ReadyGemm> gemms;
  for (const GemmCall& g : calls) {
    ATTN_CHECK(kernels::gemm_onednn_supports(g.dtype) || g.weight.defined(), "time_gemm_calls: oneDNN has no ",
               dtype_name(g.dtype), " GEMM");
    if (g.M > 0 && g.N > 0 && g.K > 0) gemms.push_back(ready(g, gen));
  }
  if (gemms.empty()) return 0.0;
  for (ReadyGemm& r : gemms) run(r);   // primitives made, operands touched
  using Clock = std::chrono::steady_clock;
  double best = 1e30, spent = 0;
  for (int rep = 0; rep < 3 || spent < budget_s; ++rep) {
    const auto t0 = Clock::now();
    for (ReadyGemm& r : gemms) run(r);
    const double t = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::min(best, t);
    spent += t;
    if (rep >= 1000) break;
  }
  return best;
}

Tensor reference::matmul_naive(const Tensor& a, const Tensor& b) {
  ATTN_CHECK(a.dim() == 2 && b.dim() == 2 && a.shape()[1] == b.shape()[0],
             "matmul_naive: expected (M, K) @ (K, N), got ", a.shape(), " @ ", b.shape());
  Tensor c = Tensor::empty({a.shape()[0], b.shape()[1]}, a.dtype());
  kernels::gemm_reference(a, b, Tensor(), c);
  return c;
}

}  // namespace attn

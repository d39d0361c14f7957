// Internal: the fused window-attention kernels written once over a vector type V and instantiated by
// isa/window_attention.cpp, compiled once per ISA. Include after isa/kernel_isa.h. See
// window_attention.h for the contract; the GEMM micro-kernel, the transposing pack and the softmax
// exponential are the fused attention's (attention_fused_kernels.h).
#pragma once
#include <cstdint>

#include "attention_fused_kernels.h"
#include "window_attention.h"

namespace attn::kernels {
namespace {

template <class V>
struct WinOps {
  using R = typename V::R;
  using A = AttnOps<V>;
  static constexpr int64_t W = V::W;

  struct Item {
    int64_t w, h, C;
    const float* q;   // row i at q + i * ld; k and v at + C, + 2 C
    int64_t ld;
  };
  static Item item_of(const WinAttnGeometry& g, int64_t item) {
    Item it;
    it.w = item / g.NH;
    it.h = item % g.NH;
    it.C = g.NH * g.HS;
    it.q = g.qkv + it.w * g.qkv_sw + it.h * g.HS;
    it.ld = g.qkv_st;
    return it;
  }

  // 1 / max(|x_r|, eps) of rows r < n (row stride ld, HS elements); 0 from n to np.
  static void inv_norms(const float* x, int64_t ld, int64_t n, int64_t HS, float* inv, int64_t np) {
    for (int64_t r = 0; r < n; ++r) {
      const float nr = __builtin_sqrtf(A::dot(x + r * ld, x + r * ld, HS));
      inv[r] = 1.f / (nr > kWinNormEps ? nr : kWinNormEps);
    }
    for (int64_t r = n; r < np; ++r) inv[r] = 0.f;
  }

  // s[j] = s[j]·rf·cf[j] (cf null: 1) + b[j] + m[j] (either null: 0) for j < n; -inf on [n, np) (np a
  // multiple of W). Returns the row's max. Vector stores only, the last partial vector masked: scalar
  // stores of the tail read back by the next vector load stalled store forwarding (a seventh of the
  // forward's own time at N = 49).
  static float score_row(float* s, int64_t n, int64_t np, float rf, const float* cf, const float* b, const float* m) {
    const R vr = V::set1(rf), ninf = V::set1(A::neg_inf());
    R mx = ninf;
    int64_t j = 0;
    for (; j + W <= n; j += W) {
      R x = V::mul(V::load(s + j), vr);
      if (cf) x = V::mul(x, V::load(cf + j));
      if (b) x = V::add(x, V::load(b + j));
      if (m) x = V::add(x, V::load(m + j));
      V::store(s + j, x);
      mx = V::max(mx, x);
    }
    if (j < n) {
      const auto mk = V::tail_mask(n - j);
      R x = V::mul(V::load_tail(s + j, mk, 0.f), vr);
      if (cf) x = V::mul(x, V::load_tail(cf + j, mk, 0.f));
      if (b) x = V::add(x, V::load_tail(b + j, mk, 0.f));
      if (m) x = V::add(x, V::load_tail(m + j, mk, 0.f));
      x = V::select(mk, x, ninf);
      V::store(s + j, x);
      mx = V::max(mx, x);
      j += W;
    }
    for (; j < np; j += W) V::store(s + j, ninf);
    return V::hmax(mx);
  }

  static void fwd(const WinAttnFwdArgs& a, int64_t item, float* scratch) {
    const WinAttnGeometry& g = a.g;
    const Item it = item_of(g, item);
    const int64_t N = g.N, HS = g.HS, Np = win_pad(N), HSp = win_pad(HS), nkp = A::lane_pad(N);
    float* S = scratch;          // N × Np
    float* Kt = S + N * Np;      // HS × Np
    float* Vp = Kt + HSp * Np;   // N × HSp (when HS is not a multiple of the lanes)
    float* O = Vp + N * HSp;     // N × HSp (likewise)
    float* rf = O + N * HSp;     // Np: row factors
    float* cf = rf + Np;         // Np: column factors (V2)
    const float* k = it.q + it.C;
    const float* v = it.q + 2 * it.C;
    A::pack_transposed(k, N, it.ld, HS, Kt, Np, nkp);
    A::gemm(N, nkp, HS, it.q, it.ld, Kt, Np, S, Np, false);
    if (g.logit_scale) {
      inv_norms(it.q, it.ld, N, HS, rf, Np);
      inv_norms(k, it.ld, N, HS, cf, Np);
      const float ls = g.logit_scale[it.h];
      for (int64_t i = 0; i < N; ++i) rf[i] *= ls;
    } else {
      for (int64_t i = 0; i < N; ++i) rf[i] = g.scale;
    }
    const float* bias = g.bias ? g.bias + it.h * N * N : nullptr;
    const float* mask = g.mask ? g.mask + it.w % g.nW * N * N : nullptr;
    float* invr = cf + Np;       // Np: 1 / row sums
    for (int64_t i = 0; i < N; ++i) {
      float* s = S + i * Np;
      const float m = score_row(s, N, nkp, rf[i], g.logit_scale ? cf : nullptr, bias ? bias + i * N : nullptr,
                                mask ? mask + i * N : nullptr);
      const float l = V::hsum(A::exp2_sub_sum(s, nkp, m == A::neg_inf() ? 0.f : m, A::kLog2e, V::zero()));
      invr[i] = l == 0.f ? 0.f : 1.f / l;
      if (a.probs) {
        float* p = a.probs + (item * N + i) * N;
        for (int64_t j = 0; j < N; ++j) p[j] = s[j] * invr[i];
      }
    }
    // O = P V: straight into the output at the head's columns when the head size fills whole vectors.
    const bool direct = HS % W == 0;
    const float* vsrc = v;
    int64_t ldv = it.ld;
    float* dst = a.out + (it.w * N) * it.C + it.h * HS;
    if (!direct) {
      for (int64_t j = 0; j < N; ++j)
        for (int64_t d = 0; d < HSp; ++d) Vp[j * HSp + d] = d < HS ? v[j * it.ld + d] : 0.f;
      vsrc = Vp;
      ldv = HSp;
    }
    A::gemm(N, direct ? HS : HSp, N, S, Np, vsrc, ldv, direct ? dst : O, direct ? it.C : HSp, false);
    for (int64_t i = 0; i < N; ++i) {
      if (direct) {
        A::scale_row(dst + i * it.C, HS, invr[i]);
      } else {
        for (int64_t d = 0; d < HS; ++d) dst[i * it.C + d] = O[i * HSp + d] * invr[i];
      }
    }
  }

  // dst (n × HSp, zero padded) = rows of src (stride ld) times f[r] (null: 1).
  static void pack_rows(const float* src, int64_t ld, int64_t n, int64_t HS, const float* f, float* dst, int64_t HSp) {
    for (int64_t r = 0; r < n; ++r) {
      const float fr = f ? f[r] : 1.f;
      for (int64_t d = 0; d < HS; ++d) dst[r * HSp + d] = src[r * ld + d] * fr;
      for (int64_t d = HS; d < HSp; ++d) dst[r * HSp + d] = 0.f;
    }
  }

  // V2: the gradient through x̂ = x / max(|x|, eps) and the scale ls: from G = dS-product of x̂'s row
  // (g = ls G), dx = (g - x̂ (x̂ · g)) / |x| where |x| > eps, g / eps where the norm is clamped.
  static void unnormalize(float* G, const float* xn, const float* inv, int64_t n, int64_t HS, int64_t HSp, float ls) {
    for (int64_t r = 0; r < n; ++r) {
      float* gr = G + r * HSp;
      const float* x = xn + r * HSp;
      const float t = ls * A::dot(x, gr, HS);
      const bool clamped = inv[r] == 1.f / kWinNormEps;
      for (int64_t d = 0; d < HS; ++d) gr[d] = clamped ? ls * gr[d] * inv[r] : (ls * gr[d] - x[d] * t) * inv[r];
    }
  }

  static void bwd(const WinAttnBwdArgs& a, int64_t item, float* scratch) {
    const WinAttnGeometry& g = a.g;
    const Item it = item_of(g, item);
    const int64_t N = g.N, HS = g.HS, Np = win_pad(N), HSp = win_pad(HS), nkp = A::lane_pad(N), C = it.C;
    float* dP = scratch;          // N × Np
    float* Vt = dP + N * Np;      // HS × Np
    float* dO = Vt + HSp * Np;    // N × HSp
    float* Qn = dO + N * HSp;     // N × HSp: q (V1) or q̂ (V2)
    float* Kn = Qn + N * HSp;     // N × HSp
    float* GQ = Kn + N * HSp;     // N × HSp: dS K
    float* GK = GQ + N * HSp;     // N × HSp: dSᵀ Q
    float* GV = GK + N * HSp;     // N × HSp: Pᵀ dO
    float* iq = GV + 2 * N * HSp;  // Np: 1 / |q_i| (V2)
    float* ik = iq + Np;           // Np
    const float* k = it.q + C;
    const float* v = it.q + 2 * C;
    const float* P = a.probs + item * N * N;
    pack_rows(a.dout + it.w * N * C + it.h * HS, C, N, HS, nullptr, dO, HSp);
    A::pack_transposed(v, N, it.ld, HS, Vt, Np, nkp);
    A::gemm(N, nkp, HS, dO, HSp, Vt, Np, dP, Np, false);
    float* dsout = a.dscores ? a.dscores + item * N * N : nullptr;
    for (int64_t i = 0; i < N; ++i) {   // dS = P ∘ (dP - rowsum(P ∘ dP)), in place of dP
      const float* p = P + i * N;
      float* r = dP + i * Np;
      const float D = A::dot(p, r, N);
      for (int64_t j = 0; j < N; ++j) r[j] = p[j] * (r[j] - D);
      if (dsout)
        for (int64_t j = 0; j < N; ++j) dsout[i * N + j] = r[j];
    }
    const bool v2 = g.logit_scale != nullptr;
    if (v2) {
      inv_norms(it.q, it.ld, N, HS, iq, Np);
      inv_norms(k, it.ld, N, HS, ik, Np);
    }
    pack_rows(it.q, it.ld, N, HS, v2 ? iq : nullptr, Qn, HSp);
    pack_rows(k, it.ld, N, HS, v2 ? ik : nullptr, Kn, HSp);
    A::gemm(N, HSp, N, dP, Np, Kn, HSp, GQ, HSp, false);
    A::template gemm<true>(N, HSp, N, dP, Np, Qn, HSp, GK, HSp, false);
    A::template gemm<true>(N, HSp, N, P, N, dO, HSp, GV, HSp, false);
    if (v2) {
      const float ls = g.logit_scale[it.h];
      float dls = 0.f;
      for (int64_t i = 0; i < N; ++i) dls += A::dot(Qn + i * HSp, GQ + i * HSp, HS);
      a.dls[item] = dls;
      unnormalize(GQ, Qn, iq, N, HS, HSp, ls);
      unnormalize(GK, Kn, ik, N, HS, HSp, ls);
    }
    const float f = v2 ? 1.f : g.scale;
    float* dq = a.dqkv + it.w * N * 3 * C + it.h * HS;
    for (int64_t i = 0; i < N; ++i) {
      float* r = dq + i * 3 * C;
      for (int64_t d = 0; d < HS; ++d) {
        r[d] = GQ[i * HSp + d] * f;
        r[C + d] = GK[i * HSp + d] * f;
        r[2 * C + d] = GV[i * HSp + d];
      }
    }
  }
};

}  // namespace
}  // namespace attn::kernels

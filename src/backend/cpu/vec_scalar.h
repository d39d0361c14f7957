// Portable one-lane "vector" for the scalar kernel path (internal). Same interface as VecAvx2 /
// VecAvx512 so the kernels in vec_kernels.h are written once:
//
//   using V = VecScalar;  V::R s = V::zero();  for (...) s = V::add(s, V::load(p + i));
//
// max/min follow x86 semantics: when either operand is NaN the second one is returned.
#pragma once
#include <cstdint>

namespace attn::kernels {
namespace {

struct VecScalar {
  using R = float;
  using M = bool;
  static constexpr int W = 1;
  static constexpr const char* name = "scalar";

  static R load(const float* p) { return *p; }
  static void store(float* p, R v) { *p = v; }
  static M tail_mask(int64_t n) { return n > 0; }
  static R load_tail(const float* p, M m, float fill) { return m ? *p : fill; }
  static void store_tail(float* p, R v, M m) { if (m) *p = v; }
  static R set1(float v) { return v; }
  static R zero() { return 0.f; }
  static R add(R a, R b) { return a + b; }
  static R sub(R a, R b) { return a - b; }
  static R mul(R a, R b) { return a * b; }
  static R div(R a, R b) { return a / b; }
  // a*b + c and c - a*b, not fused (a portable build has no FMA instruction).
  static R fma(R a, R b, R c) { return a * b + c; }
  static R fnma(R a, R b, R c) { return c - a * b; }
  // The rounding error of p = a*b, exactly: a*b - p (a float product is exact in double).
  static R mul_err(R a, R b, R p) { return float(double(a) * double(b) - double(p)); }
  static R max(R a, R b) { return a > b ? a : b; }
  static R min(R a, R b) { return a < b ? a : b; }
  static R abs(R a) { return __builtin_fabsf(a); }
  static R sqrt(R a) { return __builtin_sqrtf(a); }
  static float hsum(R a) { return a; }
  static float hmax(R a) { return a; }
  static M lt(R a, R b) { return a < b; }
  static M gt(R a, R b) { return a > b; }
  static R select(M m, R a, R b) { return m ? a : b; }
  static bool any(M m) { return m; }
  // 2^n from m = 1.5 * 2^23 + n (n integral, in [-126, 128]; 128 gives inf): the low bits of m
  // hold n, so (bits(m) << 23) + (127 << 23) are the bits of 2^n.
  static R exp_scale(R m) {
    uint32_t bits;
    __builtin_memcpy(&bits, &m, 4);
    bits = (bits << 23) + (127u << 23);
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
  }
};

}  // namespace
}  // namespace attn::kernels

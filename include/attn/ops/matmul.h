// Matrix products on oneDNN (f32, bf16) with a naive reference for f64 and for tests.
//
//   Tensor c = attn::matmul(a, b);                  // (..., M, K) @ (..., K, N), batch broadcast
//   Tensor y = attn::linear(x, w, bias);            // x (..., K), w (N, K), bias (N): x wᵀ + b
//   Tensor s = attn::matmul(q, k.transpose(-2, -1)) // transposed operand: no copy
//   attn::set_bf16_gemm_emulated(true);             // bf16 weights: the f32 GEMM on bf16 values
//   bool packed = attn::pack_linear_weight(w);      // inference: w in oneDNN's layout, in place
//
// Operands may be any strided view whose last two dims have a unit stride in one of them;
// others are made contiguous first.
//
// bf16 weights, for inference: linear(x f32, w bf16, bias f32) rounds x to bf16 (nearest even) and
// multiplies with f32 accumulation into an f32 result, as a bf16 GEMM on AMX / AVX-512 BF16 does.
// Where oneDNN has a bf16 matmul for this CPU it runs that ("native"); elsewhere the same bf16
// operands are multiplied by the f32 GEMM ("emulated": a product of two bf16 values is exact in f32,
// so only the summation order differs). No gradient flows through a bf16 weight.
//
// int8 weights (i8 with their scales, attn/ops/quantize.h), for inference: linear(x f32, w i8, bias)
// quantizes each row of x to 8 bits (7 on a CPU without VNNI) and sums the products in int32.
#pragma once
#include <vector>

#include "attn/core/tensor.h"

namespace attn {

Tensor matmul(const Tensor& a, const Tensor& b);
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// linear(x, w, bias) with its result in bf16 where w is a bf16 weight packed for inference on a CPU with
// a native bf16 matmul and no gradient is wanted (the input of ops that read bf16: the attention of a
// bf16 model, scaled_dot_product_attention_packed); otherwise linear(x, w, bias) itself.
Tensor linear_bf16_out(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor());
// True where linear(x, w) reads a bf16 x as it is (w a bf16 weight packed for oneDNN's native bf16
// matmul), which it would otherwise round from f32 first: a producer may then write x in bf16.
bool linear_reads_bf16(const Tensor& w);
// True where linear(x, w) runs under bf16 autocast (autograd/grad_mode.h: on for this thread, w a plain
// f32 weight, a native bf16 matmul): it rounds an f32 x to bf16 and takes a bf16 x as it is, so a
// producer may write x in bf16 (the same bits), in training too.
bool linear_autocasts(const Tensor& w);

enum class Bf16Gemm { native, emulated };
// What linear() with a bf16 weight runs: native when oneDNN has a bf16 matmul for this CPU, unless
// emulation is forced.
Bf16Gemm bf16_gemm_mode();
bool bf16_gemm_native_available();
// Forces the emulated bf16 GEMM (on) or lets linear() take the native one where there is one (off),
// for the whole process. Until it is called, the default holds: forced when the environment has
// ATTN_BF16_GEMM=emulate (read once, at the first query; docs/environment.md).
void set_bf16_gemm_emulated(bool on);
bool bf16_gemm_emulation_forced();        // the setting, or the default while it is unset
const char* bf16_gemm_name(Bf16Gemm m);   // "native (oneDNN bf16 matmul)" | "emulated (f32 GEMM on bf16 values)"

// Inference: packs a linear() weight w (N, K; f32, bf16 or i8 with its scales, contiguous, the whole
// of its storage) in place into oneDNN's own blocked layout, so that no linear() call re-packs it (see
// nn::pack_linear_weights for when it pays). Returns true if w is packed (now or before); false,
// leaving w untouched, where another tensor views or shares it, where the packed layout would differ
// in size, or where there is none better than the plain one. A packed weight goes only through
// linear(), without gradients, until unpacked.
bool pack_linear_weight(Tensor& w);
// Back to the plain (N, K) layout, bit for bit; no-op on a weight that is not packed.
void unpack_linear_weight(Tensor& w);

// A model's GEMMs, to time them alone (`attn bench`: the model's time over its GEMM time is its
// overhead). While a GemmRecorder lives, linear() and matmul() on its thread note each GEMM they run:
// linear()'s with the weight itself (packed or not, f32, bf16 or int8), matmul()'s by shape.
struct GemmCall {
  int64_t batch = 1, M = 0, K = 0, N = 0;
  DType dtype = DType::f32;   // the input's (matmul: both operands')
  Tensor weight;              // linear(): its (N, K) weight; undefined for matmul()
  bool bias = false;
};
class GemmRecorder {
 public:
  GemmRecorder();
  ~GemmRecorder();
  GemmRecorder(const GemmRecorder&) = delete;
  GemmRecorder& operator=(const GemmRecorder&) = delete;
  const std::vector<GemmCall>& calls() const { return calls_; }

 private:
  friend void detail_record_gemm(GemmCall c);
  std::vector<GemmCall> calls_;
};
// The GEMMs of `calls` alone, on oneDNN as linear() / matmul() run them (an int8 weight's u8 x s8 -> s32
// product without the activations' quantization; a packed weight packed), on operands made once
// beforehand: the best total seconds over repetitions within `budget_s` (at least 3).
double time_gemm_calls(const std::vector<GemmCall>& calls, double budget_s);

namespace reference {
// The test oracle: a triple loop in double, (M, K) @ (K, N) on 2-d tensors of any float dtype.
Tensor matmul_naive(const Tensor& a, const Tensor& b);
}  // namespace reference

}  // namespace attn

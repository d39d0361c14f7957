// Int8 weights and linear() over them (see attn/ops/quantize.h).
//
// oneDNN multiplies u8 activations by s8 weights (the operand order VNNI's vpdpbusd takes), so an
// activation code c in [-qmax, qmax] goes in as c + z with z = qmax + 1, and the sum is corrected by
// z · Σ_k w[n, k] per output: Σ_k (c_k + z) w_k - z Σ_k w_k = Σ_k c_k w_k, exactly.
#include "attn/core/profile.h"
#include "attn/ops/quantize.h"

#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "attn/autograd/node.h"
#include "attn/core/parallel.h"
#include "attn/ops/elementwise.h"
#include "../backend/cpu/gemm.h"
#include "../backend/cpu/quantize_kernels.h"
#include "quantize_internal.h"

namespace attn {

namespace {

// What an i8 weight's storage refers to (Storage::int8_weight).
struct Int8Info {
  Tensor scale;                  // f32 (N)
  std::mutex mu;
  std::vector<int32_t> colsum;   // Σ_k w[n, k], recorded when the weight was packed
};

Int8Info* info_of(const Tensor& w) {
  if (!w.defined() || !w.impl().storage) return nullptr;
  return static_cast<Int8Info*>(w.impl().storage->int8_weight.get());
}

// Σ_k w[n, k] of a plain (N, K) i8 weight with unit last stride.
std::vector<int32_t> column_sums(const Tensor& w) {
  const int64_t N = w.size(0), K = w.size(1), ld = w.stride(0);
  const int8_t* p = static_cast<const int8_t*>(w.raw_data());
  std::vector<int32_t> s(size_t(N), 0);
  parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      int32_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += p[n * ld + k];
      s[size_t(n)] = acc;
    }
  });
  return s;
}

}  // namespace

Int8Weight quantize_weight_int8(const Tensor& w_in) {
  ATTN_CHECK(w_in.dim() == 2 && (w_in.dtype() == DType::f32 || w_in.dtype() == DType::bf16),
             "quantize_weight_int8: expected a 2-d f32 or bf16 weight (out, in), got ", dtype_name(w_in.dtype()), " ",
             w_in.shape());
  const Tensor w = w_in.detach().to(DType::f32).contiguous();
  const int64_t N = w.size(0), K = w.size(1);
  Int8Weight q{Tensor::empty({N, K}, DType::i8), Tensor::empty({N}, DType::f32)};
  const float* pw = w.data<float>();
  int8_t* pq = static_cast<int8_t*>(q.weight.raw_data());
  float* ps = q.scale.data<float>();
  parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const float* row = pw + n * K;
      float m = 0.f;
      bool finite = true;
      for (int64_t k = 0; k < K; ++k) m = std::max(m, std::fabs(row[k])), finite = finite && std::isfinite(row[k]);
      ATTN_CHECK(finite, "quantize_weight_int8: row ", n, " of the weight ", w.shape(),
                 " holds a non-finite value");
      const float s = m > 0.f ? m / 127.f : 1.f, inv = 1.f / s;
      ps[n] = s;
      for (int64_t k = 0; k < K; ++k) {
        const float c = std::nearbyint(row[k] * inv);
        pq[n * K + k] = int8_t(std::max(-127.f, std::min(127.f, c)));
      }
    }
  });
  return q;
}

Tensor dequantize_weight_int8(const Tensor& weight, const Tensor& scale) {
  ATTN_CHECK(weight.dtype() == DType::i8 && weight.dim() == 2 && scale.dtype() == DType::f32 && scale.dim() == 1 &&
                 scale.size(0) == weight.size(0),
             "dequantize_weight_int8: expected an i8 (N, K) weight and f32 (N) scales, got ", dtype_name(weight.dtype()),
             " ", weight.shape(), " and ", dtype_name(scale.dtype()), " ", scale.shape());
  return weight.to(DType::f32) * scale.unsqueeze(1);
}

void set_int8_weight_scale(Tensor& weight, const Tensor& scale) {
  ATTN_CHECK(weight.defined() && weight.dtype() == DType::i8 && weight.dim() == 2, "set_int8_weight_scale: expected "
             "an i8 (out, in) weight, got ", weight.defined() ? dtype_name(weight.dtype()) : "undefined", " ",
             weight.defined() ? weight.shape() : Shape{});
  ATTN_CHECK(scale.defined() && scale.dtype() == DType::f32 && scale.dim() == 1 && scale.size(0) == weight.size(0) &&
                 scale.is_contiguous(),
             "set_int8_weight_scale: expected contiguous f32 scales of shape [", weight.size(0), "], got ",
             scale.defined() ? dtype_name(scale.dtype()) : "undefined", " ", scale.defined() ? scale.shape() : Shape{});
  auto info = std::make_shared<Int8Info>();
  info->scale = scale.detach();
  weight.impl().storage->int8_weight = info;
}

Tensor int8_weight_scale(const Tensor& weight) {
  const Int8Info* i = info_of(weight);
  return i ? i->scale : Tensor();
}

int int8_activation_max() {
  static const int q = kernels::gemm_u8s8_full_range() ? 127 : 63;
  return q;
}

const char* int8_gemm_name() {
  return int8_activation_max() == 127 ? "u8 x s8 -> s32 (8-bit activations)"
                                      : "u8 x s8 -> s32 (7-bit activations: 16-bit pair sums)";
}

namespace detail {

bool prepare_int8_pack(const Tensor& w) {
  Int8Info* i = info_of(w);
  if (!i) return false;
  std::vector<int32_t> s = column_sums(w);
  std::lock_guard<std::mutex> lk(i->mu);
  i->colsum = std::move(s);
  return true;
}

Tensor embedding_int8(const Tensor& weight, const std::vector<int64_t>& idx, const Shape& os) {
  ATTN_PROFILE("embedding");
  Int8Info* info = info_of(weight);
  ATTN_CHECK(info, "embedding: the i8 table ", weight.shape(), " carries no scales (quantize it with "
             "nn::quantize_embedding_int8; a copy of an int8 table loses them)");
  ATTN_CHECK(!autograd::needs_grad({weight}), "embedding: an int8 table is for inference, and no gradient flows "
             "through it");
  const Tensor w = weight.contiguous();
  const int64_t C = w.size(1);
  Tensor out = Tensor::empty(os, DType::f32);
  const int8_t* q = static_cast<const int8_t*>(w.raw_data());
  const float* s = info->scale.data<float>();
  float* o = out.data<float>();
  parallel_for(0, int64_t(idx.size()), std::max<int64_t>(1, 16384 / C), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int8_t* row = q + idx[size_t(r)] * C;
      const float sc = s[idx[size_t(r)]];
      for (int64_t c = 0; c < C; ++c) o[r * C + c] = float(row[c]) * sc;
    }
  });
  return out;
}

Tensor linear_int8(const Tensor& x, const Tensor& w, const Tensor& bias) {
  ATTN_PROFILE("linear (int8)");
  const int64_t N = w.size(0), K = w.size(1);
  Int8Info* info = info_of(w);
  ATTN_CHECK(info, "linear: the i8 weight ", w.shape(), " carries no scales (quantize it with "
             "attn::quantize_weight_int8 or nn::quantize_linear_weights_int8; a copy of an int8 weight loses them)");
  std::vector<Tensor> ins{x, w};
  if (bias.defined()) ins.push_back(bias);
  ATTN_CHECK(!autograd::needs_grad(ins), "linear: an int8 weight is for inference, and no gradient flows through it; "
             "run under NoGradGuard");
  ATTN_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::bf16, "linear: an int8 weight takes f32 or bf16 input, "
             "got ", dtype_name(x.dtype()));
  Tensor x2 = x.detach().reshape({-1, K});
  if (x2.dtype() != DType::f32) x2 = x2.to(DType::f32);
  if (x2.stride(1) != 1) x2 = x2.contiguous();
  const int64_t M = x2.size(0);
  Shape os = x.shape();
  os.back() = N;
  Tensor out = Tensor::empty(os, DType::f32);
  if (M == 0) return out;
  const int qmax = int8_activation_max();
  // Activation codes and scales, row by row.
  Tensor q = Tensor::empty({M, K}, DType::u8);
  Tensor a_scale = Tensor::empty({M}, DType::f32);
  const auto& k = kernels::quantize_kernels();
  const float* px = x2.data<float>();
  uint8_t* pq = q.data<uint8_t>();
  float* pas = a_scale.data<float>();
  const int64_t ldx = x2.stride(0);
  parallel_for(0, M, std::max<int64_t>(1, 16384 / K), [&](int64_t r0, int64_t r1) {
    k.quantize_rows(px + r0 * ldx, ldx, pq + r0 * K, K, pas + r0, r1 - r0, K, qmax);
  });
  // The int32 sums, written into the output's own bytes, then turned into f32 in place.
  int32_t* acc = static_cast<int32_t*>(out.raw_data());
  kernels::gemm_onednn_u8s8(pq, M, K, K, w, acc);
  std::vector<int32_t> corr;
  if (w.is_gemm_packed()) {
    std::lock_guard<std::mutex> lk(info->mu);
    ATTN_CHECK(int64_t(info->colsum.size()) == N, "linear: the packed i8 weight ", w.shape(),
               " has no column sums (pack it with attn::pack_linear_weight)");
    corr = info->colsum;
  } else {
    corr = column_sums(w);
  }
  for (int32_t& c : corr) c *= qmax + 1;
  const Tensor b = bias.defined() ? bias.detach().to(DType::f32).contiguous() : Tensor();
  const float* pb = b.defined() ? b.data<float>() : nullptr;
  const float* pws = info->scale.data<float>();
  parallel_for(0, M, std::max<int64_t>(1, 16384 / N), [&](int64_t r0, int64_t r1) {
    k.dequantize_rows(acc + r0 * N, pas + r0, pws, corr.data(), pb, r1 - r0, N);
  });
  return out;
}

}  // namespace detail

}  // namespace attn

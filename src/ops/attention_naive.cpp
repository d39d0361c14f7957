// The naive scaled dot-product attention (see attention_naive.h): matmul -> scale -> mask ->
// softmax -> (all-masked rows -> 0) -> dropout -> matmul, every step an autograd-recorded op.
#include "attention_naive.h"

#include <cmath>

#include "attn/autograd/grad_mode.h"
#include "attn/ops/dropout.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/indexing.h"
#include "attn/ops/matmul.h"
#include "attn/ops/reduce.h"
#include "attn/ops/softmax.h"

namespace attn::reference {

Tensor causal_mask(int64_t Tq, int64_t Tk, int64_t shift) {
  Tensor m = Tensor::empty({Tq, Tk}, DType::u8);
  uint8_t* p = m.data<uint8_t>();
  for (int64_t i = 0; i < Tq; ++i)
    for (int64_t j = 0; j < Tk; ++j) p[i * Tk + j] = j > i + shift ? 1 : 0;
  return m;
}

namespace {

// (B, NH, Tq, 1) u8 marking rows whose scores are all -inf, or undefined when there is none.
Tensor dead_rows(const Tensor& scores) {
  Tensor mx = max(scores.detach(), -1, /*keepdim=*/true).first.contiguous();
  Tensor dead = Tensor::zeros(mx.shape(), DType::u8);
  uint8_t* pd = dead.data<uint8_t>();
  bool any = false;
  ATTN_DISPATCH_FLOAT(mx.dtype(), "scaled_dot_product_attention", [&] {
    const T* pm = mx.data<T>();
    for (int64_t i = 0; i < mx.numel(); ++i)
      if (pm[i] == -INFINITY) { pd[i] = 1; any = true; }
  });
  return any ? dead : Tensor();
}

}  // namespace

SdpaResult sdpa_naive(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                      const SdpaNaiveConfig& c) {
  const int64_t Tq = q.size(2), Tk = k.size(2);
  Tensor s = matmul(q, k.transpose(-2, -1));   // (B, NH, Tq, Tk)
  if (c.scale != 1.0) s = s * c.scale;
  bool masked = false;
  if (mask.defined()) {
    s = mask.dtype() == DType::u8 ? masked_fill(s, mask, -INFINITY) : s + mask;
    masked = true;
  }
  if (c.causal) {
    s = masked_fill(s, causal_mask(Tq, Tk, c.shift), -INFINITY);
    masked = true;
  }
  Tensor dead = masked && Tk > 0 ? dead_rows(s) : Tensor();
  // A dead row is softmaxed as zeros (no NaN), then zeroed: its gradients are zero too.
  if (dead.defined()) s = masked_fill(s, dead, 0.0);
  Tensor w = softmax(s, -1);
  if (dead.defined()) w = masked_fill(w, dead, 0.0);
  Tensor wd = w;
  if (c.dropout_p > 0) wd = dropout(w, c.dropout_p, true, c.generator ? *c.generator : default_generator());
  SdpaResult r;
  r.out = matmul(wd, v);
  if (c.need_weights) r.weights = w;
  return r;
}

}  // namespace attn::reference

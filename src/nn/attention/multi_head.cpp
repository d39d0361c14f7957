// SelfAttention (timm's Attention) and MultiheadAttention (torch.nn.MultiheadAttention) on
// scaled_dot_product_attention.
#include "attn/nn/attention/multi_head.h"

#include <cmath>
#include <string>

#include "attn/nn/init.h"
#include "attn/ops/combine.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/indexing.h"
#include "attn/ops/matmul.h"
#include "attn/ops/reduce.h"

namespace attn::nn {

namespace {

Shape shape_of(const Tensor& t) { return t.defined() ? t.shape() : Shape{}; }

// True when `mask` broadcasts to `target` (right-aligned, sizes equal or 1).
bool broadcasts_to(const Shape& mask, const Shape& target) {
  if (mask.size() > target.size()) return false;
  for (size_t i = 1; i <= mask.size(); ++i) {
    const int64_t m = mask[mask.size() - i], t = target[target.size() - i];
    if (m != t && m != 1) return false;
  }
  return true;
}

// (x, y) -> (B, NH, T, HS): splits the last dim of (B, T, NH * HS) into heads.
Tensor heads(const Tensor& x, int64_t nh) {
  const int64_t B = x.size(0), T = x.size(1), hs = x.size(2) / nh;
  return x.reshape({B, T, nh, hs}).transpose(1, 2);
}

// (B, NH, T, HS) -> (B, T, NH * HS)
Tensor merge_heads(const Tensor& x) {
  const int64_t B = x.size(0), nh = x.size(1), T = x.size(2), hs = x.size(3);
  return x.transpose(1, 2).reshape({B, T, nh * hs});
}

}  // namespace

// ---------------------------------------------------------------- SelfAttention

namespace {
const SelfAttentionOptions& checked(const SelfAttentionOptions& o) {
  ATTN_CHECK(o.dim > 0 && o.num_heads > 0, "SelfAttention: expected positive dim and num_heads, got ", o.dim,
             " and ", o.num_heads);
  ATTN_CHECK(o.head_dim > 0 || o.dim % o.num_heads == 0, "SelfAttention: dim ", o.dim,
             " is not divisible by num_heads ", o.num_heads, " (set head_dim for heads of another width)");
  ATTN_CHECK(o.head_dim >= 0, "SelfAttention: expected head_dim >= 0 (0: dim / num_heads), got ", o.head_dim);
  ATTN_CHECK(std::isnan(o.scale) || (std::isfinite(o.scale) && o.scale > 0),
             "SelfAttention: expected a positive finite scale (or NaN for 1/sqrt(head_dim)), got ", o.scale);
  ATTN_CHECK(o.attn_drop >= 0 && o.attn_drop <= 1 && o.proj_drop >= 0 && o.proj_drop <= 1,
             "SelfAttention: expected attn_drop and proj_drop in [0, 1], got ", o.attn_drop, " and ", o.proj_drop);
  return o;
}
}  // namespace

SelfAttention::SelfAttention(const SelfAttentionOptions& o, Generator& g, Generator* dropout_gen)
    : opt_(checked(o)), gen_(dropout_gen) {
  const int64_t inner = o.num_heads * head_dim();
  qkv = register_module("qkv", std::make_shared<Linear>(
                                   LinearOptions{o.dim, (o.share_qk ? 2 : 3) * inner, o.qkv_bias, o.dtype}, g));
  proj = register_module("proj", std::make_shared<Linear>(LinearOptions{inner, o.dim, true, o.dtype}, g));
  proj_drop = register_module("proj_drop", std::make_shared<Dropout>(o.proj_drop, dropout_gen));
}

MultiHeadResult SelfAttention::forward(const Tensor& x, const Tensor& mask, bool need_weights) const {
  const int64_t C = opt_.dim, NH = opt_.num_heads;
  ATTN_CHECK(x.defined() && x.dim() == 3 && x.size(2) == C, "SelfAttention: expected x of shape (B, T, ", C,
             "), got ", shape_of(x));
  // bf16 and int8 weights (inference) take f32 activations.
  const DType wdt = qkv->weight.dtype();
  const DType xdt = wdt == DType::bf16 || wdt == DType::i8 ? DType::f32 : wdt;
  // (and a bf16 x where the projection reads it as it is: a bf16 layer norm's result, in inference with a
  // bf16 weight or in training under bf16 autocast)
  ATTN_CHECK(x.dtype() == xdt ||
                 (x.dtype() == DType::bf16 && (linear_reads_bf16(qkv->weight) || linear_autocasts(qkv->weight))),
             "SelfAttention: expected x of dtype ", dtype_name(xdt), ", got ", dtype_name(x.dtype()));
  const int64_t B = x.size(0), T = x.size(1);
  if (mask.defined()) {
    ATTN_CHECK(mask.dtype() == DType::u8 || mask.dtype() == x.dtype(), "SelfAttention: expected a u8 (bool) or ",
               dtype_name(x.dtype()), " (additive) mask, got ", dtype_name(mask.dtype()));
    ATTN_CHECK(broadcasts_to(mask.shape(), {B, NH, T, T}), "SelfAttention: expected a mask broadcastable to ",
               Shape({B, NH, T, T}), " (B, NH, T, T), got ", mask.shape());
  }
  SdpaOptions so;
  so.causal = opt_.causal;
  so.dropout_p = is_training() ? opt_.attn_drop : 0.0;
  so.generator = gen_;
  so.need_weights = need_weights;
  so.impl = opt_.impl;
  so.scale = opt_.scale;
  // A bf16 model in inference: the projection's result in bf16, the attention in bf16 (ops/attention.h).
  const bool bf16 = !need_weights && !mask.defined() && !so.causal && so.dropout_p == 0.0 && wdt == DType::bf16;
  const Tensor y = bf16 ? linear_bf16_out(x, qkv->weight, qkv->bias) : qkv->forward(x);
  if (!need_weights && !opt_.share_qk)   // one (B, T, 3 NH HS) gradient buffer on the fused path
    return {proj_drop->forward(proj->forward(scaled_dot_product_attention_packed(y, NH, mask, so))), Tensor()};
  // (B, T, P NH HS) -> (P, B, NH, T, HS): views of the one projection (P = 2 with shared queries and keys).
  const int64_t parts = opt_.share_qk ? 2 : 3;
  const Tensor t = y.view({B, T, parts, NH, head_dim()}).permute({2, 0, 3, 1, 4});
  const Tensor q = t.select(0, 0), k = opt_.share_qk ? q : t.select(0, 1), v = t.select(0, parts - 1);
  SdpaResult r = scaled_dot_product_attention(q, k, v, mask, so);
  return {proj_drop->forward(proj->forward(merge_heads(r.out))), r.weights};
}

// ---------------------------------------------------------------- MultiheadAttention

namespace {
enum class Layout { packed, separate, shared_qk };

MultiheadAttentionOptions resolved(MultiheadAttentionOptions o) {
  ATTN_CHECK(o.embed_dim > 0 && o.num_heads > 0, "MultiheadAttention: expected positive embed_dim and num_heads, got ",
             o.embed_dim, " and ", o.num_heads);
  ATTN_CHECK(o.embed_dim % o.num_heads == 0, "MultiheadAttention: embed_dim ", o.embed_dim,
             " is not divisible by num_heads ", o.num_heads);
  if (o.kdim == 0) o.kdim = o.embed_dim;
  if (o.vdim == 0) o.vdim = o.embed_dim;
  ATTN_CHECK(o.kdim > 0 && o.vdim > 0, "MultiheadAttention: expected positive kdim and vdim, got ", o.kdim, " and ",
             o.vdim);
  ATTN_CHECK(!o.share_qk || o.kdim == o.embed_dim, "MultiheadAttention: share_qk needs kdim == embed_dim, got kdim ",
             o.kdim, " and embed_dim ", o.embed_dim);
  ATTN_CHECK(o.dropout >= 0 && o.dropout <= 1, "MultiheadAttention: expected dropout in [0, 1], got ", o.dropout);
  ATTN_CHECK(is_floating(o.dtype), "MultiheadAttention: expected a f32 or f64 dtype, got ", dtype_name(o.dtype));
  return o;
}

Layout layout_of(const MultiheadAttentionOptions& o) {
  if (o.share_qk) return Layout::shared_qk;
  return o.kdim == o.embed_dim && o.vdim == o.embed_dim ? Layout::packed : Layout::separate;
}

// Left as allocated: reset_parameters writes every one (under SkipRandomInit(Fill::none) nothing
// does, so a model built for a strict load touches no page of its projections).
Tensor param_if(bool on, const Shape& s, DType dt) { return on ? Tensor::empty(s, dt) : Tensor(); }
}  // namespace

MultiheadAttention::MultiheadAttention(const MultiheadAttentionOptions& o, Generator& g, Generator* dropout_gen)
    : opt_(resolved(o)),
      gen_(dropout_gen),
      in_proj_weight(register_parameter("in_proj_weight", param_if(layout_of(opt_) == Layout::packed,
                                                                   {3 * opt_.embed_dim, opt_.embed_dim}, opt_.dtype))),
      qk_proj_weight(register_parameter("qk_proj_weight", param_if(layout_of(opt_) == Layout::shared_qk,
                                                                   {opt_.embed_dim, opt_.embed_dim}, opt_.dtype))),
      q_proj_weight(register_parameter("q_proj_weight", param_if(layout_of(opt_) == Layout::separate,
                                                                 {opt_.embed_dim, opt_.embed_dim}, opt_.dtype))),
      k_proj_weight(register_parameter("k_proj_weight", param_if(layout_of(opt_) == Layout::separate,
                                                                 {opt_.embed_dim, opt_.kdim}, opt_.dtype))),
      v_proj_weight(register_parameter("v_proj_weight", param_if(layout_of(opt_) != Layout::packed,
                                                                 {opt_.embed_dim, opt_.vdim}, opt_.dtype))),
      in_proj_bias(register_parameter(
          "in_proj_bias", param_if(opt_.bias, {(opt_.share_qk ? 2 : 3) * opt_.embed_dim}, opt_.dtype))) {
  out_proj = register_module(
      "out_proj", std::make_shared<Linear>(LinearOptions{opt_.embed_dim, opt_.embed_dim, opt_.bias, opt_.dtype}, g));
  reset_parameters(g);
}

void MultiheadAttention::reset_parameters(Generator& g) {
  out_proj->reset_parameters(g);
  for (Tensor* w : {&in_proj_weight, &qk_proj_weight, &q_proj_weight, &k_proj_weight, &v_proj_weight})
    if (w->defined()) init::xavier_uniform_(*w, g);
  if (in_proj_bias.defined()) {
    init::zeros_(in_proj_bias);
    init::zeros_(out_proj->bias);
  }
}

MultiHeadResult MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                            const Tensor& key_padding_mask, bool need_weights,
                                            const Tensor& attn_mask, bool average_attn_weights) const {
  const char* op = "MultiheadAttention";
  const int64_t E = opt_.embed_dim, NH = opt_.num_heads;
  ATTN_CHECK(query.defined() && key.defined() && value.defined(), op, ": expected query, key and value");
  ATTN_CHECK(query.dim() == 3 || query.dim() == 2, op,
             ": expected a 3-D (batched) or 2-D (unbatched) query, got shape ", query.shape());
  const bool batched = query.dim() == 3;
  ATTN_CHECK(key.dim() == query.dim() && value.dim() == query.dim(), op, ": expected ", query.dim(),
             "-D key and value for a ", query.dim(), "-D query, got shapes ", key.shape(), " and ", value.shape());
  ATTN_CHECK(query.size(-1) == E, op, ": expected query of embed dim ", E, ", got shape ", query.shape());
  ATTN_CHECK(key.size(-1) == opt_.kdim, op, ": expected key of feature dim ", opt_.kdim, ", got shape ", key.shape());
  ATTN_CHECK(value.size(-1) == opt_.vdim, op, ": expected value of feature dim ", opt_.vdim, ", got shape ",
             value.shape());
  const DType dt = out_proj->weight.dtype();
  ATTN_CHECK(query.dtype() == dt && key.dtype() == dt && value.dtype() == dt, op,
             ": expected query, key and value of dtype ", dtype_name(dt), ", got ", dtype_name(query.dtype()), ", ",
             dtype_name(key.dtype()), ", ", dtype_name(value.dtype()));
  // To (B, T, F).
  auto to_bt = [&](const Tensor& x) {
    if (!batched) return x.unsqueeze(0);
    return opt_.batch_first ? x : x.transpose(0, 1);
  };
  const bool self_attn = query.is_same(key) && key.is_same(value);
  const Tensor q_in = to_bt(query), k_in = self_attn ? q_in : to_bt(key), v_in = self_attn ? q_in : to_bt(value);
  const int64_t B = q_in.size(0), L = q_in.size(1), S = k_in.size(1);
  ATTN_CHECK(k_in.size(0) == B && v_in.size(0) == B, op, ": expected query, key and value with one batch size, got ",
             "shapes ", query.shape(), ", ", key.shape(), " and ", value.shape());
  ATTN_CHECK(v_in.size(1) == S, op, ": expected key and value with one sequence length, got shapes ", key.shape(),
             " and ", value.shape());

  // ---- masks -> one mask broadcastable to (B, NH, L, S)
  auto check_mask_dtype = [&](const Tensor& m, const char* name) {
    ATTN_CHECK(m.dtype() == DType::u8 || m.dtype() == dt, op, ": expected ", name, " of dtype u8 (bool) or ",
               dtype_name(dt), " (additive), got ", dtype_name(m.dtype()));
  };
  Tensor am, kpm;
  if (attn_mask.defined()) {
    check_mask_dtype(attn_mask, "attn_mask");
    if (attn_mask.dim() == 2) {
      ATTN_CHECK(attn_mask.shape() == Shape({L, S}), op, ": expected a 2-D attn_mask of shape ", Shape({L, S}),
                 ", got ", attn_mask.shape());
      am = attn_mask;                                             // broadcasts as (1, 1, L, S)
    } else if (attn_mask.dim() == 3) {
      ATTN_CHECK(attn_mask.shape() == Shape({B * NH, L, S}), op, ": expected a 3-D attn_mask of shape ",
                 Shape({B * NH, L, S}), " (B·NH, L, S), got ", attn_mask.shape());
      am = attn_mask.reshape({B, NH, L, S});
    } else {
      fail(op, ": expected a 2-D or 3-D attn_mask, got shape ", attn_mask.shape());
    }
  }
  if (key_padding_mask.defined()) {
    check_mask_dtype(key_padding_mask, "key_padding_mask");
    const Shape want = batched ? Shape{B, S} : Shape{S};
    ATTN_CHECK(key_padding_mask.shape() == want, op, ": expected key_padding_mask of shape ", want, ", got ",
               key_padding_mask.shape());
    kpm = key_padding_mask.reshape({B, 1, 1, S});
  }
  Tensor mask = am.defined() ? am : kpm;
  if (am.defined() && kpm.defined()) {
    const Shape am4 = am.dim() == 4 ? am.shape() : Shape{1, 1, L, S};
    const Shape both = broadcast_shapes(am4, kpm.shape(), op);
    const bool am_bool = am.dtype() == DType::u8, kpm_bool = kpm.dtype() == DType::u8;
    if (am_bool && kpm_bool) mask = where(kpm, Tensor::scalar(1.0, DType::u8), am);
    else if (am_bool) mask = masked_fill(kpm.expand(both), am, -INFINITY);
    else if (kpm_bool) mask = masked_fill(am.expand(both), kpm, -INFINITY);
    else mask = am + kpm;
  }

  // ---- input projections
  Tensor q, k, v;
  const Tensor& bias = in_proj_bias;
  auto bias_part = [&](int64_t i) { return bias.defined() ? bias.slice(0, i * E, (i + 1) * E) : Tensor(); };
  switch (layout_of(opt_)) {
    case Layout::packed:
      if (self_attn) {   // one GEMM for q, k and v
        auto parts = split(linear(q_in, in_proj_weight, bias), E, -1);
        q = parts[0]; k = parts[1]; v = parts[2];
      } else {
        q = linear(q_in, in_proj_weight.slice(0, 0, E), bias_part(0));
        k = linear(k_in, in_proj_weight.slice(0, E, 2 * E), bias_part(1));
        v = linear(v_in, in_proj_weight.slice(0, 2 * E, 3 * E), bias_part(2));
      }
      break;
    case Layout::separate:
      q = linear(q_in, q_proj_weight, bias_part(0));
      k = linear(k_in, k_proj_weight, bias_part(1));
      v = linear(v_in, v_proj_weight, bias_part(2));
      break;
    case Layout::shared_qk:
      q = linear(q_in, qk_proj_weight, bias_part(0));
      k = self_attn ? q : linear(k_in, qk_proj_weight, bias_part(0));
      v = linear(v_in, v_proj_weight, bias_part(1));
      break;
  }

  SdpaOptions so;
  so.dropout_p = is_training() ? opt_.dropout : 0.0;
  so.generator = gen_;
  so.need_weights = need_weights;
  so.impl = opt_.impl;
  SdpaResult r = scaled_dot_product_attention(heads(q, NH), heads(k, NH), heads(v, NH), mask, so);
  Tensor out = out_proj->forward(merge_heads(r.out));           // (B, L, E)
  Tensor w = r.weights;                                          // (B, NH, L, S)
  if (w.defined() && average_attn_weights) w = mean(w, {1});     // (B, L, S)
  if (!batched) {
    out = out.select(0, 0);
    if (w.defined()) w = w.select(0, 0);
  } else if (!opt_.batch_first) {
    out = out.transpose(0, 1);                                   // (L, B, E)
  }
  return {out, need_weights ? w : Tensor()};
}

}  // namespace attn::nn

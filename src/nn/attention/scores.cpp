// The classic score functions (dot, general, concat/additive, cosine, location), masked softmax
// and the context vector.
#include "attn/nn/attention/scores.h"

#include <cmath>

#include "attn/ops/elementwise.h"
#include "attn/ops/indexing.h"
#include "attn/ops/matmul.h"
#include "attn/ops/reduce.h"
#include "attn/ops/softmax.h"

namespace attn::nn {

Tensor masked_softmax(const Tensor& scores, const Tensor& mask) {
  ATTN_CHECK(scores.defined() && scores.dim() >= 1 && is_floating(scores.dtype()),
             "masked_softmax: expected f32 or f64 scores with at least 1 dim, got ",
             scores.defined() ? scores.shape() : Shape{}, " ",
             scores.defined() ? dtype_name(scores.dtype()) : "undefined");
  if (!mask.defined()) return softmax(scores, -1);
  ATTN_CHECK(mask.dtype() == DType::u8, "masked_softmax: expected a u8 mask, got ", dtype_name(mask.dtype()));
  bool ok = mask.dim() <= scores.dim();
  for (int64_t i = 1; ok && i <= mask.dim(); ++i)
    ok = mask.size(-i) == 1 || mask.size(-i) == scores.size(-i);
  ATTN_CHECK(ok, "masked_softmax: expected a mask broadcastable to ", scores.shape(), ", got ", mask.shape());
  const Tensor m = mask.expand(scores.shape()).contiguous();
  const int64_t n = scores.size(-1);
  const int64_t rows = n == 0 ? 0 : scores.numel() / n;
  // Positions to fill with -inf: the masked ones, except in rows where every position is masked
  // (those keep their finite scores, so the softmax and its gradient stay finite, and are zeroed
  // by the final where).
  Tensor fill = Tensor::empty(scores.shape(), DType::u8);
  const uint8_t* pm = m.data<uint8_t>();
  uint8_t* pf = fill.data<uint8_t>();
  for (int64_t r = 0; r < rows; ++r) {
    bool all = true;
    for (int64_t j = 0; j < n && all; ++j) all = pm[r * n + j] != 0;
    for (int64_t j = 0; j < n; ++j) pf[r * n + j] = (!all && pm[r * n + j]) ? 1 : 0;
  }
  const Tensor p = softmax(masked_fill(scores, fill, -INFINITY), -1);
  return where(m, Tensor::scalar(0.0, scores.dtype()), p);
}

const char* score_kind_name(ScoreKind k) {
  switch (k) {
    case ScoreKind::dot: return "dot";
    case ScoreKind::general: return "general";
    case ScoreKind::concat: return "concat";
    case ScoreKind::cosine: return "cosine";
    case ScoreKind::location: return "location";
  }
  return "?";
}

namespace detail {

void check_attention_inputs(const char* op, const Tensor& s, const Tensor& h, const Tensor& key_padding_mask,
                            const Tensor& values, int64_t query_dim, int64_t key_dim) {
  ATTN_CHECK(s.defined() && h.defined(), op, ": expected defined s and h");
  ATTN_CHECK(s.dim() == 2 && s.size(1) == query_dim, op, ": expected s of shape (B, ", query_dim, "), got ",
             s.shape());
  const int64_t b = s.size(0);
  ATTN_CHECK(h.dim() == 3 && h.size(0) == b && (key_dim < 0 || h.size(2) == key_dim), op,
             ": expected h of shape (", b, ", S, ", key_dim < 0 ? std::string("Dk") : std::to_string(key_dim),
             "), got ", h.shape());
  ATTN_CHECK(is_floating(s.dtype()), op, ": expected s of dtype f32 or f64, got ", dtype_name(s.dtype()));
  ATTN_CHECK(h.dtype() == s.dtype(), op, ": expected h of dtype ", dtype_name(s.dtype()), " (as s), got ",
             dtype_name(h.dtype()));
  const int64_t S = h.size(1);
  if (values.defined()) {
    ATTN_CHECK(values.dim() == 3 && values.size(0) == b && values.size(1) == S, op,
               ": expected values of shape (", b, ", ", S, ", Dv), got ", values.shape());
    ATTN_CHECK(values.dtype() == s.dtype(), op, ": expected values of dtype ", dtype_name(s.dtype()),
               " (as s), got ", dtype_name(values.dtype()));
  }
  if (key_padding_mask.defined()) {
    ATTN_CHECK(key_padding_mask.dtype() == DType::u8, op, ": expected key_padding_mask of dtype u8 (bool), got ",
               dtype_name(key_padding_mask.dtype()));
    ATTN_CHECK(key_padding_mask.shape() == Shape({b, S}), op, ": expected key_padding_mask of shape ",
               Shape({b, S}), ", got ", key_padding_mask.shape());
  }
}

Tensor weighted_sum(const Tensor& weights, const Tensor& values) {
  return matmul(weights.unsqueeze(1), values).squeeze(1);   // (B, 1, S) @ (B, S, Dv)
}

}  // namespace detail

namespace {
ScoreOptions resolved(ScoreOptions o) {
  ATTN_CHECK(o.query_dim > 0, "ScoreAttention: expected a positive query_dim, got ", o.query_dim);
  if (o.key_dim == 0) o.key_dim = o.query_dim;
  if (o.attn_dim == 0) o.attn_dim = o.key_dim;
  ATTN_CHECK(o.key_dim > 0 && o.attn_dim > 0, "ScoreAttention: expected positive key_dim and attn_dim, got ",
             o.key_dim, " and ", o.attn_dim);
  ATTN_CHECK(is_floating(o.dtype), "ScoreAttention: expected a f32 or f64 dtype, got ", dtype_name(o.dtype));
  if (o.kind == ScoreKind::dot)
    ATTN_CHECK(o.query_dim == o.key_dim, "ScoreAttention: dot scores need query_dim == key_dim, got ",
               o.query_dim, " and ", o.key_dim);
  if (o.kind == ScoreKind::location)
    ATTN_CHECK(o.max_length > 0, "ScoreAttention: location scores need a positive max_length, got ",
               o.max_length);
  return o;
}
}  // namespace

ScoreAttention::ScoreAttention(const ScoreOptions& o, Generator& g) : opt_(resolved(o)) {
  auto lin = [&](int64_t in, int64_t out) {
    return std::make_shared<Linear>(LinearOptions{in, out, opt_.bias, opt_.dtype}, g);
  };
  switch (opt_.kind) {
    case ScoreKind::dot: break;
    case ScoreKind::general: W_a = register_module("W_a", lin(opt_.key_dim, opt_.query_dim)); break;
    case ScoreKind::concat:
      W_a = register_module("W_a", lin(opt_.query_dim, opt_.attn_dim));
      U_a = register_module("U_a", lin(opt_.key_dim, opt_.attn_dim));
      v_a = register_module("v_a", lin(opt_.attn_dim, 1));
      break;
    case ScoreKind::cosine:
      if (opt_.query_dim != opt_.key_dim) W_a = register_module("W_a", lin(opt_.query_dim, opt_.key_dim));
      break;
    case ScoreKind::location: W_a = register_module("W_a", lin(opt_.query_dim, opt_.max_length)); break;
  }
}

Tensor ScoreAttention::score(const Tensor& s, const Tensor& h) const {
  const int64_t key_dim = opt_.kind == ScoreKind::location ? -1 : opt_.key_dim;
  detail::check_attention_inputs("ScoreAttention", s, h, Tensor(), Tensor(), opt_.query_dim, key_dim);
  const int64_t S = h.size(1);
  switch (opt_.kind) {
    case ScoreKind::dot: return matmul(h, s.unsqueeze(-1)).squeeze(-1);   // (B, S, D) @ (B, D, 1)
    case ScoreKind::general: {
      // sᵀ (W h + b) = (sᵀ W) h + sᵀ b: project the query once instead of every key.
      Tensor u = matmul(s, W_a->weight);                                    // (B, Dk)
      Tensor e = matmul(h, u.unsqueeze(-1)).squeeze(-1);                    // (B, S)
      if (W_a->bias.defined()) e = e + sum(s * W_a->bias, {-1}, true);
      return e;
    }
    case ScoreKind::concat: {
      Tensor t = tanh(W_a->forward(s).unsqueeze(1) + U_a->forward(h));      // (B, S, A)
      return v_a->forward(t).squeeze(-1);
    }
    case ScoreKind::cosine: return score(s, h, Tensor());
    case ScoreKind::location: {
      ATTN_CHECK(S <= opt_.max_length, "ScoreAttention: location scores cover ", opt_.max_length,
                 " positions, got a sequence of ", S);
      return W_a->forward(s).slice(1, 0, S);
    }
  }
  fail("ScoreAttention: unknown score kind");
}

Tensor ScoreAttention::score(const Tensor& s, const Tensor& h, const Tensor& beta) const {
  ATTN_CHECK(opt_.kind == ScoreKind::cosine, "ScoreAttention: a per-example beta needs cosine scores, got ",
             score_kind_name(opt_.kind));
  detail::check_attention_inputs("ScoreAttention", s, h, Tensor(), Tensor(), opt_.query_dim, opt_.key_dim);
  const Tensor k = W_a ? W_a->forward(s) : s;                              // (B, Dk)
  auto normalised = [&](const Tensor& x) {
    return x / clamp(sqrt(sum(x * x, {-1}, true)), opt_.eps, INFINITY);
  };
  Tensor cos = matmul(normalised(h), normalised(k).unsqueeze(-1)).squeeze(-1);   // (B, S)
  if (!beta.defined()) return opt_.beta == 1.0 ? cos : cos * opt_.beta;
  ATTN_CHECK(beta.shape() == Shape({s.size(0)}), "ScoreAttention: expected beta of shape ", Shape({s.size(0)}),
             ", got ", beta.shape());
  return cos * beta.unsqueeze(1);
}

AttentionResult ScoreAttention::forward(const Tensor& s, const Tensor& h, const Tensor& key_padding_mask,
                                        const Tensor& values) const {
  const int64_t key_dim = opt_.kind == ScoreKind::location ? -1 : opt_.key_dim;
  detail::check_attention_inputs("ScoreAttention", s, h, key_padding_mask, values, opt_.query_dim, key_dim);
  const Tensor a = masked_softmax(score(s, h), key_padding_mask);
  return {detail::weighted_sum(a, values.defined() ? values : h), a};
}

}  // namespace attn::nn

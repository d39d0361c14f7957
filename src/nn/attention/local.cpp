// Luong's local attention: local-m (p_t = t) and local-p (predicted p_t, Gaussian-weighted window).
#include "attn/nn/attention/local.h"

#include <cmath>
#include <vector>

#include "attn/ops/elementwise.h"

namespace attn::nn {

namespace {
LocalAttentionOptions resolved(LocalAttentionOptions o) {
  ATTN_CHECK(o.window >= 0, "LocalAttention: expected a window D >= 0, got ", o.window);
  if (o.mode == LocalMode::predictive) {
    ATTN_CHECK(o.window >= 1, "LocalAttention: local-p needs a window D >= 1 (sigma = D / 2), got ", o.window);
    if (o.predict_dim == 0) o.predict_dim = o.score.query_dim;
    ATTN_CHECK(o.predict_dim > 0, "LocalAttention: expected a positive predict_dim, got ", o.predict_dim);
  }
  return o;
}
}  // namespace

LocalAttention::LocalAttention(const LocalAttentionOptions& o, Generator& g) : opt_(resolved(o)) {
  score = register_module("score", std::make_shared<ScoreAttention>(opt_.score, g));
  if (opt_.mode == LocalMode::predictive) {
    const ScoreOptions& so = score->options();
    W_p = register_module("W_p", std::make_shared<Linear>(
                                     LinearOptions{so.query_dim, opt_.predict_dim, false, so.dtype}, g));
    v_p = register_module("v_p", std::make_shared<Linear>(LinearOptions{opt_.predict_dim, 1, false, so.dtype}, g));
  }
}

Tensor LocalAttention::predict_position(const Tensor& s, int64_t S) const {
  ATTN_CHECK(opt_.mode == LocalMode::predictive, "LocalAttention: predict_position needs local-p");
  // p_t = S sigmoid(v_pᵀ tanh(W_p s)): (B, Dq) -> (B)
  return sigmoid(v_p->forward(tanh(W_p->forward(s)))).squeeze(-1) * double(S);
}

AttentionResult LocalAttention::forward(const Tensor& s, const Tensor& h, int64_t t, const Tensor& key_padding_mask,
                                        const Tensor& values) const {
  const ScoreOptions& so = score->options();
  detail::check_attention_inputs("LocalAttention", s, h, key_padding_mask, values, so.query_dim,
                                 so.kind == ScoreKind::location ? -1 : so.key_dim);
  const int64_t B = s.size(0), S = h.size(1);
  const double D = double(opt_.window);
  // centre[b]: the aligned position p_t of example b.
  std::vector<double> centre(static_cast<size_t>(B), static_cast<double>(t));
  Tensor p;
  if (opt_.mode == LocalMode::monotonic) {
    ATTN_CHECK(t >= 0, "LocalAttention: local-m needs the aligned position t >= 0, got ", t);
  } else {
    p = predict_position(s, S);                       // (B)
    centre = p.detach().to_vector<double>();
  }
  // Masked = outside the window, or padding.
  Tensor mask = Tensor::empty({B, S}, DType::u8);
  uint8_t* pm = mask.data<uint8_t>();
  std::vector<uint8_t> pad = key_padding_mask.defined() ? key_padding_mask.to_vector<uint8_t>()
                                                        : std::vector<uint8_t>(size_t(B * S), 0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < S; ++j)
      pm[b * S + j] = (std::abs(double(j) - centre[size_t(b)]) > D || pad[size_t(b * S + j)]) ? 1 : 0;
  Tensor a = masked_softmax(score->score(s, h), mask);   // (B, S)
  if (opt_.mode == LocalMode::predictive) {
    const double sigma = D / 2.0;
    const Tensor j = Tensor::arange(S, s.dtype()).unsqueeze(0);   // (1, S)
    const Tensor d = j - p.unsqueeze(1);                            // (B, S)
    a = a * exp(d * d * (-1.0 / (2.0 * sigma * sigma)));
  }
  return {detail::weighted_sum(a, values.defined() ? values : h), a};
}

}  // namespace attn::nn

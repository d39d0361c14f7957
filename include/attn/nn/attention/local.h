// Luong et al. 2015's local attention: the query attends only within a window [p_t - D, p_t + D]
// of the source positions 0..S-1.
//
//   nn::LocalAttention lm({.mode = nn::LocalMode::monotonic, .score = {.kind = nn::ScoreKind::general,
//                                                                      .query_dim = 256}, .window = 4});
//   auto [ctx, a] = lm.forward(s, h, /*t=*/7);   // p_t = 7: weights on positions 3..11 only
//   nn::LocalAttention lp({.mode = nn::LocalMode::predictive, .score = {...}, .window = 4});
//   auto [ctx2, a2] = lp.forward(s, h);          // p_t = S sigmoid(v_pᵀ tanh(W_p s))
//
// local-m (monotonic): p_t = t, the decoder step given by the caller (same for the batch); the
//   weights are the softmax of the scores over the window (zero outside it).
// local-p (predictive): p_t = S * sigmoid(v_pᵀ tanh(W_p s)) per example (real-valued, S = h.size(1),
//   padding included); the window is the positions j with |j - p_t| <= D, and the weights are the
//   window softmax times a Gaussian centred at p_t: exp(-(j - p_t)² / (2σ²)), σ = D / 2 (not
//   renormalised, as in the paper). Gradients reach W_p and v_p through the Gaussian.
// Parameters: the score function's ("score.W_a.weight", ... see scores.h), and for local-p
// "W_p.weight" (predict_dim, query_dim) and "v_p.weight" (1, predict_dim), without biases.
// A key_padding_mask (B, S) u8 (nonzero = padding) is combined with the window; a row left with no
// position to attend gets zero weights and a zero context.
#pragma once
#include <cstdint>
#include <memory>

#include "attn/nn/attention/scores.h"

namespace attn::nn {

enum class LocalMode { monotonic, predictive };   // local-m, local-p

struct LocalAttentionOptions {
  LocalMode mode = LocalMode::predictive;
  ScoreOptions score;          // the alignment score within the window (any ScoreKind)
  int64_t window = 0;          // D (>= 0; >= 1 for local-p, where σ = D / 2)
  int64_t predict_dim = 0;     // local-p: rows of W_p (0: score.query_dim)
};

class LocalAttention : public Module {
 public:
  explicit LocalAttention(const LocalAttentionOptions& o, Generator& g = default_generator());

  // s (B, Dq), h (B, S, Dk), values (B, S, Dv) (undefined: h), key_padding_mask (B, S) u8.
  // t: the aligned position for local-m (>= 0); ignored by local-p.
  // -> {context (B, Dv), weights (B, S)}.
  AttentionResult forward(const Tensor& s, const Tensor& h, int64_t t = -1,
                          const Tensor& key_padding_mask = Tensor(), const Tensor& values = Tensor()) const;
  // local-p: the predicted positions p_t (B) for a source of length S.
  Tensor predict_position(const Tensor& s, int64_t S) const;

  const LocalAttentionOptions& options() const { return opt_; }

 private:
  LocalAttentionOptions opt_;

 public:
  std::shared_ptr<ScoreAttention> score;
  std::shared_ptr<Linear> W_p;   // local-p only
  std::shared_ptr<Linear> v_p;   // local-p only
};

}  // namespace attn::nn

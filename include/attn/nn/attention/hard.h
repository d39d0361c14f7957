// Hard attention: the context is ONE key's value, chosen from the soft attention weights.
//
//   nn::HardAttention att({.score = {.kind = nn::ScoreKind::general, .query_dim = 64}});
//   auto r = att.forward(s, h);     // s (B, 64), h (B, S, 64)
//   // r.index (B) i64, r.weights (B, S) one-hot, r.context (B, 64) = h[b, index[b]], r.probs (B, S)
//
// Choice: in eval mode the argmax of the soft weights (the first on ties); in training mode a
// sample from them (inverse CDF, one draw per example from the generator, default_generator()
// when none is given). Gradient: the straight-through estimator: the forward pass uses the one-hot
// choice, the backward pass treats it as the soft weights (d probs = d one-hot), so the score
// parameters learn through the softmax. (Xu et al. 2015 trained hard attention with REINFORCE;
// straight-through is the biased, low-variance alternative.) A row whose every key is padding
// chooses nothing: index -1, zero weights and context.
#pragma once
#include <memory>

#include "attn/core/rng.h"
#include "attn/nn/attention/scores.h"

namespace attn::nn {

// Values of `hard`, gradient passed unchanged to `soft` (same shape and dtype): the straight-
// through estimator. hard receives no gradient.
Tensor straight_through(const Tensor& hard, const Tensor& soft);

struct HardAttentionOptions {
  ScoreOptions score;
  Generator* generator = nullptr;   // training-time sampling; null: default_generator()
};

struct HardAttentionResult {
  Tensor context;   // (B, Dv)
  Tensor weights;   // (B, S) one-hot (straight-through: gradients flow to probs)
  Tensor probs;     // (B, S) the soft weights
  Tensor index;     // (B) i64, the chosen key (-1: every key padding)
};

class HardAttention : public Module {
 public:
  explicit HardAttention(const HardAttentionOptions& o, Generator& g = default_generator());
  // s (B, Dq), h (B, S, Dk), key_padding_mask (B, S) u8, values (B, S, Dv) (undefined: h).
  HardAttentionResult forward(const Tensor& s, const Tensor& h, const Tensor& key_padding_mask = Tensor(),
                              const Tensor& values = Tensor()) const;
  const HardAttentionOptions& options() const { return opt_; }

 private:
  HardAttentionOptions opt_;

 public:
  std::shared_ptr<ScoreAttention> score;   // parameters "score.W_a.weight", ...
};

}  // namespace attn::nn

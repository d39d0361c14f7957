// The classic attention family (Luong et al. 2015, Bahdanau et al. 2015, Graves et al. 2014):
// one query state s attends over a sequence of keys h and returns a context vector.
//
//   nn::ScoreAttention att({.kind = nn::ScoreKind::concat, .query_dim = 256, .key_dim = 512});
//   auto [ctx, a] = att.forward(s, h, pad);      // s (B, 256), h (B, S, 512), pad (B, S) u8
//   // ctx (B, 512) = sum_j a[:, j] h[:, j], a (B, S): rows sum to 1 over the unpadded keys
//
// Score functions (score(s, h) -> (B, S), before the softmax), and their parameters (names as in
// the papers and the PyTorch seq2seq tutorials):
//   dot       sᵀ h                                   none (query_dim == key_dim)
//   general   sᵀ W_a h          (Luong)              W_a: Linear(key_dim -> query_dim), "W_a.weight"
//   concat    v_aᵀ tanh(W_a s + U_a h)  (Bahdanau's additive; Luong's concat v_aᵀ tanh(W[s; h]))
//                                                    W_a: Linear(query_dim -> attn_dim), U_a: Linear(
//                                                    key_dim -> attn_dim), v_a: Linear(attn_dim -> 1)
//   cosine    beta * cos(k, h), k = s or W_a s (NTM content addressing, sharpening beta, default 1)
//                                                    W_a: Linear(query_dim -> key_dim), only when
//                                                    the dims differ
//   location  (W_a s)[:S]       (Luong: softmax over positions from the query alone, S <= max_length)
//                                                    W_a: Linear(query_dim -> max_length)
// `bias` adds biases to these Linear layers (the tutorials' nn.Linear; the papers' formulas have
// none, the default). Initialisation: torch.nn.Linear's default.
//
// Masks: key_padding_mask (B, S) u8, nonzero = padding (may NOT be attended); a row whose every
// key is padding gets all-zero weights and a zero context (not NaN).
#pragma once
#include <cstdint>
#include <memory>

#include "attn/core/rng.h"
#include "attn/nn/linear.h"
#include "attn/nn/module.h"

namespace attn::nn {

// What every classic attention module returns.
struct AttentionResult {
  Tensor context;   // (B, Dv)
  Tensor weights;   // (B, S)
};

// Softmax over the last dim with masked positions (mask u8, nonzero = masked, broadcastable to
// scores' shape) set to weight 0; a row with every position masked gives zeros, and a zero
// gradient. Differentiable w.r.t. scores.
//   Tensor a = nn::masked_softmax(scores, pad.unsqueeze(1));   // (B, T, S), pad (B, S)
Tensor masked_softmax(const Tensor& scores, const Tensor& mask);

enum class ScoreKind { dot, general, concat, cosine, location };
const char* score_kind_name(ScoreKind k);   // "dot", "general", ...

struct ScoreOptions {
  ScoreKind kind = ScoreKind::general;
  int64_t query_dim = 0;    // Dq
  int64_t key_dim = 0;      // Dk (0: query_dim)
  int64_t attn_dim = 0;     // concat: width of the tanh layer (0: key_dim)
  int64_t max_length = 0;   // location: the number of positions W_a scores
  bool bias = false;        // biases on W_a / U_a / v_a
  double beta = 1.0;        // cosine: sharpening
  double eps = 1e-8;        // cosine: norms are clamped to at least eps
  DType dtype = DType::f32;
};

class ScoreAttention : public Module {
 public:
  explicit ScoreAttention(const ScoreOptions& o, Generator& g = default_generator());

  // s (B, Dq), h (B, S, Dk) -> (B, S) unnormalised scores.
  Tensor score(const Tensor& s, const Tensor& h) const;
  // cosine only: a sharpening per example, beta (B) (as the NTM controller emits it).
  Tensor score(const Tensor& s, const Tensor& h, const Tensor& beta) const;
  // -> {context (B, Dv), weights (B, S)}; values (B, S, Dv) (undefined: h), key_padding_mask (B, S) u8.
  AttentionResult forward(const Tensor& s, const Tensor& h, const Tensor& key_padding_mask = Tensor(),
                          const Tensor& values = Tensor()) const;

  const ScoreOptions& options() const { return opt_; }

 private:
  ScoreOptions opt_;

 public:
  std::shared_ptr<Linear> W_a;   // general, concat, location; cosine when query_dim != key_dim
  std::shared_ptr<Linear> U_a;   // concat
  std::shared_ptr<Linear> v_a;   // concat
};

namespace detail {
// Checks s (B, Dq), h (B, S, Dk), values (B, S, Dv) and mask (B, S) u8; `op` names the module.
void check_attention_inputs(const char* op, const Tensor& s, const Tensor& h, const Tensor& key_padding_mask,
                            const Tensor& values, int64_t query_dim, int64_t key_dim);
// weights (B, S) @ values (B, S, Dv) -> (B, Dv).
Tensor weighted_sum(const Tensor& weights, const Tensor& values);
}  // namespace detail

}  // namespace attn::nn

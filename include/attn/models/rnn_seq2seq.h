// The RNN encoder-decoder with attention: Bahdanau et al. 2015 ("bahdanau") and Luong et al. 2015
// ("luong", global or local-m / local-p), behind the Seq2SeqModel contract (models/seq2seq.h).
//
//   auto m = models::make_rnn_seq2seq({{"vocab_size", 8000}, {"attention", "luong"}, {"score", "general"}});
//   Tensor logits = m->forward(src, src_pad, tgt_in);         // (B, T, V), teacher forcing
//   auto st = m->start(src, src_pad);                          // encode once
//   Tensor a;  Tensor next = m->step(*st, tokens, &a);         // (B, V) logits, a (B, S) weights
//
// Glossary: B batch, S source length, T target length, E emb_dim, H hidden, L layers, V vocab.
// Encoder: embedding -> dropout -> GRU/LSTM over the source with lengths from src_pad (padding must
//   trail each row; at least one real token per row; an undefined src_pad means no padding). Bidirectional encoders use H/2 per direction
//   (as OpenNMT's brnn), so the memory h_j is (B, S, H) either way.
// Bridge: the encoder's final state of layer l (both directions concatenated, (B, H)) -> tanh(W h)
//   is the decoder's initial state of layer l ("bridge_h"; "bridge_c" for the LSTM cell state).
// Decoder step t (previous token y, decoder state s, attentional state h~):
//   bahdanau: c_t = attn(s_{t-1}^top, h);  s_t = RNN([emb(y); c_t], s_{t-1})
//   luong:    s_t = RNN([emb(y); h~_{t-1}], s_{t-1}) (input feeding, h~_0 = 0);  c_t = attn(s_t^top, h)
//   both:     h~_t = tanh(W_c [c_t; s_t^top]) ("W_c", no bias);  logits = output_proj(dropout(h~_t))
// attn: nn::ScoreAttention (score dot | general | concat | cosine; Bahdanau's paper is concat) or, with
//   local "m" / "p", nn::LocalAttention with window D (local-m aligns p_t = t, the decoder step).
//   cosine (global attention only) is the Neural Turing Machine's content addressing (Graves et al.
//   2014): beta_t cos(s, h_j), the sharpening beta_t = 1 + softplus(w·s + b) emitted by the decoder
//   state through "attn_beta" (Linear H -> 1): cosine similarity alone lies in [-1, 1], too flat for a
//   softmax over a sentence.
//   Padded source positions get zero weight.
// Names: "src_embed", "tgt_embed" (the same module when share_embeddings), "encoder.*" (torch
//   nn.GRU/LSTM names), "bridge_h", "bridge_c", "decoder.*" (nn.GRU/LSTM, run one step at a time;
//   input E + H), "attn.*" (scores.h / local.h names), "W_c", "output_proj" (H -> V; its weight IS
//   tgt_embed.weight when tie_embeddings, which needs E == H). Embeddings init N(0, 1) (torch).
// Config JSON: {"model": "rnn-attention", "vocab_size", "emb_dim", "hidden", "layers",
//   "cell": "gru"|"lstm", "bidirectional", "attention": "bahdanau"|"luong",
//   "score": "dot"|"general"|"concat"|"cosine", "local": "none"|"m"|"p", "window", "dropout", "max_length",
//   "share_embeddings", "tie_embeddings"}; unknown keys are an error.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "attn/models/seq2seq.h"
#include "attn/nn/attention/local.h"
#include "attn/nn/attention/scores.h"
#include "attn/nn/dropout.h"
#include "attn/nn/embedding.h"
#include "attn/nn/linear.h"
#include "attn/nn/rnn.h"

namespace attn::models {

struct RnnSeq2SeqConfig {
  int64_t vocab_size = 8000;
  int64_t emb_dim = 256;      // E
  int64_t hidden = 256;       // H (decoder state, memory width)
  int64_t layers = 1;         // L, encoder and decoder
  std::string cell = "gru";   // "gru" | "lstm"
  bool bidirectional = true;  // encoder
  std::string attention = "luong";   // "bahdanau" | "luong"
  std::string score = "general";     // "dot" | "general" | "concat" | "cosine"
  std::string local = "none";        // "none" | "m" | "p"
  int64_t window = 10;               // D of local attention
  double dropout = 0.2;
  int64_t max_length = 256;
  bool share_embeddings = true;
  bool tie_embeddings = false;

  static RnnSeq2SeqConfig from_json(const nlohmann::json& j);   // defaults overridden by j; unknown key: error
  nlohmann::json to_json() const;                               // includes "model": "rnn-attention"
};

class RnnDecodeState;

class RnnSeq2Seq : public Seq2SeqModel {
 public:
  explicit RnnSeq2Seq(const RnnSeq2SeqConfig& c, Generator& g = default_generator());

  Tensor forward(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in) override;
  std::unique_ptr<DecodeState> start(const Tensor& src, const Tensor& src_pad) override;
  Tensor step(DecodeState& state, const Tensor& tokens, Tensor* attention = nullptr) override;
  int64_t vocab_size() const override { return cfg_.vocab_size; }
  int64_t max_length() const override { return cfg_.max_length; }
  nlohmann::json config() const override { return cfg_.to_json(); }

  // Every key with its default value, "model" included.
  static nlohmann::json defaults();
  const RnnSeq2SeqConfig& cfg() const { return cfg_; }

  // Teacher forcing that also returns the attention weights: -> {logits (B, T, V), weights (B, T, S)}.
  std::pair<Tensor, Tensor> forward_with_attention(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in);

 private:
  // Encodes and fills a fresh state (memory, mask, bridged initial decoder state).
  std::unique_ptr<RnnDecodeState> encode(const Tensor& src, const Tensor& src_pad) const;
  // One decoder step from the embedded previous token e (B, E): updates st, returns h~ (B, H).
  Tensor decode(RnnDecodeState& st, const Tensor& e, Tensor* weights) const;
  nn::AttentionResult attend(const Tensor& query, const RnnDecodeState& st) const;

  RnnSeq2SeqConfig cfg_;

 public:
  std::shared_ptr<nn::Embedding> src_embed, tgt_embed;
  std::shared_ptr<nn::RnnBase> encoder;
  std::shared_ptr<nn::Linear> bridge_h, bridge_c;   // bridge_c: LSTM only
  std::shared_ptr<nn::RnnBase> decoder;
  std::shared_ptr<nn::ScoreAttention> attn;          // global attention
  std::shared_ptr<nn::LocalAttention> local_attn;    // local-m / local-p (registered as "attn")
  std::shared_ptr<nn::Linear> attn_beta;              // cosine scores: the sharpening's Linear (H -> 1)
  std::shared_ptr<nn::Linear> W_c;
  std::shared_ptr<nn::Linear> output_proj;
  std::shared_ptr<nn::Dropout> drop;
};

// The decoder state of RnnSeq2Seq (start/step).
class RnnDecodeState : public DecodeState {
 public:
  void select(const Tensor& rows) override;
  int64_t batch() const override { return memory.size(0); }
  int64_t steps() const override { return t; }

  Tensor memory;    // (B, S, H) encoder outputs
  Tensor src_pad;   // (B, S) u8, nonzero = padding
  Tensor h, c;      // (L, B, H) decoder state (c: LSTM only)
  Tensor feed;      // (B, H) h~ of the previous step (luong input feeding)
  int64_t t = 0;
};

std::shared_ptr<RnnSeq2Seq> make_rnn_seq2seq(const nlohmann::json& cfg = nlohmann::json::object(),
                                             Generator& g = default_generator());

}  // namespace attn::models

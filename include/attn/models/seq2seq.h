// The contract every sequence-to-sequence model (the Transformer, the RNN encoder-decoder with
// attention) offers to training, decoding (models/decode.h), `attn translate` and `attn align`.
//
//   auto m = models::create_seq2seq("transformer", {{"vocab_size", 8000}});
//   Tensor logits = m->forward(src, src_pad, tgt_in);      // teacher forcing: (B, T, V)
//   Tensor some = m->forward_rows(src, src_pad, tgt_in, rows);   // only positions `rows` of B·T: (R, V)
//   auto st = m->start(src, src_pad);                        // encode once
//   Tensor next = m->step(*st, tokens);                      // (B) i64 -> (B, V) logits, O(t) per step
//
// Token ids: one joint vocabulary for source and target (so embeddings can be shared); the
// special ids are fixed: pad 0, unk 1, bos 2, eos 3 (text/tokenizer.h trains SentencePiece so).
// Shapes: src (B, S) i64, src_pad (B, S) u8 nonzero = padding; tgt_in (B, T) i64 = [bos, y0, y1, ...]
// (the target shifted right); padding positions of tgt_in hold pad_id and are ignored by the loss.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/core/rng.h"
#include "attn/models/registry.h"

namespace attn::models {

constexpr int64_t pad_id = 0, unk_id = 1, bos_id = 2, eos_id = 3;

// Per-batch decoder state for incremental decoding: the encoder memory and its padding mask, the
// per-layer key/value cache (Transformer) or the recurrent state (RNN). Owned by the caller.
class DecodeState {
 public:
  virtual ~DecodeState() = default;
  // Keeps rows `rows` (i64, (B')) of the batch, in that order, duplicating as asked: beam search
  // expands the batch to B·beam with it and reorders the hypotheses after each step.
  virtual void select(const Tensor& rows) = 0;
  virtual int64_t batch() const = 0;
  virtual int64_t steps() const = 0;   // tokens decoded so far
};

class Seq2SeqModel : public Model {
 public:
  // Teacher forcing: -> logits (B, T, V). Dropout as the module's training mode says.
  virtual Tensor forward(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in) = 0;
  // Teacher forcing for a loss over some target positions only: the logits (R, V) of the flattened
  // positions `rows` (i64 (R), indices into B·T, e.g. the non-padded ones), equal to
  // forward(...).reshape({-1, V}).index_select(0, rows). This default computes all of forward(); the
  // Transformer selects its decoder states before the output projection, so the vocabulary GEMM and
  // the loss skip the padding.
  virtual Tensor forward_rows(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in, const Tensor& rows);
  // Runs the encoder once; the state then feeds step(). No gradients are recorded by callers of
  // start/step (they run under NoGradGuard).
  virtual std::unique_ptr<DecodeState> start(const Tensor& src, const Tensor& src_pad) = 0;
  // Feeds the previous token of each row, tokens (B) i64 (bos first), and returns the next-token
  // logits (B, V). When `attention` is non-null it receives this step's alignment over the source,
  // (B, S) f32 (Transformer: the last decoder layer's cross-attention averaged over heads; RNN:
  // the attention weights).
  virtual Tensor step(DecodeState& state, const Tensor& tokens, Tensor* attention = nullptr) = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int64_t max_length() const = 0;   // longest source / target the model accepts
};

// A registered translation model (models/registry.h: "transformer", "rnn-attention", ...). Throws
// attn::Error naming the known translation models for another name, and the bad key for an unknown
// override.
std::shared_ptr<Seq2SeqModel> create_seq2seq(const std::string& name,
                                             const nlohmann::json& overrides = nlohmann::json::object());

}  // namespace attn::models

// Batched decoding for any Seq2SeqModel (models/seq2seq.h): greedy, beam search, and an uncached
// greedy reference that re-runs forward() on the whole prefix every step.
//
//   auto r = models::greedy_decode(*model, src, src_pad, 50);              // r.tokens[b]: ids, no bos/eos
//   auto b = models::beam_search(*model, src, src_pad, {.beam = 4, .length_penalty = 0.6, .max_len = 50});
//   auto a = models::greedy_decode(*model, src, src_pad, 50, /*with_attention=*/true);   // a.attention[b]: (len, S)
//
// All run under NoGradGuard. Rows stop at eos_id independently; finished rows (beam search: finished
// sentences) are dropped from the batch with DecodeState::select, so late steps only pay for the
// rows still running. max_len bounds the generated tokens per row, eos included (0: the model's
// max_length()).
// Beam search follows fairseq / Hugging Face: each step extends every live hypothesis by every
// token, keeps the 2·beam best (sum of log-probabilities); an eos candidate among the first `beam`
// ranks finishes a hypothesis with score  sum log p / lp(len),  lp(len) = ((5 + len) / 6)^alpha
// (GNMT; len counts eos), the others continue (up to `beam` of them). A sentence is done when it
// holds `beam` finished hypotheses and no live one can still beat the worst of them (its sum can
// only fall, so its best possible score is sum / lp(max_len) for alpha >= 0), or at max_len, when
// the live hypotheses are finished as they are. The best finished hypothesis is returned.
#pragma once
#include <cstdint>
#include <vector>

#include "attn/models/seq2seq.h"

namespace attn::models {

struct DecodeResult {
  std::vector<std::vector<int64_t>> tokens;   // per row, without bos and eos
  std::vector<double> scores;                 // greedy: sum of log-probabilities (eos included);
                                              // beam: the length-normalised score
  std::vector<Tensor> attention;              // per row (len, S) f32 when asked (one row per
                                              // generated token, eos included), else empty
};

// src (B, S) i64, src_pad (B, S) u8 (nonzero = padding) or undefined.
DecodeResult greedy_decode(Seq2SeqModel& model, const Tensor& src, const Tensor& src_pad, int64_t max_len = 0,
                           bool with_attention = false);

struct BeamSearchOptions {
  int64_t beam = 4;
  double length_penalty = 0.6;   // alpha of lp(len) = ((5 + len) / 6)^alpha; 0: plain sum of log-probs
  int64_t max_len = 0;           // 0: model.max_length()
  bool with_attention = false;
};
DecodeResult beam_search(Seq2SeqModel& model, const Tensor& src, const Tensor& src_pad,
                         const BeamSearchOptions& opts = {});

// The reference: greedy decoding without start()/step(), calling model.forward(src, src_pad, prefix)
// on the whole prefix each step (O(t²) per step for a Transformer). Same tokens as greedy_decode.
DecodeResult greedy_decode_uncached(Seq2SeqModel& model, const Tensor& src, const Tensor& src_pad,
                                    int64_t max_len = 0);

}  // namespace attn::models

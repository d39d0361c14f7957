// Filling in [MASK] tokens with a masked-language BERT, as Hugging Face's fill-mask pipeline does.
//
//   infer::BertPipeline p = infer::load_bert_pipeline(source);            // attn/infer/bert_pipeline.h
//   infer::FillMaskResult r = infer::fill_mask(p, "The [MASK] of the world.", {.top_k = 5});
//   for (const infer::FillMaskCandidate& c : r.masks[0])
//     std::printf("%.4f %s  %s\n", c.score, c.token_str.c_str(), c.sequence.c_str());
//
// For each [MASK] of the text (in order), the top_k tokens of the softmax of the MLM logits at its
// position (over the whole vocabulary, f64 from the f32 logits), most probable first. As the pipeline:
// token_str is decode([token]); sequence is the text's ids (its padding left out) with that one mask
// replaced, decoded with the special tokens skipped when the text has one mask, kept when it has
// several (so the other [MASK]s show). The text is encoded alone (one sequence, no padding), truncated to
// the pipeline's max_length with a warning on stderr (FillMaskOptions::truncation false: an error).
// Errors (attn::Error): a model without an MLM head (BertForPreTraining / BertForMaskedLM have one), a
// text with no [MASK] (or none left after truncation), the tokenizer's (invalid UTF-8, ...).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attn/infer/bert_pipeline.h"

namespace attn::infer {

struct FillMaskOptions {
  int64_t top_k = 5;         // > the vocabulary: all of it
  bool truncation = true;    // false: a text over max_length is an error
};

struct FillMaskCandidate {
  double score = 0;          // softmax probability
  int64_t token = 0;         // the id
  std::string token_str;     // decode([token])
  std::string sequence;      // the text with this token in the mask's place (see above)
};

struct FillMaskResult {
  std::vector<int64_t> ids;                              // the encoded text ([CLS] ... [SEP])
  std::vector<int64_t> positions;                        // where the [MASK]s are in ids
  std::vector<std::vector<FillMaskCandidate>> masks;     // per [MASK], most probable first
  int64_t truncated = 0;                                 // tokens truncation cut
};

FillMaskResult fill_mask(const BertPipeline& p, std::string_view text, const FillMaskOptions& o = {});

}  // namespace attn::infer

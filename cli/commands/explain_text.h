// attn explain --text: one layer's attention (one head, or the heads fused) of a BERT over the tokens of
// a text, drawn as a heat map with the tokens on both axes (queries down the left, keys along the top;
// attn/viz/heatmap.h). Called by explain.cpp when --text is given.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "attn/infer/bert_pipeline.h"

namespace attn::cli {

struct TextExplainOptions {
  std::string text, out = "attention.png", fusion = "mean";
  int64_t layer = -1;                // negative: from the last (-1 the last layer)
  std::optional<int64_t> head;       // none: the heads fused by `fusion` (mean | max | min)
  int64_t cell = 28;                 // pixels per token cell
  bool json = false, truncation = true;
};

void explain_text(const infer::BertSource& source, const TextExplainOptions& o);

}  // namespace attn::cli

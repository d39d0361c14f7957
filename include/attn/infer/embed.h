// Sentence embeddings from a BERT: one vector per text, as sentence-transformers and Hugging Face's
// feature-extraction pipeline compute them.
//
//   infer::BertPipeline p = infer::load_bert_pipeline(source);            // attn/infer/bert_pipeline.h
//   Tensor v = infer::embed(p, {"A man is eating food.", "A man rides a horse."},
//                           {.pooling = infer::Pooling::mean});   // (2, H) f32
//
// Pooling of the base model's outputs (the MLM / classifier heads are not run):
//   mean    last_hidden_state averaged over the tokens the attention mask keeps ([CLS] and [SEP] too,
//           padding not: sentence-transformers' mean pooling)
//   cls     last_hidden_state of [CLS] (the first token)
//   pooler  pooler_output, tanh(dense(CLS)) (models with a pooler: BertModel, BertForPreTraining,
//           BertForSequenceClassification; others: an attn::Error)
// Texts are encoded alone, truncated to the pipeline's max_length (a warning on stderr; truncation
// false: an error), sorted by length and run batch_size at a time, each batch padded to its longest
// (padded keys are masked out of attention, so a text's vector does not depend on its batch: equal
// up to float rounding across batch sizes). Rows come back in the order of `texts`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "attn/core/tensor.h"
#include "attn/infer/bert_pipeline.h"

namespace attn::infer {

enum class Pooling { mean, cls, pooler };
Pooling parse_pooling(const std::string& s);   // "mean" | "cls" | "pooler"; others: an error listing them
const char* pooling_name(Pooling p);

struct EmbedOptions {
  Pooling pooling = Pooling::mean;
  int64_t batch_size = 32;
  bool truncation = true;
  size_t first_number = 1;   // the number of texts[0] in error messages ("embed: text 3: ...")
};

// texts (N) -> (N, H) f32.
Tensor embed(const BertPipeline& p, const std::vector<std::string>& texts, const EmbedOptions& o = {});

}  // namespace attn::infer

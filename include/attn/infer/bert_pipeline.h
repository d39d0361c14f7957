// A BERT with its WordPiece tokenizer, ready for the text commands (fill-mask, embed, explain --text):
// the model from an attn checkpoint or from transformers' weights (models::load_pretrained), the
// vocabulary found where Hugging Face's model directories keep it.
//
//   infer::BertSource s;  s.checkpoint = "bert/checkpoint.safetensors";   // attn convert's output
//   // or: s.weights = "bert-base-uncased/model.safetensors";  (config.json beside it; s.model the base config)
//   infer::BertPipeline p = infer::load_bert_pipeline(s);
//   text::BertEncoding e = p.tokenizer.encode("The [MASK] of the world.");
//   models::BertOutput o = p.model->forward({.input_ids = text::to_inputs({e}).input_ids});
//
// The vocabulary, the first of:
//   1. s.vocab (a vocab.txt), with the tokenizer_config.json beside it when there is one;
//   2. vocab.txt beside the weights or the checkpoint (and tokenizer_config.json there), as a Hugging
//      Face model directory has them (attn convert copies them beside the checkpoint it writes);
//   3. for a model whose registry entry has the uncased vocabulary (bert-base-uncased, bert-mini, ...),
//      bert-base-uncased's vocab.txt that scripts/fetch_bert_vocab.sh writes (env::bert_vocab_cache():
//      ATTN_BERT_VOCAB, else ~/.cache/attn/bert-base-uncased/vocab.txt).
// None found is an attn::Error listing where it looked; so is a vocabulary whose size is not the
// model's vocab_size (naming both).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "attn/models/bert.h"
#include "attn/text/bert_tokenizer.h"

namespace attn::infer {

struct BertSource {
  std::string checkpoint;                                   // an attn checkpoint (attn convert's), or
  std::string weights;                                      // transformers' weights (model.safetensors)
  std::string model = "bert-base-uncased";                  // weights: the registry model of the base config
  std::string config;                                       // weights: config.json ("": the one beside them)
  nlohmann::json model_config = nlohmann::json::object();   // weights: overrides on the config
  std::string vocab;                                        // vocab.txt ("": found as above)
  DType linear_dtype = DType::f32;                          // bf16 or i8 (int8): the Linear weights' dtype
};

struct BertPipeline {
  std::shared_ptr<models::BertPreTrainedModel> model;   // eval mode
  text::BertTokenizer tokenizer;
  std::string model_name;        // registry name ("bert-base-uncased")
  std::string vocab_path;        // the vocab.txt read
  std::string tokenizer_config;  // the tokenizer_config.json read ("": none, the defaults)
  // The most tokens a sequence may have: min(the tokenizer's model_max_length, max_position_embeddings).
  int64_t max_length = 512;
};

BertPipeline load_bert_pipeline(const BertSource& source);

}  // namespace attn::infer

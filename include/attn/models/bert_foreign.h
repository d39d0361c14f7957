// Hugging Face transformers' BERT checkpoints (model.safetensors, or pytorch_model.bin converted by
// tools/pth_to_safetensors.py) with their config.json -> an attn BERT (attn/models/bert.h).
//
//   models::ForeignBertOptions o;  o.model = "bert-base-uncased";  o.hf_config = json::parse(config_text);
//   models::ForeignBert r = models::load_foreign_bert(io::SafetensorsReader("model.safetensors"), o);
//   r.model->forward({.input_ids = ids}).prediction_logits;
//
// Keys: with or without the "bert." prefix (and "module."); LayerNorm.gamma / .beta as .weight / .bias;
// attention.self.{query,key,value} packed into attention.self.qkv ([q; k; v] rows);
// cls.predictions.decoder.weight, when present, must have the word embeddings' shape and is not read
// (tied: the decoder uses the word embeddings, as transformers' tie_weights); cls.predictions.decoder.bias
// is the alias of cls.predictions.bias; embeddings.position_ids / token_type_ids (buffers) are ignored.
// The keys of heads the model does not have (cls.*, classifier.*, the pooler of a model without one) are
// skipped, as transformers does when a checkpoint's class differs; every key the model has must be there
// with its shape. The model's config: the registry entry's, then config.json (sizes, layer_norm_eps,
// dropouts, id2label / num_labels, and the architecture from "architectures" when it is a BERT class),
// then the overrides. Before any tensor is read, the sizes the weights imply (vocab, hidden, positions,
// token types, layers, intermediate, labels) are compared with that config, and every key and shape
// with the model: an attn::Error names the file, what was expected and what was found (a config.json
// that disagrees with the weights, another model size, another model family, a missing or mis-shaped
// key, by transformers' name). Tensors are then streamed into the model one layer at a time.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/io/safetensors.h"
#include "attn/models/bert.h"

namespace attn::models {

// A transformers BertConfig (config.json) over `base`: vocab_size, hidden_size, num_hidden_layers,
// num_attention_heads, intermediate_size, max_position_embeddings, type_vocab_size, layer_norm_eps,
// hidden_dropout_prob, attention_probs_dropout_prob, classifier_dropout, pad_token_id, num_labels / id2label, and
// architectures[0] when it names a BERT class. model_type must be "bert", hidden_act "gelu" and
// position_embedding_type "absolute" when given; other keys of transformers' configs are allowed.
BertConfig bert_config_from_hf(const nlohmann::json& cfg, BertConfig base);

struct ForeignBertOptions {
  std::string model = "bert-base-uncased";                // registry name: the base config
  nlohmann::json overrides = nlohmann::json::object();    // over the config (e.g. {"architecture": "BertModel"})
  nlohmann::json hf_config;                               // config.json (null: none)
  bool strict = true;                                     // false: keys the model has and the file lacks keep their init
};

struct ForeignBert {
  std::shared_ptr<BertPreTrainedModel> model;
  std::vector<std::string> skipped;   // the file's keys of heads the model does not have
};

ForeignBert load_foreign_bert(const io::SafetensorsReader& file, const ForeignBertOptions& o);

// Whether the file's keys (header only, aliases too) look like a BERT checkpoint
// ([bert.]embeddings.word_embeddings.weight together with [bert.]encoder.layer.* keys).
bool looks_like_bert(const io::SafetensorsReader& file);

}  // namespace attn::models

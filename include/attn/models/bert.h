// BERT (Devlin et al. 2019) as Hugging Face transformers builds it (BertModel and the BertFor* heads),
// with transformers' parameter names, so its checkpoints map 1:1 but for the packed attention projection.
//
//   auto m = models::create_bert("bert-mini");                          // BertForPreTraining by default
//   models::BertInputs in{.input_ids = ids, .token_type_ids = types, .attention_mask = mask};   // (B, T) i64
//   models::BertOutput o = m->forward(in);        // o.prediction_logits (B, T, V), o.seq_relationship_logits (B, 2)
//   o = m->forward(in, {.attentions = true, .hidden_states = true});   // + o.attentions, o.hidden_states
//   auto cls = models::create_bert("bert-base-uncased",
//                                  {{"architecture", "BertForSequenceClassification"}, {"num_labels", 3}});
//   Tensor logits = cls->forward(in).logits;      // (B, 3)
//
// Glossary: B batch, T tokens, H hidden_size, NH heads, V vocab_size, L layers, I intermediate_size.
// Forward (post-norm, as the paper and transformers):
//   embeddings  x = LayerNorm((word[ids] + token_type[types]) + position[0..T)) -> dropout
//   layer       a = LayerNorm(x + dropout(dense(attention(qkv(x), mask))))      (attention.output)
//               x = LayerNorm(a + dropout(dense2(gelu(dense1(a)))))             (intermediate, output)
//   pooler      tanh(dense(x[:, 0]))
// GELU is the exact (erf) one. attention_mask (B, T): 1 = a token, 0 = padding; padded KEYS are left
// out of every softmax (transformers adds a large negative number, which gives the same softmax: its
// exp underflows to 0); padded queries still get outputs. A sample whose mask is all zeros gives zero
// attention output (transformers: uniform attention over the padding). The fused attention kernel
// takes the padding as a (B, 1, 1, T) mask, never a (B, NH, T, T) one. Asking for the attention
// weights takes the materialising attention path.
// Packed inference: in eval mode without gradients (grad mode off, or no parameter requiring one), a
// batch with padding runs on its valid tokens only: the embeddings, every Linear, GELU, LayerNorm and
// residual on the (N, H) concatenation of the tokens whose attention_mask is nonzero (N = their
// count), the attention per sample over its own tokens (scaled_dot_product_attention_varlen, no
// mask), the outputs scattered back to (B, T, ...). A token keeps its position t (the mask may have
// holes or pad on the left), so every output at a valid position equals the padded path's (up to the
// GEMMs' rounding). At padded positions last_hidden_state, prediction_logits and the token
// classifier's logits are 0 (transformers computes rows there from the padded queries; they mean
// nothing); the pooler reads position 0, so a sample whose first token is padding pools a zero row.
// Asking for attentions or hidden_states, or BertOutputOptions::pack_tokens = false, runs the padded
// path (values at every position as transformers); so do training and batches without padding.
// Heads (transformers' classes; "architecture" in the config):
//   BertModel                       embeddings, encoder, pooler (the base model; names without "bert.")
//   BertForPreTraining              bert + cls.predictions (MLM) + cls.seq_relationship (NSP, Linear(H, 2))
//   BertForMaskedLM                 bert without pooler + cls.predictions
//   BertForSequenceClassification   bert + dropout + classifier Linear(H, num_labels) on the pooler
//   BertForTokenClassification      bert without pooler + dropout + classifier on every token
// MLM head: dense -> gelu -> LayerNorm -> decoder, whose weight IS embeddings.word_embeddings.weight
// (tied: one parameter, listed once) plus its own bias "cls.predictions.bias".
// bf16 inference (nn::convert_linear_weights_to_bf16, or load_pretrained with linear_dtype bf16): every
// Linear weight becomes bf16, the decoder's a bf16 copy of the word embeddings (tying matters for
// training, which bf16 weights rule out anyway); the embeddings stay f32 and untouched.
// Names: [bert.]embeddings.{word_embeddings, position_embeddings, token_type_embeddings, LayerNorm},
//   [bert.]encoder.layer.N.{attention.self.qkv, attention.output.dense, attention.output.LayerNorm,
//   intermediate.dense, output.dense, output.LayerNorm}, [bert.]pooler.dense,
//   cls.predictions.{transform.dense, transform.LayerNorm, bias, decoder.weight (tied)},
//   cls.seq_relationship, classifier. attention.self.qkv packs transformers' query / key / value rows
//   ([q; k; v], (3H, H)), so one GEMM projects all three.
// Init as transformers: Linear and Embedding weights N(0, 0.02), biases 0, LayerNorm 1 / 0.
// Config JSON (transformers' config.json names): {"model", "architecture", "vocab_size", "hidden_size",
// "num_hidden_layers", "num_attention_heads", "intermediate_size", "max_position_embeddings",
// "type_vocab_size", "layer_norm_eps", "hidden_dropout_prob", "attention_probs_dropout_prob",
// "classifier_dropout" (null: hidden_dropout_prob), "num_labels", "id2label" ({"0": "NEG", ...} or {}),
// "pad_token_id"}. As transformers' nn.Embedding(padding_idx = pad_token_id), the lookup of the padding
// id adds nothing to the word embeddings' gradient (the MLM decoder, which shares them, still does).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/models/registry.h"
#include "attn/nn/dropout.h"
#include "attn/nn/embedding.h"
#include "attn/nn/layer_norm.h"
#include "attn/nn/linear.h"
#include "attn/nn/sequential.h"

namespace attn::models {

enum class BertArchitecture { base, pretraining, masked_lm, sequence_classification, token_classification };
// transformers' class names: "BertModel", "BertForPreTraining", ... (parse: an error lists them).
const char* bert_architecture_name(BertArchitecture a);
BertArchitecture parse_bert_architecture(const std::string& s);

struct BertConfig {
  BertArchitecture architecture = BertArchitecture::pretraining;
  int64_t vocab_size = 30522, hidden_size = 768, num_hidden_layers = 12, num_attention_heads = 12;
  int64_t intermediate_size = 3072, max_position_embeddings = 512, type_vocab_size = 2;
  double layer_norm_eps = 1e-12, hidden_dropout_prob = 0.1, attention_probs_dropout_prob = 0.1;
  std::optional<double> classifier_dropout;   // unset: hidden_dropout_prob
  int64_t num_labels = 2;
  std::map<int64_t, std::string> id2label;    // empty, or a name for each of the num_labels classes
  int64_t pad_token_id = 0;                   // its word-embedding row gets no gradient from the lookup (torch's padding_idx)
};

// Every key required but "classifier_dropout" and "id2label", each checked (attn/core/json_config.h);
// "model" is allowed.
BertConfig bert_config_from_json(const nlohmann::json& j);
nlohmann::json bert_config_to_json(const BertConfig& c);

// Token ids (B, T) i64 (or i32); token_type_ids and attention_mask like them, or undefined: all type 0,
// no padding. attention_mask may also be u8, f32 or f64 (nonzero = a token).
struct BertInputs {
  Tensor input_ids;
  Tensor token_type_ids;
  Tensor attention_mask;
};

struct BertOutputOptions {
  bool attentions = false;      // every layer's attention weights (B, NH, T, T)
  bool hidden_states = false;   // the embeddings' output and every layer's, (B, T, H) each
  bool pack_tokens = true;      // eval / no-grad batches with padding: run the valid tokens only (above)
  // i64 (M) flat positions b * T + t: the MLM head runs at these rows only and prediction_logits is
  // (M, V) (pre-training's masked positions, as Google's gather_indexes; the other rows' logits are
  // never made). Undefined: every position, (B, T, V).
  Tensor mlm_rows;
};

// Where a packed forward's rows sit in the (B, T) batch (BertModel::forward with `packed`).
struct BertPackedTokens {
  Tensor hidden;                     // (N, H): last_hidden_state at the valid tokens; undefined: not packed
  std::vector<int64_t> index;        // (N): b * T + t of each row, in order
  std::vector<int64_t> cu_seqlens;   // (B + 1): sample b's rows are [cu_seqlens[b], cu_seqlens[b + 1])
};

// What a forward gives; the heads' fields stay undefined where the model has no such head.
struct BertOutput {
  Tensor last_hidden_state;              // (B, T, H)
  Tensor pooler_output;                  // (B, H); models without pooler: undefined
  Tensor prediction_logits;              // MLM (B, T, V)
  Tensor seq_relationship_logits;        // NSP (B, 2)
  Tensor logits;                         // sequence classification (B, num_labels); token (B, T, num_labels)
  std::vector<Tensor> hidden_states;     // L + 1 when asked
  std::vector<Tensor> attentions;        // L when asked
};

class BertModel;

// Every BERT model (the base model and each head model): one forward, the base model inside.
class BertPreTrainedModel : public Model {
 public:
  virtual BertOutput forward(const BertInputs& in, const BertOutputOptions& o = {}) = 0;
  virtual BertModel& bert() = 0;
  const BertConfig& cfg() const { return cfg_; }
  // The number of parameters of the base model alone (embeddings, encoder, pooler: transformers' BertModel).
  int64_t num_base_parameters();
  // Multiply-accumulates of a forward pass over one sequence of `tokens` tokens (no padding): every
  // Linear (the MLM decoder included) and the attention's Q·Kᵀ and P·V; FLOPs = 2 x MACs.
  int64_t macs_per_sequence(int64_t tokens) const;
  nlohmann::json config() const override;

 protected:
  BertPreTrainedModel(const BertConfig& c, std::string name) : cfg_(c), model_name_(std::move(name)) {}
  BertConfig cfg_;
  std::string model_name_;
};

struct BertEmbeddings : nn::Module {
  explicit BertEmbeddings(const BertConfig& c);
  int64_t pad_token_id = 0;
  // ids, types (B, T) -> (B, T, H); types undefined: type 0.
  Tensor forward(const Tensor& ids, const Tensor& types) const;
  // Packed tokens: ids, types, positions (N) -> (N, H); types undefined: type 0.
  Tensor forward_packed(const Tensor& ids, const Tensor& types, const Tensor& positions) const;
  std::shared_ptr<nn::Embedding> word_embeddings, position_embeddings, token_type_embeddings;
  std::shared_ptr<nn::LayerNorm> LayerNorm;
  std::shared_ptr<nn::Dropout> dropout;
};

// A Linear followed by a LayerNorm: attention.output, output, cls.predictions.transform.
struct BertDenseNorm : nn::Module {
  BertDenseNorm(int64_t in, int64_t out, double eps);
  std::shared_ptr<nn::Linear> dense;
  std::shared_ptr<nn::LayerNorm> LayerNorm;
};

struct BertLayer : nn::Module {
  explicit BertLayer(const BertConfig& c);
  // x (B, T, H); pad u8 (B, 1, 1, T) nonzero = padding, or undefined -> (B, T, H); weights (B, NH, T, T)
  // when not null.
  Tensor forward(const Tensor& x, const Tensor& pad, Tensor* weights = nullptr) const;
  // Inference on packed sequences: x (N, H), sample s being rows [cu_seqlens[s], cu_seqlens[s + 1]) -> (N, H).
  Tensor forward_packed(const Tensor& x, const std::vector<int64_t>& cu_seqlens) const;
  std::shared_ptr<nn::Linear> qkv;                   // attention.self.qkv
  std::shared_ptr<BertDenseNorm> attention_output;   // attention.output
  std::shared_ptr<nn::Linear> intermediate;          // intermediate.dense
  std::shared_ptr<BertDenseNorm> output;             // output
  std::shared_ptr<nn::Dropout> dropout;              // hidden_dropout_prob (not a named module in transformers)

 private:
  // The layer after the attention: ctx, x (..., H) -> (..., H).
  Tensor feed_forward(const Tensor& ctx, const Tensor& x) const;
  int64_t heads_;
  double attn_drop_;
};

class BertModel : public BertPreTrainedModel {
 public:
  // `name`: the registry name config() reports.
  BertModel(const BertConfig& c, std::string name = "bert", bool add_pooling_layer = true);
  BertOutput forward(const BertInputs& in, const BertOutputOptions& o = {}) override;
  // The same; when the packed path ran, `packed` (not null) gets its rows (for heads that run on them).
  BertOutput forward(const BertInputs& in, const BertOutputOptions& o, BertPackedTokens* packed);
  BertModel& bert() override { return *this; }
  bool has_pooler() const { return pooler_ != nullptr; }
  const BertEmbeddings& embeddings() const { return *embeddings_; }

 private:
  std::shared_ptr<BertEmbeddings> embeddings_;
  std::shared_ptr<nn::ModuleList<BertLayer>> layers_;   // encoder.layer
  std::shared_ptr<nn::Linear> pooler_;                  // pooler.dense
};

// BertForPreTraining, BertForMaskedLM, BertForSequenceClassification, BertForTokenClassification:
// one class, its heads by cfg().architecture (see the names above).
class BertWithHeads : public BertPreTrainedModel {
 public:
  BertWithHeads(const BertConfig& c, std::string name = "bert");
  BertOutput forward(const BertInputs& in, const BertOutputOptions& o = {}) override;
  BertModel& bert() override { return *bert_; }

 private:
  std::shared_ptr<BertModel> bert_;
  std::shared_ptr<BertDenseNorm> transform_;    // cls.predictions.transform
  Tensor* mlm_bias_ = nullptr;                  // cls.predictions.bias
  std::shared_ptr<nn::Linear> decoder_;         // cls.predictions.decoder, weight tied
  std::shared_ptr<nn::Linear> seq_relationship_;
  std::shared_ptr<nn::Dropout> classifier_drop_;
  std::shared_ptr<nn::Linear> classifier_;
};

// The model of cfg.architecture (BertModel or BertWithHeads).
std::shared_ptr<BertPreTrainedModel> make_bert(const BertConfig& c, const std::string& name = "bert");
// A registry BERT as BertPreTrainedModel (an error names the model's kind when it is not a BERT).
std::shared_ptr<BertPreTrainedModel> create_bert(const std::string& name,
                                                 const nlohmann::json& overrides = nlohmann::json::object());

}  // namespace attn::models

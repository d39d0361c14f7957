// The Transformer encoder-decoder of "Attention Is All You Need" (Vaswani et al. 2017), as
// torch.nn.Transformer (1.13): same layers, parameter names and masks; and TransformerSeq2Seq, the
// translation model around it (embeddings, sinusoidal positions, output projection, KV-cache decoding).
//
//   models::Transformer tf({.d_model = 512, .nhead = 8, .batch_first = true});
//   Tensor mask = models::Transformer::generate_square_subsequent_mask(T);     // (T, T) u8
//   Tensor y = tf.forward(src, tgt, Tensor(), mask, Tensor(), src_pad, tgt_pad, src_pad);   // (B, T, E)
//
//   auto m = models::make_transformer_seq2seq({{"vocab_size", 8000}});        // the paper's base
//   Tensor logits = m->forward(src_ids, src_pad, tgt_in);                     // (B, T, V)
//   auto st = m->start(src_ids, src_pad);  Tensor next = m->step(*st, bos);   // (B, V), O(t) per step
//
// Glossary: B batch, S source length, T target length, E d_model, NH heads, HS = E / NH, V vocab.
// Layers (torch 1.13's TransformerEncoderLayer / TransformerDecoderLayer):
//   post-norm  x = norm1(x + sa(x));  [x = norm2(x + mha(x, mem));]  x = normL(x + ff(x))
//   pre-norm   x = x + sa(norm1(x));  [x = x + mha(norm2(x), mem);]  x = x + ff(normL(x))
//   ff(x) = linear2(dropout(act(linear1(x)))); every block's output goes through dropout1/2/3.
// torch.nn.Transformer appends a final LayerNorm to both stacks in BOTH modes ("encoder.norm",
// "decoder.norm"), and so does this class.
// Names: encoder.layers.N.{self_attn.in_proj_weight, self_attn.in_proj_bias, self_attn.out_proj,
//   linear1, linear2, norm1, norm2}, encoder.norm, decoder.layers.N.{self_attn, multihead_attn,
//   linear1, linear2, norm1, norm2, norm3}, decoder.norm. Init as torch: xavier_uniform on every
//   parameter with more than one dim.
// Masks follow torch.nn.MultiheadAttention: u8 nonzero = may NOT attend, or additive float.
//   *_key_padding_mask (B, S) / (B, T); src_mask (S, S), tgt_mask (T, T), memory_mask (T, S) (or
//   (B·NH, ., .)). Departure: a query whose keys are all masked gives zeros, not NaN.
// With batch_first = false the tensors are (S, B, E) as torch's default; batch-first inside.
//
// TransformerSeq2Seq: x = dropout(embed(tokens) · sqrt(E) + PE[pos]) with the paper's sinusoids
// (sin on even, cos on odd dims), the Transformer, then "output_proj" (E -> V, no bias). Names:
// "src_embed", "tgt_embed" (the same module when share_embeddings), "transformer.*", "output_proj"
// (its weight IS tgt_embed.weight when tie_output). Embeddings (and an untied output projection) are
// initialised N(0, E^-1/2), as fairseq, so the scaled embedding has unit variance.
// Config JSON: {"model": "transformer", "vocab_size", "d_model", "nhead", "encoder_layers",
// "decoder_layers" (or "layers" for both), "d_ff", "dropout", "activation": "relu"|"gelu"|"gelu_tanh",
// "norm_first", "norm": "layer"|"batch", "layer_norm_eps", "share_embeddings", "tie_output", "max_length" (256)};
// TransformerSeq2Seq::defaults() is the paper's base (6 + 6 layers, 512, 8 heads, 2048, dropout 0.1), vocab_size 8000.
// Decoding: start() encodes once and projects each decoder layer's cross-attention K/V of the
// memory; step() appends the new token's self-attention K/V to a per-layer cache (capacity doubles
// when full, so no per-step concatenation) and attends over it: step t costs O(t).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/models/seq2seq.h"
#include "attn/nn/attention/multi_head.h"
#include "attn/nn/conv.h"
#include "attn/nn/dropout.h"
#include "attn/nn/embedding.h"
#include "attn/nn/layer_norm.h"
#include "attn/nn/linear.h"
#include "attn/nn/mlp.h"

namespace attn::models {

// nn::Activation (nn/mlp.h): relu and gelu are torch.nn.Transformer's two; gelu_tanh is an extension.
using Activation = nn::Activation;

struct TransformerLayerOptions {
  int64_t d_model = 512;              // E
  int64_t nhead = 8;                  // NH
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  Activation activation = Activation::relu;
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;
  // BatchNorm (nn::BatchNorm2d over the B·L tokens of each channel, padding included, eps layer_norm_eps) in
  // place of every LayerNorm, under the same names: the norm ablation (Shen et al. 2020), not torch's.
  bool batch_norm = false;
  DType dtype = DType::f32;
};

class TransformerEncoderLayer : public nn::Module {
 public:
  explicit TransformerEncoderLayer(const TransformerLayerOptions& o, Generator& g = default_generator());
  // src (B, S, E) (batch_first) or (S, B, E) -> same shape.
  Tensor forward(const Tensor& src, const Tensor& src_mask = Tensor(),
                 const Tensor& src_key_padding_mask = Tensor()) const;
  const TransformerLayerOptions& options() const { return opt_; }
  // Batch-first body, masks already checked by MultiheadAttention.
  Tensor forward_bf(const Tensor& x, const Tensor& src_mask, const Tensor& src_key_padding_mask) const;

 private:
  TransformerLayerOptions opt_;

 public:
  std::shared_ptr<nn::MultiheadAttention> self_attn;
  std::shared_ptr<nn::Linear> linear1;
  std::shared_ptr<nn::Dropout> dropout;
  std::shared_ptr<nn::Linear> linear2;
  std::shared_ptr<nn::LayerNorm> norm1, norm2;   // null with batch_norm: then bn1, bn2 ("norm1", "norm2")
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  std::shared_ptr<nn::Dropout> dropout1, dropout2;
};

class TransformerDecoderLayer : public nn::Module {
 public:
  explicit TransformerDecoderLayer(const TransformerLayerOptions& o, Generator& g = default_generator());
  // tgt (B, T, E), memory (B, S, E) (batch_first; else seq-first) -> tgt's shape.
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = Tensor(),
                 const Tensor& memory_mask = Tensor(), const Tensor& tgt_key_padding_mask = Tensor(),
                 const Tensor& memory_key_padding_mask = Tensor()) const;
  const TransformerLayerOptions& options() const { return opt_; }
  Tensor forward_bf(const Tensor& x, const Tensor& mem, const Tensor& tgt_mask, const Tensor& memory_mask,
                    const Tensor& tgt_key_padding_mask, const Tensor& memory_key_padding_mask) const;

  // ---- incremental decoding (inference, batch-first). cache_k/cache_v (B, NH, cap, HS) hold
  // the first `t` positions' self-attention keys/values; step_cached writes position t and
  // attends over 0..t. cross_k/cross_v (B, NH, S, HS) come from project_memory(memory).
  std::pair<Tensor, Tensor> project_memory(const Tensor& memory) const;
  // x (B, 1, E); mem_mask u8 (B, 1, 1, S) or undefined; weights (B, S) averaged over heads when
  // non-null. -> (B, 1, E)
  Tensor step_cached(const Tensor& x, Tensor& cache_k, Tensor& cache_v, int64_t t, const Tensor& cross_k,
                     const Tensor& cross_v, const Tensor& mem_mask, Tensor* weights) const;

 private:
  Tensor ff(const Tensor& x) const;
  TransformerLayerOptions opt_;

 public:
  std::shared_ptr<nn::MultiheadAttention> self_attn, multihead_attn;
  std::shared_ptr<nn::Linear> linear1;
  std::shared_ptr<nn::Dropout> dropout;
  std::shared_ptr<nn::Linear> linear2;
  std::shared_ptr<nn::LayerNorm> norm1, norm2, norm3;   // null with batch_norm: then bn1..3 ("norm1".."norm3")
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2, bn3;
  std::shared_ptr<nn::Dropout> dropout1, dropout2, dropout3;
};

class TransformerEncoder : public nn::Module {
 public:
  // final_norm: append the LayerNorm "norm" after the layers (torch.nn.Transformer always does).
  TransformerEncoder(const TransformerLayerOptions& o, int64_t num_layers, bool final_norm,
                     Generator& g = default_generator());
  Tensor forward(const Tensor& src, const Tensor& mask = Tensor(), const Tensor& src_key_padding_mask = Tensor()) const;
  Tensor forward_bf(const Tensor& x, const Tensor& mask, const Tensor& src_key_padding_mask) const;
  std::vector<std::shared_ptr<TransformerEncoderLayer>> layers;
  std::shared_ptr<nn::LayerNorm> norm;   // null without final_norm (or with batch_norm: then bn, "norm")
  std::shared_ptr<nn::BatchNorm2d> bn;
  Tensor final_norm(const Tensor& x) const;   // norm, bn or x itself

 private:
  bool batch_first_;
};

class TransformerDecoder : public nn::Module {
 public:
  TransformerDecoder(const TransformerLayerOptions& o, int64_t num_layers, bool final_norm,
                     Generator& g = default_generator());
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = Tensor(),
                 const Tensor& memory_mask = Tensor(), const Tensor& tgt_key_padding_mask = Tensor(),
                 const Tensor& memory_key_padding_mask = Tensor()) const;
  Tensor forward_bf(const Tensor& x, const Tensor& mem, const Tensor& tgt_mask, const Tensor& memory_mask,
                    const Tensor& tgt_key_padding_mask, const Tensor& memory_key_padding_mask) const;
  std::vector<std::shared_ptr<TransformerDecoderLayer>> layers;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::BatchNorm2d> bn;
  Tensor final_norm(const Tensor& x) const;

 private:
  bool batch_first_;
};

struct TransformerOptions {
  int64_t d_model = 512;
  int64_t nhead = 8;
  int64_t num_encoder_layers = 6;
  int64_t num_decoder_layers = 6;
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  Activation activation = Activation::relu;
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;
  bool batch_norm = false;   // BatchNorm in place of LayerNorm (TransformerLayerOptions)
  DType dtype = DType::f32;
};

class Transformer : public nn::Module {
 public:
  explicit Transformer(const TransformerOptions& o = {}, Generator& g = default_generator());
  // src (B, S, E), tgt (B, T, E) (batch_first; else seq-first) -> (B, T, E). Masks as above.
  Tensor forward(const Tensor& src, const Tensor& tgt, const Tensor& src_mask = Tensor(),
                 const Tensor& tgt_mask = Tensor(), const Tensor& memory_mask = Tensor(),
                 const Tensor& src_key_padding_mask = Tensor(), const Tensor& tgt_key_padding_mask = Tensor(),
                 const Tensor& memory_key_padding_mask = Tensor()) const;
  // (T, T) u8, 1 above the diagonal (may not attend): torch's generate_square_subsequent_mask as bool.
  static Tensor generate_square_subsequent_mask(int64_t T);
  const TransformerOptions& options() const { return opt_; }

 private:
  TransformerOptions opt_;

 public:
  std::shared_ptr<TransformerEncoder> encoder;
  std::shared_ptr<TransformerDecoder> decoder;
};

Activation activation_from_string(const std::string& s);   // "relu" | "gelu" | "gelu_tanh"
std::string to_string(Activation a);

// ------------------------------------------------------------------ sequence to sequence

struct TransformerSeq2SeqConfig {
  int64_t vocab_size = 8000;
  int64_t d_model = 512, nhead = 8, encoder_layers = 6, decoder_layers = 6, d_ff = 2048;
  double dropout = 0.1;
  Activation activation = Activation::relu;
  bool norm_first = false;
  std::string norm = "layer";   // layer | batch (TransformerLayerOptions::batch_norm)
  double layer_norm_eps = 1e-5;
  bool share_embeddings = true;
  bool tie_output = true;
  int64_t max_length = 256;

  static TransformerSeq2SeqConfig from_json(const nlohmann::json& j);   // unknown keys: attn::Error
  nlohmann::json to_json() const;                                       // includes "model": "transformer"
};

class TransformerSeq2Seq : public Seq2SeqModel {
 public:
  explicit TransformerSeq2Seq(const TransformerSeq2SeqConfig& c, Generator& g = default_generator());

  Tensor forward(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in) override;
  Tensor forward_rows(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in, const Tensor& rows) override;
  std::unique_ptr<DecodeState> start(const Tensor& src, const Tensor& src_pad) override;
  Tensor step(DecodeState& state, const Tensor& tokens, Tensor* attention = nullptr) override;
  int64_t vocab_size() const override { return cfg_.vocab_size; }
  int64_t max_length() const override { return cfg_.max_length; }
  nlohmann::json config() const override { return cfg_.to_json(); }
  const TransformerSeq2SeqConfig& cfg() const { return cfg_; }

  // Pieces of forward(): the encoder memory (B, S, E), the decoder's output states (B, T, E) and
  // the logits (B, T, V) = output_proj(decode_states(...)).
  Tensor encode(const Tensor& src, const Tensor& src_pad) const;
  Tensor decode_states(const Tensor& memory, const Tensor& src_pad, const Tensor& tgt_in) const;
  Tensor decode(const Tensor& memory, const Tensor& src_pad, const Tensor& tgt_in) const;

 private:
  Tensor embed(const nn::Embedding& e, const Tensor& tokens, int64_t pos0) const;   // (B, T) -> (B, T, E)
  TransformerSeq2SeqConfig cfg_;

 public:
  // The paper's base configuration as JSON (what make_transformer_seq2seq fills missing keys from).
  static nlohmann::json defaults();

  std::shared_ptr<nn::Embedding> src_embed, tgt_embed;
  std::shared_ptr<nn::Dropout> embed_drop;
  std::shared_ptr<Transformer> transformer;
  std::shared_ptr<nn::Linear> output_proj;
  Tensor& pos_table;   // non-persistent buffer "pos_table" (max_length, E)
};

// cfg: any subset of the config keys over TransformerSeq2Seq::defaults(); unknown keys and a
// "model" other than "transformer" throw attn::Error.
std::shared_ptr<TransformerSeq2Seq> make_transformer_seq2seq(const nlohmann::json& cfg = nlohmann::json::object());

}  // namespace attn::models

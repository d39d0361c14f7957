// The Transformer encoder-decoder (torch.nn.Transformer 1.13 semantics) and TransformerSeq2Seq
// with KV-cache decoding. Glossary: B batch, S source length, T target length, E d_model,
// NH heads, HS head size, V vocabulary.
#include "attn/models/transformer.h"

#include <cmath>

#include "attn/autograd/grad_mode.h"
#include "attn/core/json_config.h"
#include "attn/nn/init.h"
#include "attn/nn/pos_embed.h"
#include "attn/ops/attention.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/fused.h"
#include "attn/ops/indexing.h"
#include "attn/ops/matmul.h"
#include "attn/ops/reduce.h"

namespace attn::models {

namespace {

const TransformerLayerOptions& checked(const TransformerLayerOptions& o) {
  ATTN_CHECK(o.d_model > 0 && o.nhead > 0 && o.dim_feedforward > 0,
             "Transformer: expected positive d_model, nhead and dim_feedforward, got ", o.d_model, ", ", o.nhead,
             " and ", o.dim_feedforward);
  ATTN_CHECK(o.d_model % o.nhead == 0, "Transformer: d_model ", o.d_model, " is not divisible by nhead ", o.nhead);
  ATTN_CHECK(o.dropout >= 0 && o.dropout <= 1, "Transformer: expected dropout in [0, 1], got ", o.dropout);
  return o;
}

nn::MultiheadAttentionOptions mha_options(const TransformerLayerOptions& o) {
  nn::MultiheadAttentionOptions m;
  m.embed_dim = o.d_model;
  m.num_heads = o.nhead;
  m.dropout = o.dropout;
  m.batch_first = true;   // the layers run batch-first inside
  m.dtype = o.dtype;
  return m;
}

// (S, B, E) <-> (B, S, E) when the module is sequence-first.
Tensor to_bf(const Tensor& x, bool batch_first) { return batch_first || !x.defined() ? x : x.transpose(0, 1); }

void check_seq(const Tensor& x, int64_t E, const char* op, const char* name) {
  ATTN_CHECK(x.defined() && x.dim() == 3 && x.size(2) == E, op, ": expected ", name, " of shape (B, L, ", E,
             ") (or (L, B, ", E, ") when not batch_first), got ", x.defined() ? x.shape() : Shape{});
}

// A norm: the LayerNorm, or (batch_norm) the BatchNorm over the tokens, or none (x itself).
struct Norm {
  const nn::LayerNorm* ln;
  const nn::BatchNorm2d* bn;
  Tensor operator()(const Tensor& x) const { return ln ? ln->forward(x) : bn ? bn->forward_tokens(x) : x; }
};

// One residual sub-layer: post-norm  norm(x + f(x))  (LayerNorm fused with the add) or pre-norm  x + f(norm(x)).
template <class F>
Tensor sublayer(const Tensor& x, const Norm& norm, bool norm_first, F&& f) {
  if (norm_first) return x + f(norm(x));
  if (!norm.ln) return norm(x + f(x));
  return add_layer_norm(x, f(x), norm.ln->weight, norm.ln->bias, norm.ln->options().eps).second;
}

// The layer norm, or the batch norm the options ask for, registered as `name` in m.
void add_norm(nn::Module& m, const std::string& name, const TransformerLayerOptions& o,
              std::shared_ptr<nn::LayerNorm>& ln, std::shared_ptr<nn::BatchNorm2d>& bn) {
  if (o.batch_norm) {
    ATTN_CHECK(o.dtype == DType::f32, "Transformer: batch_norm is f32 only, got ", dtype_name(o.dtype));
    bn = m.register_module(name, std::make_shared<nn::BatchNorm2d>(o.d_model, o.layer_norm_eps));
  } else {
    ln = m.register_module(name, std::make_shared<nn::LayerNorm>(nn::LayerNormOptions{o.d_model, o.layer_norm_eps,
                                                                                      true, o.dtype}));
  }
}

// linear2(dropout(act(linear1(x)))), with the bias folded into the activation for GELU.
Tensor feed_forward(const Tensor& x, const nn::Linear& l1, const nn::Dropout& drop, const nn::Linear& l2,
                    Activation act) {
  if (act == Activation::relu) return l2.forward(drop.forward_relu(l1.forward(x)));   // relu + dropout, one pass
  const Tensor h = bias_gelu(linear(x, l1.weight), l1.bias,
                             act == Activation::gelu_tanh ? GeluApprox::tanh : GeluApprox::none);
  return l2.forward(drop.forward(h));
}

// (B, L, E) -> (B, NH, L, HS), a view.
Tensor split_heads(const Tensor& x, int64_t nh) {
  return x.view({x.size(0), x.size(1), nh, x.size(2) / nh}).transpose(1, 2);
}
// (B, NH, L, HS) -> (B, L, E)
Tensor merge_heads(const Tensor& x) {
  return x.transpose(1, 2).reshape({x.size(0), x.size(2), x.size(1) * x.size(3)});
}

}  // namespace

Activation activation_from_string(const std::string& s) {
  if (s == "relu") return Activation::relu;
  if (s == "gelu") return Activation::gelu;
  if (s == "gelu_tanh") return Activation::gelu_tanh;
  fail("Transformer: expected activation \"relu\", \"gelu\" or \"gelu_tanh\", got \"", s, "\"");
}

std::string to_string(Activation a) {
  switch (a) {
    case Activation::relu: return "relu";
    case Activation::gelu: return "gelu";
    case Activation::gelu_tanh: return "gelu_tanh";
  }
  return "relu";
}

// ------------------------------------------------------------------ encoder layer

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerLayerOptions& o, Generator& g) : opt_(checked(o)) {
  const int64_t E = o.d_model;
  self_attn = register_module("self_attn", std::make_shared<nn::MultiheadAttention>(mha_options(o), g));
  linear1 = register_module("linear1", std::make_shared<nn::Linear>(nn::LinearOptions{E, o.dim_feedforward, true, o.dtype}, g));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(o.dropout));
  linear2 = register_module("linear2", std::make_shared<nn::Linear>(nn::LinearOptions{o.dim_feedforward, E, true, o.dtype}, g));
  add_norm(*this, "norm1", o, norm1, bn1);
  add_norm(*this, "norm2", o, norm2, bn2);
  dropout1 = register_module("dropout1", std::make_shared<nn::Dropout>(o.dropout));
  dropout2 = register_module("dropout2", std::make_shared<nn::Dropout>(o.dropout));
}

Tensor TransformerEncoderLayer::forward_bf(const Tensor& x, const Tensor& src_mask,
                                           const Tensor& src_key_padding_mask) const {
  Tensor h = sublayer(x, {norm1.get(), bn1.get()}, opt_.norm_first, [&](const Tensor& y) {
    return dropout1->forward(self_attn->forward(y, y, y, src_key_padding_mask, false, src_mask).out);
  });
  return sublayer(h, {norm2.get(), bn2.get()}, opt_.norm_first, [&](const Tensor& y) {
    return dropout2->forward(feed_forward(y, *linear1, *dropout, *linear2, opt_.activation));
  });
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask,
                                        const Tensor& src_key_padding_mask) const {
  check_seq(src, opt_.d_model, "TransformerEncoderLayer", "src");
  return to_bf(forward_bf(to_bf(src, opt_.batch_first), src_mask, src_key_padding_mask), opt_.batch_first);
}

// ------------------------------------------------------------------ decoder layer

TransformerDecoderLayer::TransformerDecoderLayer(const TransformerLayerOptions& o, Generator& g) : opt_(checked(o)) {
  const int64_t E = o.d_model;
  self_attn = register_module("self_attn", std::make_shared<nn::MultiheadAttention>(mha_options(o), g));
  multihead_attn = register_module("multihead_attn", std::make_shared<nn::MultiheadAttention>(mha_options(o), g));
  linear1 = register_module("linear1", std::make_shared<nn::Linear>(nn::LinearOptions{E, o.dim_feedforward, true, o.dtype}, g));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(o.dropout));
  linear2 = register_module("linear2", std::make_shared<nn::Linear>(nn::LinearOptions{o.dim_feedforward, E, true, o.dtype}, g));
  add_norm(*this, "norm1", o, norm1, bn1);
  add_norm(*this, "norm2", o, norm2, bn2);
  add_norm(*this, "norm3", o, norm3, bn3);
  dropout1 = register_module("dropout1", std::make_shared<nn::Dropout>(o.dropout));
  dropout2 = register_module("dropout2", std::make_shared<nn::Dropout>(o.dropout));
  dropout3 = register_module("dropout3", std::make_shared<nn::Dropout>(o.dropout));
}

Tensor TransformerDecoderLayer::ff(const Tensor& x) const {
  return dropout3->forward(feed_forward(x, *linear1, *dropout, *linear2, opt_.activation));
}

Tensor TransformerDecoderLayer::forward_bf(const Tensor& x, const Tensor& mem, const Tensor& tgt_mask,
                                           const Tensor& memory_mask, const Tensor& tgt_key_padding_mask,
                                           const Tensor& memory_key_padding_mask) const {
  Tensor h = sublayer(x, {norm1.get(), bn1.get()}, opt_.norm_first, [&](const Tensor& y) {
    return dropout1->forward(self_attn->forward(y, y, y, tgt_key_padding_mask, false, tgt_mask).out);
  });
  h = sublayer(h, {norm2.get(), bn2.get()}, opt_.norm_first, [&](const Tensor& y) {
    return dropout2->forward(multihead_attn->forward(y, mem, mem, memory_key_padding_mask, false, memory_mask).out);
  });
  return sublayer(h, {norm3.get(), bn3.get()}, opt_.norm_first, [&](const Tensor& y) { return ff(y); });
}

Tensor TransformerDecoderLayer::forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask,
                                        const Tensor& memory_mask, const Tensor& tgt_key_padding_mask,
                                        const Tensor& memory_key_padding_mask) const {
  check_seq(tgt, opt_.d_model, "TransformerDecoderLayer", "tgt");
  check_seq(memory, opt_.d_model, "TransformerDecoderLayer", "memory");
  const bool bf = opt_.batch_first;
  return to_bf(forward_bf(to_bf(tgt, bf), to_bf(memory, bf), tgt_mask, memory_mask, tgt_key_padding_mask,
                          memory_key_padding_mask),
               bf);
}

std::pair<Tensor, Tensor> TransformerDecoderLayer::project_memory(const Tensor& memory) const {
  const int64_t E = opt_.d_model;
  const Tensor& w = multihead_attn->in_proj_weight;
  const Tensor& b = multihead_attn->in_proj_bias;
  // One GEMM for K and V: (B, S, 2E) -> two (B, NH, S, HS) contiguous tensors.
  const Tensor kv = linear(memory, w.slice(0, E, 3 * E), b.defined() ? b.slice(0, E, 3 * E) : Tensor());
  const int64_t B = memory.size(0), S = memory.size(1), NH = opt_.nhead;
  const Tensor t = kv.view({B, S, 2, NH, E / NH}).permute({2, 0, 3, 1, 4});
  return {t.select(0, 0).contiguous(), t.select(0, 1).contiguous()};
}

Tensor TransformerDecoderLayer::step_cached(const Tensor& x, Tensor& cache_k, Tensor& cache_v, int64_t t,
                                            const Tensor& cross_k, const Tensor& cross_v, const Tensor& mem_mask,
                                            Tensor* weights) const {
  const int64_t E = opt_.d_model, NH = opt_.nhead, HS = E / NH, B = x.size(0);
  ATTN_CHECK(cache_k.size(0) == B && cache_k.size(2) > t, "TransformerDecoderLayer::step_cached: cache of shape ",
             cache_k.shape(), " has no room for position ", t, " of a batch of ", B);
  // Self-attention of the new position over positions 0..t.
  auto self_block = [&](const Tensor& y) {
    const Tensor qkv = linear(y, self_attn->in_proj_weight, self_attn->in_proj_bias)
                           .view({B, 1, 3, NH, HS})
                           .permute({2, 0, 3, 1, 4});   // (3, B, NH, 1, HS)
    Tensor kslot = cache_k.slice(2, t, t + 1), vslot = cache_v.slice(2, t, t + 1);
    kslot.copy_(qkv.select(0, 1));
    vslot.copy_(qkv.select(0, 2));
    const SdpaResult r = scaled_dot_product_attention(qkv.select(0, 0), cache_k.slice(2, 0, t + 1),
                                                      cache_v.slice(2, 0, t + 1));
    return self_attn->out_proj->forward(merge_heads(r.out));
  };
  auto cross_block = [&](const Tensor& y) {
    const Tensor& w = multihead_attn->in_proj_weight;
    const Tensor& b = multihead_attn->in_proj_bias;
    const Tensor q = linear(y, w.slice(0, 0, E), b.defined() ? b.slice(0, 0, E) : Tensor());
    SdpaOptions so;
    so.need_weights = weights != nullptr;
    const SdpaResult r = scaled_dot_product_attention(split_heads(q, NH), cross_k, cross_v, mem_mask, so);
    if (weights) *weights = mean(r.weights, {1, 2});   // (B, NH, 1, S) -> (B, S)
    return multihead_attn->out_proj->forward(merge_heads(r.out));
  };
  Tensor h = sublayer(x, {norm1.get(), bn1.get()}, opt_.norm_first, self_block);
  h = sublayer(h, {norm2.get(), bn2.get()}, opt_.norm_first, cross_block);
  return sublayer(h, {norm3.get(), bn3.get()}, opt_.norm_first, [&](const Tensor& y) { return ff(y); });
}

// ------------------------------------------------------------------ stacks

TransformerEncoder::TransformerEncoder(const TransformerLayerOptions& o, int64_t num_layers, bool final_norm,
                                       Generator& g)
    : batch_first_(o.batch_first) {
  ATTN_CHECK(num_layers >= 0, "TransformerEncoder: expected num_layers >= 0, got ", num_layers);
  auto list = register_module("layers", std::make_shared<nn::Module>());
  for (int64_t i = 0; i < num_layers; ++i)
    layers.push_back(list->register_module(std::to_string(i), std::make_shared<TransformerEncoderLayer>(o, g)));
  if (final_norm) add_norm(*this, "norm", o, norm, bn);
}

Tensor TransformerEncoder::final_norm(const Tensor& x) const { return Norm{norm.get(), bn.get()}(x); }

Tensor TransformerEncoder::forward_bf(const Tensor& x, const Tensor& mask, const Tensor& src_key_padding_mask) const {
  Tensor h = x;
  for (const auto& l : layers) h = l->forward_bf(h, mask, src_key_padding_mask);
  return final_norm(h);
}

Tensor TransformerEncoder::forward(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask) const {
  ATTN_CHECK(src.defined() && src.dim() == 3, "TransformerEncoder: expected a 3-D src, got ",
             src.defined() ? src.shape() : Shape{});
  return to_bf(forward_bf(to_bf(src, batch_first_), mask, src_key_padding_mask), batch_first_);
}

TransformerDecoder::TransformerDecoder(const TransformerLayerOptions& o, int64_t num_layers, bool final_norm,
                                       Generator& g)
    : batch_first_(o.batch_first) {
  ATTN_CHECK(num_layers >= 0, "TransformerDecoder: expected num_layers >= 0, got ", num_layers);
  auto list = register_module("layers", std::make_shared<nn::Module>());
  for (int64_t i = 0; i < num_layers; ++i)
    layers.push_back(list->register_module(std::to_string(i), std::make_shared<TransformerDecoderLayer>(o, g)));
  if (final_norm) add_norm(*this, "norm", o, norm, bn);
}

Tensor TransformerDecoder::final_norm(const Tensor& x) const { return Norm{norm.get(), bn.get()}(x); }

Tensor TransformerDecoder::forward_bf(const Tensor& x, const Tensor& mem, const Tensor& tgt_mask,
                                      const Tensor& memory_mask, const Tensor& tgt_key_padding_mask,
                                      const Tensor& memory_key_padding_mask) const {
  Tensor h = x;
  for (const auto& l : layers)
    h = l->forward_bf(h, mem, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask);
  return final_norm(h);
}

Tensor TransformerDecoder::forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask,
                                   const Tensor& memory_mask, const Tensor& tgt_key_padding_mask,
                                   const Tensor& memory_key_padding_mask) const {
  ATTN_CHECK(tgt.defined() && tgt.dim() == 3 && memory.defined() && memory.dim() == 3,
             "TransformerDecoder: expected 3-D tgt and memory");
  const bool bf = batch_first_;
  return to_bf(forward_bf(to_bf(tgt, bf), to_bf(memory, bf), tgt_mask, memory_mask, tgt_key_padding_mask,
                          memory_key_padding_mask),
               bf);
}

// ------------------------------------------------------------------ Transformer

Transformer::Transformer(const TransformerOptions& o, Generator& g) : opt_(o) {
  TransformerLayerOptions lo;
  lo.d_model = o.d_model;
  lo.nhead = o.nhead;
  lo.dim_feedforward = o.dim_feedforward;
  lo.dropout = o.dropout;
  lo.activation = o.activation;
  lo.layer_norm_eps = o.layer_norm_eps;
  lo.batch_first = o.batch_first;
  lo.norm_first = o.norm_first;
  lo.batch_norm = o.batch_norm;
  lo.dtype = o.dtype;
  encoder = register_module("encoder", std::make_shared<TransformerEncoder>(lo, o.num_encoder_layers, true, g));
  decoder = register_module("decoder", std::make_shared<TransformerDecoder>(lo, o.num_decoder_layers, true, g));
  // torch.nn.Transformer._reset_parameters: xavier_uniform_ on every parameter with dim > 1.
  NoGradGuard ng;
  for (auto& [name, p] : named_parameters())
    if (p.dim() > 1) nn::init::xavier_uniform_(p, g);
}

Tensor Transformer::generate_square_subsequent_mask(int64_t T) {
  std::vector<uint8_t> m(size_t(T * T), 0);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = i + 1; j < T; ++j) m[size_t(i * T + j)] = 1;
  return Tensor::from_vector(m, {T, T});
}

Tensor Transformer::forward(const Tensor& src, const Tensor& tgt, const Tensor& src_mask, const Tensor& tgt_mask,
                            const Tensor& memory_mask, const Tensor& src_key_padding_mask,
                            const Tensor& tgt_key_padding_mask, const Tensor& memory_key_padding_mask) const {
  check_seq(src, opt_.d_model, "Transformer", "src");
  check_seq(tgt, opt_.d_model, "Transformer", "tgt");
  const bool bf = opt_.batch_first;
  const Tensor s = to_bf(src, bf), t = to_bf(tgt, bf);
  ATTN_CHECK(s.size(0) == t.size(0), "Transformer: expected src and tgt with one batch size, got shapes ",
             src.shape(), " and ", tgt.shape());
  const Tensor memory = encoder->forward_bf(s, src_mask, src_key_padding_mask);
  return to_bf(decoder->forward_bf(t, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask),
               bf);
}

// ------------------------------------------------------------------ config

TransformerSeq2SeqConfig TransformerSeq2SeqConfig::from_json(const nlohmann::json& j) {
  ConfigReader r(j, "transformer config");
  if (r.has("model")) r.one_of("model", {"transformer"});
  TransformerSeq2SeqConfig c;
  c.vocab_size = r.get_or("vocab_size", c.vocab_size, Range::positive);
  c.d_model = r.get_or("d_model", c.d_model, Range::positive);
  c.nhead = r.get_or("nhead", c.nhead, Range::positive);
  c.encoder_layers = c.decoder_layers = r.get_or("layers", c.encoder_layers, Range::non_negative);
  c.encoder_layers = r.get_or("encoder_layers", c.encoder_layers, Range::non_negative);
  c.decoder_layers = r.get_or("decoder_layers", c.decoder_layers, Range::non_negative);
  c.d_ff = r.get_or("d_ff", c.d_ff, Range::positive);
  c.dropout = r.get_or("dropout", c.dropout, Range::probability);
  c.activation =
      activation_from_string(r.one_of_or("activation", to_string(c.activation), {"relu", "gelu", "gelu_tanh"}));
  c.norm_first = r.get_or("norm_first", c.norm_first);
  c.norm = r.one_of_or("norm", c.norm, {"layer", "batch"});
  c.layer_norm_eps = r.get_or("layer_norm_eps", c.layer_norm_eps, Range::positive);
  c.share_embeddings = r.get_or("share_embeddings", c.share_embeddings);
  c.tie_output = r.get_or("tie_output", c.tie_output);
  c.max_length = r.get_or("max_length", c.max_length, Range::positive);
  r.check(c.vocab_size > 4, "vocab_size", "an integer > 4 (pad, unk, bos, eos)", c.vocab_size);
  r.finish();
  return c;
}

nlohmann::json TransformerSeq2SeqConfig::to_json() const {
  return {{"model", "transformer"},          {"vocab_size", vocab_size},
          {"d_model", d_model},              {"nhead", nhead},
          {"encoder_layers", encoder_layers}, {"decoder_layers", decoder_layers},
          {"d_ff", d_ff},                    {"dropout", dropout},
          {"activation", to_string(activation)}, {"norm_first", norm_first}, {"norm", norm},
          {"layer_norm_eps", layer_norm_eps}, {"share_embeddings", share_embeddings},
          {"tie_output", tie_output},        {"max_length", max_length}};
}

nlohmann::json TransformerSeq2Seq::defaults() { return TransformerSeq2SeqConfig{}.to_json(); }

std::shared_ptr<TransformerSeq2Seq> make_transformer_seq2seq(const nlohmann::json& cfg) {
  return std::make_shared<TransformerSeq2Seq>(TransformerSeq2SeqConfig::from_json(cfg));
}

void register_transformer_models() {
  register_model({"transformer",
                  "Transformer encoder-decoder for translation (the paper's base: 6 + 6 layers, d_model 512, 8 heads)",
                  TransformerSeq2Seq::defaults(),
                  [](const nlohmann::json& cfg) { return make_transformer_seq2seq(cfg); }, kTranslation,
                  /*merge_defaults=*/false});
}

// ------------------------------------------------------------------ TransformerSeq2Seq

TransformerSeq2Seq::TransformerSeq2Seq(const TransformerSeq2SeqConfig& c, Generator& g)
    : cfg_(c),
      pos_table(register_buffer("pos_table", nn::sinusoidal_pos_embed(c.max_length, c.d_model), false)) {
  const double init_std = 1.0 / std::sqrt(double(c.d_model));
  src_embed = register_module("src_embed", std::make_shared<nn::Embedding>(c.vocab_size, c.d_model, g));
  tgt_embed = c.share_embeddings ? src_embed : std::make_shared<nn::Embedding>(c.vocab_size, c.d_model, g);
  register_module("tgt_embed", tgt_embed);
  embed_drop = register_module("embed_drop", std::make_shared<nn::Dropout>(c.dropout));
  TransformerOptions to;
  to.d_model = c.d_model;
  to.nhead = c.nhead;
  to.num_encoder_layers = c.encoder_layers;
  to.num_decoder_layers = c.decoder_layers;
  to.dim_feedforward = c.d_ff;
  to.dropout = c.dropout;
  to.activation = c.activation;
  to.layer_norm_eps = c.layer_norm_eps;
  to.batch_first = true;
  to.norm_first = c.norm_first;
  to.batch_norm = c.norm == "batch";
  transformer = register_module("transformer", std::make_shared<Transformer>(to, g));
  output_proj = register_module("output_proj",
                                std::make_shared<nn::Linear>(nn::LinearOptions{c.d_model, c.vocab_size, false}, g));
  NoGradGuard ng;
  nn::init::normal_(src_embed->weight, g, 0.0, init_std);
  if (!c.share_embeddings) nn::init::normal_(tgt_embed->weight, g, 0.0, init_std);
  if (c.tie_output) output_proj->weight = tgt_embed->weight;
  else nn::init::normal_(output_proj->weight, g, 0.0, init_std);
}

Tensor TransformerSeq2Seq::embed(const nn::Embedding& e, const Tensor& tokens, int64_t pos0) const {
  ATTN_CHECK(tokens.defined() && tokens.dim() == 2 && (tokens.dtype() == DType::i64 || tokens.dtype() == DType::i32),
             "TransformerSeq2Seq: expected token ids of shape (B, T) and dtype i64, got ",
             tokens.defined() ? tokens.shape() : Shape{});
  const int64_t T = tokens.size(1);
  ATTN_CHECK(pos0 + T <= cfg_.max_length, "TransformerSeq2Seq: positions up to ", pos0 + T,
             " exceed max_length ", cfg_.max_length);
  const Tensor x = e.forward(tokens) * std::sqrt(double(cfg_.d_model)) + pos_table.slice(0, pos0, pos0 + T);
  return embed_drop->forward(x);
}

namespace {
void check_src(const Tensor& src, const Tensor& src_pad) {
  ATTN_CHECK(src.defined() && src.dim() == 2, "TransformerSeq2Seq: expected src of shape (B, S), got ",
             src.defined() ? src.shape() : Shape{});
  if (src_pad.defined())
    ATTN_CHECK(src_pad.dtype() == DType::u8 && src_pad.shape() == src.shape(),
               "TransformerSeq2Seq: expected src_pad u8 of shape ", src.shape(), ", got ",
               dtype_name(src_pad.dtype()), " ", src_pad.shape());
}
}  // namespace

Tensor TransformerSeq2Seq::encode(const Tensor& src, const Tensor& src_pad) const {
  check_src(src, src_pad);
  return transformer->encoder->forward_bf(embed(*src_embed, src, 0), Tensor(), src_pad);
}

Tensor TransformerSeq2Seq::decode_states(const Tensor& memory, const Tensor& src_pad, const Tensor& tgt_in) const {
  ATTN_CHECK(tgt_in.defined() && tgt_in.dim() == 2 && tgt_in.size(0) == memory.size(0),
             "TransformerSeq2Seq: expected tgt_in of shape (", memory.size(0), ", T), got ",
             tgt_in.defined() ? tgt_in.shape() : Shape{});
  const int64_t T = tgt_in.size(1);
  const Tensor tgt_pad = eq(tgt_in, Tensor::scalar(double(pad_id), tgt_in.dtype()));
  const Tensor y = transformer->decoder->forward_bf(embed(*tgt_embed, tgt_in, 0), memory,
                                                    Transformer::generate_square_subsequent_mask(T), Tensor(),
                                                    tgt_pad, src_pad);
  return y;
}

Tensor TransformerSeq2Seq::decode(const Tensor& memory, const Tensor& src_pad, const Tensor& tgt_in) const {
  return output_proj->forward(decode_states(memory, src_pad, tgt_in));
}

Tensor TransformerSeq2Seq::forward(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in) {
  return decode(encode(src, src_pad), src_pad, tgt_in);
}

Tensor TransformerSeq2Seq::forward_rows(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in,
                                        const Tensor& rows) {
  const Tensor y = decode_states(encode(src, src_pad), src_pad, tgt_in);
  return output_proj->forward(index_select(y.reshape({-1, y.size(-1)}), 0, rows));
}

namespace {

struct TransformerDecodeState : DecodeState {
  Tensor src_pad;                    // (B, S) u8 or undefined
  std::vector<Tensor> cross_k, cross_v;   // per layer (B, NH, S, HS)
  std::vector<Tensor> self_k, self_v;     // per layer (B, NH, cap, HS); positions [0, t) valid
  int64_t batch_ = 0, t = 0;

  void select(const Tensor& rows) override {
    NoGradGuard ng;
    ATTN_CHECK(rows.defined() && rows.dim() == 1 && rows.dtype() == DType::i64,
               "DecodeState::select: expected rows as a 1-D i64 tensor");
    auto pick = [&](Tensor& x) {
      if (x.defined()) x = index_select(x, 0, rows).contiguous();
    };
    pick(src_pad);
    for (auto* v : {&cross_k, &cross_v, &self_k, &self_v})
      for (Tensor& x : *v) pick(x);
    batch_ = rows.numel();
  }
  int64_t batch() const override { return batch_; }
  int64_t steps() const override { return t; }
};

}  // namespace

std::unique_ptr<DecodeState> TransformerSeq2Seq::start(const Tensor& src, const Tensor& src_pad) {
  NoGradGuard ng;
  auto st = std::make_unique<TransformerDecodeState>();
  const Tensor memory = encode(src, src_pad);
  st->src_pad = src_pad;
  st->batch_ = src.size(0);
  const int64_t NH = cfg_.nhead, HS = cfg_.d_model / cfg_.nhead, cap = std::min<int64_t>(cfg_.max_length, 32);
  for (const auto& l : transformer->decoder->layers) {
    auto [k, v] = l->project_memory(memory);
    st->cross_k.push_back(k);
    st->cross_v.push_back(v);
    st->self_k.push_back(Tensor::empty({st->batch_, NH, cap, HS}));
    st->self_v.push_back(Tensor::empty({st->batch_, NH, cap, HS}));
  }
  return st;
}

Tensor TransformerSeq2Seq::step(DecodeState& state, const Tensor& tokens, Tensor* attention) {
  NoGradGuard ng;
  auto* st = dynamic_cast<TransformerDecodeState*>(&state);
  ATTN_CHECK(st != nullptr, "TransformerSeq2Seq::step: expected a state made by TransformerSeq2Seq::start");
  const int64_t B = st->batch_;
  ATTN_CHECK(tokens.defined() && tokens.dim() == 1 && tokens.size(0) == B,
             "TransformerSeq2Seq::step: expected tokens of shape (", B, "), got ",
             tokens.defined() ? tokens.shape() : Shape{});
  const int64_t t = st->t;
  // Grow the caches (capacity doubles) when position t does not fit.
  for (auto* v : {&st->self_k, &st->self_v})
    for (Tensor& c : *v)
      if (c.size(2) <= t) {
        Tensor bigger = Tensor::empty({c.size(0), c.size(1), std::max<int64_t>(2 * c.size(2), t + 1), c.size(3)});
        if (t > 0) bigger.slice(2, 0, t).copy_(c.slice(2, 0, t));
        c = bigger;
      }
  const Tensor mem_mask = st->src_pad.defined() ? st->src_pad.view({B, 1, 1, st->src_pad.size(1)}) : Tensor();
  Tensor h = embed(*tgt_embed, tokens.reshape({B, 1}), t);
  const auto& layers = transformer->decoder->layers;
  for (size_t i = 0; i < layers.size(); ++i) {
    const bool last = i + 1 == layers.size();
    h = layers[i]->step_cached(h, st->self_k[i], st->self_v[i], t, st->cross_k[i], st->cross_v[i], mem_mask,
                               last ? attention : nullptr);
  }
  h = transformer->decoder->final_norm(h);
  st->t = t + 1;
  return output_proj->forward(h).view({B, cfg_.vocab_size});
}

}  // namespace attn::models

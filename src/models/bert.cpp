// BERT: BertModel and the BertFor* heads (transformers' layout), the config and the registry entries.
// Glossary: B batch, T tokens, H hidden, NH heads, HS = H / NH, V vocabulary, L layers.
#include "attn/models/bert.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "attn/autograd/grad_mode.h"
#include "attn/core/json_config.h"
#include "attn/core/parallel.h"
#include "attn/nn/init.h"
#include "attn/ops/attention.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/fused.h"
#include "attn/ops/indexing.h"
#include "attn/ops/matmul.h"
#include "attn/ops/norm.h"

namespace attn::models {

namespace {

struct BertArchName {
  BertArchitecture arch;
  const char* name;
};
constexpr BertArchName kBertArchNames[] = {{BertArchitecture::base, "BertModel"},
                                   {BertArchitecture::pretraining, "BertForPreTraining"},
                                   {BertArchitecture::masked_lm, "BertForMaskedLM"},
                                   {BertArchitecture::sequence_classification, "BertForSequenceClassification"},
                                   {BertArchitecture::token_classification, "BertForTokenClassification"}};

std::vector<std::string> bert_arch_names() {
  std::vector<std::string> out;
  for (const auto& a : kBertArchNames) out.emplace_back(a.name);
  return out;
}

// transformers' _init_weights: N(0, 0.02) weights, zero biases.
void bert_init_linear(nn::Linear& l) {
  NoGradGuard ng;
  nn::init::normal_(l.weight, default_generator(), 0.0, 0.02);
  if (l.bias.defined()) nn::init::zeros_(l.bias);
}

std::shared_ptr<nn::Linear> bert_linear(int64_t in, int64_t out, bool bias = true) {
  auto l = std::make_shared<nn::Linear>(nn::LinearOptions{in, out, bias});
  bert_init_linear(*l);
  return l;
}

std::shared_ptr<nn::Embedding> bert_embedding(int64_t n, int64_t dim) {
  auto e = std::make_shared<nn::Embedding>(n, dim);
  NoGradGuard ng;
  nn::init::normal_(e->weight, default_generator(), 0.0, 0.02);
  return e;
}

Shape bert_shape_of(const Tensor& t) { return t.defined() ? t.shape() : Shape{}; }

// The batch as attention_mask describes it: the padding as a u8 (B, 1, 1, T) mask, nonzero = padding,
// undefined when nothing is padded (the attention then takes its unmasked path); and the valid tokens
// (mask nonzero) in order, for the packed path.
struct BertTokens {
  Tensor pad;
  std::vector<int64_t> index;        // b * T + t of each valid token
  std::vector<int64_t> cu_seqlens;   // (B + 1)
};

BertTokens bert_tokens(const Tensor& mask, int64_t B, int64_t T) {
  BertTokens r;
  if (!mask.defined()) return r;
  ATTN_CHECK(mask.dim() == 2 && mask.size(0) == B && mask.size(1) == T, "BERT: expected attention_mask of shape ",
             Shape({B, T}), " (as input_ids), got ", mask.shape());
  ATTN_CHECK(mask.dtype() != DType::bf16, "BERT: expected attention_mask of dtype i64, i32, u8, f32 or f64, got bf16");
  const std::vector<double> v = mask.to_vector<double>();
  Tensor pad = Tensor::empty({B, 1, 1, T}, DType::u8);
  uint8_t* p = pad.data<uint8_t>();
  r.cu_seqlens.push_back(0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const int64_t i = b * T + t;
      p[i] = v[size_t(i)] == 0.0 ? 1 : 0;
      if (!p[i]) r.index.push_back(i);
    }
    r.cu_seqlens.push_back(int64_t(r.index.size()));
  }
  if (int64_t(r.index.size()) < B * T) r.pad = pad;
  return r;
}

// rows (N, ...) placed at rows `index` of a (n, ...) tensor whose other rows are 0; no autograd (the
// packed path runs without gradients).
Tensor bert_scatter_rows(const Tensor& rows_in, const std::vector<int64_t>& index, int64_t n) {
  const Tensor rows = rows_in.contiguous();
  Shape shape = rows.shape();
  shape[0] = n;
  Tensor out = Tensor::empty(shape, rows.dtype());
  std::vector<int64_t> source(size_t(n), -1);
  for (size_t i = 0; i < index.size(); ++i) source[size_t(index[i])] = int64_t(i);
  const size_t row_bytes = size_t(rows.numel() / std::max<int64_t>(rows.size(0), 1)) * dtype_size(rows.dtype());
  const auto* src = reinterpret_cast<const char*>(rows.raw_data());
  auto* dst = reinterpret_cast<char*>(out.raw_data());
  parallel_for(0, n, std::max<int64_t>(1, int64_t((64 << 10) / std::max<size_t>(row_bytes, 1))), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t s = source[size_t(r)];
      if (s < 0) std::memset(dst + size_t(r) * row_bytes, 0, row_bytes);
      else std::memcpy(dst + size_t(r) * row_bytes, src + size_t(s) * row_bytes, row_bytes);
    }
  });
  return out;
}

// Whether a backward could follow: grad mode on and some parameter of `m` requires grad.
bool bert_grad_needed(const nn::Module& m) {
  if (!grad_enabled()) return false;
  for (const Tensor& p : m.parameters())
    if (p.requires_grad()) return true;
  return false;
}

void bert_check_ids(const Tensor& t, const char* what, const Shape& want) {
  ATTN_CHECK(t.defined() && t.dim() == 2 && (t.dtype() == DType::i64 || t.dtype() == DType::i32), "BERT: expected ",
             what, " of shape (B, T) and dtype i64, got ", t.defined() ? dtype_name(t.dtype()) : "none", " ",
             bert_shape_of(t));
  if (!want.empty())
    ATTN_CHECK(t.shape() == want, "BERT: expected ", what, " of shape ", want, " (as input_ids), got ", t.shape());
}

}  // namespace

// ---------------------------------------------------------------- config

const char* bert_architecture_name(BertArchitecture a) {
  for (const auto& n : kBertArchNames)
    if (n.arch == a) return n.name;
  return "?";
}

BertArchitecture parse_bert_architecture(const std::string& s) {
  for (const auto& n : kBertArchNames)
    if (s == n.name) return n.arch;
  std::string known;
  for (const auto& n : kBertArchNames) known += (known.empty() ? "" : ", ") + std::string(n.name);
  fail("BERT: unknown architecture '", s, "' (known: ", known, ")");
}

BertConfig bert_config_from_json(const nlohmann::json& j) {
  ConfigReader r(j, "bert config");
  BertConfig c;
  c.architecture = parse_bert_architecture(r.one_of("architecture", bert_arch_names()));
  c.vocab_size = r.get<int64_t>("vocab_size", Range::positive);
  c.hidden_size = r.get<int64_t>("hidden_size", Range::positive);
  c.num_hidden_layers = r.get<int64_t>("num_hidden_layers", Range::positive);
  c.num_attention_heads = r.get<int64_t>("num_attention_heads", Range::positive);
  r.check(c.hidden_size % c.num_attention_heads == 0, "num_attention_heads",
          "a divisor of hidden_size " + std::to_string(c.hidden_size), c.num_attention_heads);
  c.intermediate_size = r.get<int64_t>("intermediate_size", Range::positive);
  c.max_position_embeddings = r.get<int64_t>("max_position_embeddings", Range::positive);
  c.type_vocab_size = r.get<int64_t>("type_vocab_size", Range::positive);
  c.layer_norm_eps = r.get<double>("layer_norm_eps", Range::positive);
  c.hidden_dropout_prob = r.get<double>("hidden_dropout_prob", Range::probability);
  c.attention_probs_dropout_prob = r.get<double>("attention_probs_dropout_prob", Range::probability);
  if (r.has("classifier_dropout") && !j.at("classifier_dropout").is_null())
    c.classifier_dropout = r.get<double>("classifier_dropout", Range::probability);
  c.num_labels = r.get<int64_t>("num_labels", Range::positive);
  c.pad_token_id = r.get<int64_t>("pad_token_id", Range::non_negative);
  if (r.has("id2label")) {
    ConfigReader labels = r.object("id2label");
    for (const auto& [k, v] : j.at("id2label").items()) {
      char* end = nullptr;
      const long long id = std::strtoll(k.c_str(), &end, 10);
      labels.check(!k.empty() && end && *end == '\0' && id >= 0 && id < c.num_labels, k,
                   "a label id in [0, num_labels = " + std::to_string(c.num_labels) + ")", k);
      c.id2label[id] = labels.get<std::string>(k);
    }
    labels.finish();
    r.check(c.id2label.empty() || int64_t(c.id2label.size()) == c.num_labels, "id2label",
            "a name for each of the " + std::to_string(c.num_labels) + " labels", j.at("id2label"));
  }
  r.ignore("model");
  r.finish();
  return c;
}

nlohmann::json bert_config_to_json(const BertConfig& c) {
  nlohmann::json labels = nlohmann::json::object();
  for (const auto& [k, v] : c.id2label) labels[std::to_string(k)] = v;
  return {{"architecture", bert_architecture_name(c.architecture)},
          {"vocab_size", c.vocab_size},
          {"hidden_size", c.hidden_size},
          {"num_hidden_layers", c.num_hidden_layers},
          {"num_attention_heads", c.num_attention_heads},
          {"intermediate_size", c.intermediate_size},
          {"max_position_embeddings", c.max_position_embeddings},
          {"type_vocab_size", c.type_vocab_size},
          {"layer_norm_eps", c.layer_norm_eps},
          {"hidden_dropout_prob", c.hidden_dropout_prob},
          {"attention_probs_dropout_prob", c.attention_probs_dropout_prob},
          {"classifier_dropout", c.classifier_dropout ? nlohmann::json(*c.classifier_dropout) : nlohmann::json()},
          {"num_labels", c.num_labels},
          {"id2label", labels},
          {"pad_token_id", c.pad_token_id}};
}

nlohmann::json BertPreTrainedModel::config() const {
  nlohmann::json j = bert_config_to_json(cfg_);
  j["model"] = model_name_;
  return j;
}

int64_t BertPreTrainedModel::num_base_parameters() { return bert().num_parameters(); }

int64_t BertPreTrainedModel::macs_per_sequence(int64_t T) const {
  const BertConfig& c = cfg_;
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const int64_t layer = T * (4 * H * H + 2 * H * I) + 2 * T * T * H;   // qkv + output, FFN; QKᵀ and PV
  int64_t macs = c.num_hidden_layers * layer;
  switch (c.architecture) {
    case BertArchitecture::base: return macs + H * H;                                    // pooler
    case BertArchitecture::pretraining: return macs + H * H + T * (H * H + H * c.vocab_size) + 2 * H;
    case BertArchitecture::masked_lm: return macs + T * (H * H + H * c.vocab_size);
    case BertArchitecture::sequence_classification: return macs + H * H + H * c.num_labels;
    case BertArchitecture::token_classification: return macs + T * H * c.num_labels;
  }
  return macs;
}

// ---------------------------------------------------------------- modules

BertEmbeddings::BertEmbeddings(const BertConfig& c) : pad_token_id(c.pad_token_id) {
  word_embeddings = register_module("word_embeddings", bert_embedding(c.vocab_size, c.hidden_size));
  position_embeddings = register_module("position_embeddings", bert_embedding(c.max_position_embeddings, c.hidden_size));
  token_type_embeddings = register_module("token_type_embeddings", bert_embedding(c.type_vocab_size, c.hidden_size));
  LayerNorm = register_module("LayerNorm", std::make_shared<nn::LayerNorm>(c.hidden_size, c.layer_norm_eps));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(c.hidden_dropout_prob));
}

Tensor BertEmbeddings::forward(const Tensor& ids, const Tensor& types) const {
  const int64_t T = ids.size(1), max_t = position_embeddings->options().num_embeddings;
  ATTN_CHECK(T <= max_t, "BERT: ", T, " tokens exceed max_position_embeddings ", max_t);
  // transformers' order: (words + token types) + positions.
  Tensor x = word_embeddings->forward(ids);
  if (grad_enabled() && word_embeddings->weight.requires_grad()) {
    // torch's padding_idx: the padding id's lookups add no gradient to its row.
    const std::vector<int64_t> v = ids.to_vector<int64_t>();
    if (std::find(v.begin(), v.end(), pad_token_id) != v.end()) {
      Tensor pad = Tensor::empty({ids.size(0), T, 1}, DType::u8);
      for (size_t i = 0; i < v.size(); ++i) pad.data<uint8_t>()[i] = v[i] == pad_token_id ? 1 : 0;
      x = where(pad, x.detach(), x);
    }
  }
  x = types.defined() ? x + token_type_embeddings->forward(types) : x + token_type_embeddings->weight.select(0, 0);
  x = x + position_embeddings->weight.slice(0, 0, T);
  return dropout->forward(LayerNorm->forward(x));
}

Tensor BertEmbeddings::forward_packed(const Tensor& ids, const Tensor& types, const Tensor& positions) const {
  Tensor x = word_embeddings->forward(ids);   // the padded path's sums, row by row
  x = types.defined() ? x + token_type_embeddings->forward(types) : x + token_type_embeddings->weight.select(0, 0);
  x = x + position_embeddings->forward(positions);
  return dropout->forward(LayerNorm->forward(x));
}

BertDenseNorm::BertDenseNorm(int64_t in, int64_t out, double eps) {
  dense = register_module("dense", bert_linear(in, out));
  LayerNorm = register_module("LayerNorm", std::make_shared<nn::LayerNorm>(out, eps));
}

namespace {
// A module holding one Linear "dense" (or "qkv"), for transformers' nesting of names.
struct BertHolder : nn::Module {};
}  // namespace

BertLayer::BertLayer(const BertConfig& c) : heads_(c.num_attention_heads), attn_drop_(c.attention_probs_dropout_prob) {
  const int64_t H = c.hidden_size;
  auto attention = register_module("attention", std::make_shared<BertHolder>());
  auto self = attention->register_module("self", std::make_shared<BertHolder>());
  qkv = self->register_module("qkv", bert_linear(H, 3 * H));
  attention_output =
      attention->register_module("output", std::make_shared<BertDenseNorm>(H, H, c.layer_norm_eps));
  auto inter = register_module("intermediate", std::make_shared<BertHolder>());
  intermediate = inter->register_module("dense", bert_linear(H, c.intermediate_size));
  output = register_module("output", std::make_shared<BertDenseNorm>(c.intermediate_size, H, c.layer_norm_eps));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(c.hidden_dropout_prob));
}

Tensor BertLayer::forward(const Tensor& x, const Tensor& pad, Tensor* weights) const {
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2);
  SdpaOptions so;
  so.dropout_p = is_training() ? attn_drop_ : 0.0;
  // A bf16 model in inference without a padding mask: the projection's result in bf16, the attention
  // in bf16 (ops/attention.h).
  const bool bf16 = !weights && !pad.defined() && !is_training() && qkv->weight.dtype() == DType::bf16;
  const Tensor y = bf16 ? linear_bf16_out(x, qkv->weight, qkv->bias) : qkv->forward(x);   // (B, T, 3H): [q | k | v]
  Tensor ctx;
  if (!weights) {
    ctx = scaled_dot_product_attention_packed(y, heads_, pad, so);   // (B, T, H), one d(qkv) buffer
  } else {
    so.need_weights = true;
    const Tensor t = y.view({B, T, 3, heads_, H / heads_}).permute({2, 0, 3, 1, 4});   // (3, B, NH, T, HS)
    SdpaResult r = scaled_dot_product_attention(t.select(0, 0), t.select(0, 1), t.select(0, 2), pad, so);
    ctx = r.out.transpose(1, 2).reshape({B, T, H});
    *weights = r.weights;
  }
  return feed_forward(ctx, x);
}

Tensor BertLayer::forward_packed(const Tensor& x, const std::vector<int64_t>& cu_seqlens) const {
  ATTN_CHECK(!is_training() || attn_drop_ == 0.0, "BertLayer::forward_packed: expected eval mode (the packed "
             "attention has no dropout), got training mode with attention dropout ", attn_drop_);
  return feed_forward(scaled_dot_product_attention_varlen(qkv->forward(x), cu_seqlens, heads_), x);
}

Tensor BertLayer::feed_forward(const Tensor& ctx, const Tensor& x) const {
  const nn::LayerNorm& n1 = *attention_output->LayerNorm;
  const Tensor a = add_layer_norm(dropout->forward(attention_output->dense->forward(ctx)), x, n1.weight, n1.bias,
                                  n1.options().eps).second;
  // exact (erf) GELU; in inference as the GEMM's epilogue, bf16 out for a packed bf16 output dense
  Tensor h;
  if (!grad_enabled() && !is_training()) {
    const Tensor& w2 = output->dense->weight;
    const DType hidden = w2.is_gemm_packed() && w2.dtype() == DType::bf16 ? DType::bf16 : DType::f32;
    h = linear_bias_gelu(a, intermediate->weight, intermediate->bias, GeluApprox::none, hidden);
  } else {
    h = bias_gelu(linear(a, intermediate->weight), intermediate->bias);
  }
  const nn::LayerNorm& n2 = *output->LayerNorm;
  return add_layer_norm(dropout->forward(output->dense->forward(h)), a, n2.weight, n2.bias, n2.options().eps).second;
}

// ---------------------------------------------------------------- BertModel

BertModel::BertModel(const BertConfig& c, std::string name, bool add_pooling_layer)
    : BertPreTrainedModel(c, std::move(name)) {
  ATTN_CHECK(c.hidden_size % c.num_attention_heads == 0, "BERT: hidden_size ", c.hidden_size,
             " is not divisible by num_attention_heads ", c.num_attention_heads);
  embeddings_ = register_module("embeddings", std::make_shared<BertEmbeddings>(c));
  auto encoder = register_module("encoder", std::make_shared<BertHolder>());
  layers_ = encoder->register_module("layer", std::make_shared<nn::ModuleList<BertLayer>>());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers_->push_back(std::make_shared<BertLayer>(c));
  if (add_pooling_layer) {
    auto pooler = register_module("pooler", std::make_shared<BertHolder>());
    pooler_ = pooler->register_module("dense", bert_linear(c.hidden_size, c.hidden_size));
  }
}

BertOutput BertModel::forward(const BertInputs& in, const BertOutputOptions& o) { return forward(in, o, nullptr); }

BertOutput BertModel::forward(const BertInputs& in, const BertOutputOptions& o, BertPackedTokens* packed) {
  bert_check_ids(in.input_ids, "input_ids", {});
  const int64_t B = in.input_ids.size(0), T = in.input_ids.size(1);
  if (in.token_type_ids.defined()) bert_check_ids(in.token_type_ids, "token_type_ids", {B, T});
  BertTokens tok = bert_tokens(in.attention_mask, B, T);
  BertOutput out;
  Tensor x;
  if (tok.pad.defined() && !tok.index.empty() && o.pack_tokens && !o.attentions && !o.hidden_states && !is_training() &&
      !bert_grad_needed(*this)) {
    // The valid tokens only (see bert.h): (N, H) through every layer, scattered back at the end.
    const int64_t N = int64_t(tok.index.size()), max_t = embeddings_->position_embeddings->options().num_embeddings;
    ATTN_CHECK(T <= max_t, "BERT: ", T, " tokens exceed max_position_embeddings ", max_t);
    std::vector<int64_t> pos(tok.index.size());
    for (size_t i = 0; i < pos.size(); ++i) pos[i] = tok.index[i] % T;
    const Tensor idx = Tensor::from_vector(tok.index, {N});
    const Tensor ids = index_select(in.input_ids.reshape({B * T}), 0, idx);
    const Tensor types = in.token_type_ids.defined() ? index_select(in.token_type_ids.reshape({B * T}), 0, idx) : Tensor();
    Tensor h = embeddings_->forward_packed(ids, types, Tensor::from_vector(pos, {N}));
    for (size_t i = 0; i < layers_->size(); ++i) h = (*layers_)[i]->forward_packed(h, tok.cu_seqlens);
    x = bert_scatter_rows(h, tok.index, B * T).view({B, T, h.size(1)});
    if (packed) *packed = {h, std::move(tok.index), std::move(tok.cu_seqlens)};
  } else {
    x = embeddings_->forward(in.input_ids, in.token_type_ids);
    if (o.hidden_states) out.hidden_states.push_back(x);
    for (size_t i = 0; i < layers_->size(); ++i) {
      Tensor w;
      x = (*layers_)[i]->forward(x, tok.pad, o.attentions ? &w : nullptr);
      if (o.attentions) out.attentions.push_back(w);
      if (o.hidden_states) out.hidden_states.push_back(x);
    }
  }
  out.last_hidden_state = x;
  if (pooler_) out.pooler_output = tanh(pooler_->forward(x.select(1, 0)));
  return out;
}

// ---------------------------------------------------------------- heads

BertWithHeads::BertWithHeads(const BertConfig& c, std::string name) : BertPreTrainedModel(c, std::move(name)) {
  const BertArchitecture a = c.architecture;
  ATTN_CHECK(a != BertArchitecture::base, "BertWithHeads: the architecture BertModel has no heads (use BertModel)");
  const bool pooler = a == BertArchitecture::pretraining || a == BertArchitecture::sequence_classification;
  BertConfig base = c;   // the base model inside describes itself as one
  base.architecture = BertArchitecture::base;
  bert_ = register_module("bert", std::make_shared<BertModel>(base, model_name_, pooler));
  const int64_t H = c.hidden_size;
  if (a == BertArchitecture::pretraining || a == BertArchitecture::masked_lm) {
    auto cls = register_module("cls", std::make_shared<BertHolder>());
    auto pred = cls->register_module("predictions", std::make_shared<BertHolder>());
    mlm_bias_ = &pred->register_parameter("bias", Tensor::zeros({c.vocab_size}));
    transform_ = pred->register_module("transform", std::make_shared<BertDenseNorm>(H, H, c.layer_norm_eps));
    {
      // Tied: the decoder's weight IS the word embeddings (its own is never drawn nor touched).
      nn::init::SkipRandomInit skip(nn::init::SkipRandomInit::Fill::none);
      decoder_ = pred->register_module("decoder", std::make_shared<nn::Linear>(nn::LinearOptions{H, c.vocab_size, false}));
    }
    decoder_->weight = bert_->embeddings().word_embeddings->weight;
    if (a == BertArchitecture::pretraining) seq_relationship_ = cls->register_module("seq_relationship", bert_linear(H, 2));
  } else {
    const double p = c.classifier_dropout.value_or(c.hidden_dropout_prob);
    classifier_drop_ = register_module("dropout", std::make_shared<nn::Dropout>(p));
    classifier_ = register_module("classifier", bert_linear(H, c.num_labels));
  }
}

BertOutput BertWithHeads::forward(const BertInputs& in, const BertOutputOptions& o) {
  BertPackedTokens p;
  BertOutputOptions bo = o;   // a trainable head on a frozen base model keeps the padded path (and its autograd)
  bo.pack_tokens = o.pack_tokens && !bert_grad_needed(*this);
  BertOutput out = bert_->forward(in, bo, &p);
  // The per-token heads run on the packed rows when there are some, and are scattered back to (B, T, ...).
  const bool packed = p.hidden.defined();
  const Tensor& tokens = packed ? p.hidden : out.last_hidden_state;
  const int64_t B = out.last_hidden_state.size(0), T = out.last_hidden_state.size(1);
  const auto unpack = [&](const Tensor& t) {
    return packed ? bert_scatter_rows(t, p.index, B * T).view({B, T, t.size(-1)}) : t;
  };
  if (transform_) {
    const nn::Linear& d = *transform_->dense;
    const nn::LayerNorm& n = *transform_->LayerNorm;
    Tensor rows = tokens;
    if (o.mlm_rows.defined()) {
      const Tensor flat = packed ? unpack(tokens) : tokens;
      rows = index_select(flat.reshape({B * T, flat.size(-1)}), 0, o.mlm_rows);   // (M, H)
    }
    const Tensor t = layer_norm(bias_gelu(linear(rows, d.weight), d.bias), n.weight, n.bias, n.options().eps);
    const Tensor logits = linear(t, decoder_->weight, *mlm_bias_);
    out.prediction_logits = o.mlm_rows.defined() ? logits : unpack(logits);   // (M, V) or (B, T, V)
  }
  if (seq_relationship_) out.seq_relationship_logits = seq_relationship_->forward(out.pooler_output);
  if (classifier_) {
    if (cfg_.architecture == BertArchitecture::sequence_classification)
      out.logits = classifier_->forward(classifier_drop_->forward(out.pooler_output));
    else
      out.logits = unpack(classifier_->forward(classifier_drop_->forward(tokens)));
  }
  return out;
}

// ---------------------------------------------------------------- registry

std::shared_ptr<BertPreTrainedModel> make_bert(const BertConfig& c, const std::string& name) {
  if (c.architecture == BertArchitecture::base) return std::make_shared<BertModel>(c, name);
  return std::make_shared<BertWithHeads>(c, name);
}

std::shared_ptr<BertPreTrainedModel> create_bert(const std::string& name, const nlohmann::json& overrides) {
  const ModelEntry& e = model_entry(name);
  auto m = std::dynamic_pointer_cast<BertPreTrainedModel>(create(name, overrides));
  ATTN_CHECK(m != nullptr, "create_bert: '", name, "' is a ", e.task, " model, not a BERT");
  return m;
}

namespace {

struct BertVariant {
  const char* name;
  const char* description;
  int64_t vocab, hidden, layers, heads, ffn;
};

constexpr BertVariant kBertVariants[] = {
    {"bert-base-uncased", "BERT-Base, uncased vocabulary (12 layers, 768 hidden, 12 heads)", 30522, 768, 12, 12, 3072},
    {"bert-base-cased", "BERT-Base, cased vocabulary (12 layers, 768 hidden, 12 heads)", 28996, 768, 12, 12, 3072},
    {"bert-large-uncased", "BERT-Large, uncased vocabulary (24 layers, 1024 hidden, 16 heads)", 30522, 1024, 24, 16,
     4096},
    {"bert-large-cased", "BERT-Large, cased vocabulary (24 layers, 1024 hidden, 16 heads)", 28996, 1024, 24, 16, 4096},
    {"bert-mini", "BERT-Mini (4 layers, 256 hidden, 4 heads; uncased vocabulary)", 30522, 256, 4, 4, 1024},
    {"bert-small", "BERT-Small (4 layers, 512 hidden, 8 heads; uncased vocabulary)", 30522, 512, 4, 8, 2048},
};

}  // namespace

void register_bert_models() {
  for (const BertVariant& v : kBertVariants) {
    BertConfig c;
    c.vocab_size = v.vocab;
    c.hidden_size = v.hidden;
    c.num_hidden_layers = v.layers;
    c.num_attention_heads = v.heads;
    c.intermediate_size = v.ffn;
    const std::string name = v.name;
    register_model({name, v.description, bert_config_to_json(c),
                    [name](const nlohmann::json& j) -> std::shared_ptr<Model> {
                      return make_bert(bert_config_from_json(j), name);
                    },
                    kMaskedLM});
  }
}

}  // namespace attn::models

// RnnSeq2Seq: the attention-based RNN encoder-decoder (Bahdanau et al. 2015; Luong et al. 2015).
// Teacher forcing and incremental decoding run the same decode() step, so forward() equals
// start() + step() token by token.
#include "attn/models/rnn_seq2seq.h"

#include <string>
#include <vector>

#include "attn/core/json_config.h"
#include "attn/ops/combine.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/indexing.h"

namespace attn::models {

// ---------------------------------------------------------------- config

namespace {

const char* const kModelName = "rnn-attention";

nn::ScoreKind score_kind(const std::string& s) {
  if (s == "dot") return nn::ScoreKind::dot;
  if (s == "general") return nn::ScoreKind::general;
  if (s == "concat") return nn::ScoreKind::concat;
  if (s == "cosine") return nn::ScoreKind::cosine;
  fail("rnn-attention: expected score \"dot\", \"general\", \"concat\" or \"cosine\", got \"", s, "\"");
}

}  // namespace

nlohmann::json RnnSeq2SeqConfig::to_json() const {
  return {{"model", kModelName},
          {"vocab_size", vocab_size},
          {"emb_dim", emb_dim},
          {"hidden", hidden},
          {"layers", layers},
          {"cell", cell},
          {"bidirectional", bidirectional},
          {"attention", attention},
          {"score", score},
          {"local", local},
          {"window", window},
          {"dropout", dropout},
          {"max_length", max_length},
          {"share_embeddings", share_embeddings},
          {"tie_embeddings", tie_embeddings}};
}

RnnSeq2SeqConfig RnnSeq2SeqConfig::from_json(const nlohmann::json& j) {
  ConfigReader r(j, "rnn-attention config");
  if (r.has("model")) r.one_of("model", {kModelName});
  RnnSeq2SeqConfig c;
  c.vocab_size = r.get_or("vocab_size", c.vocab_size, Range::positive);
  c.emb_dim = r.get_or("emb_dim", c.emb_dim, Range::positive);
  c.hidden = r.get_or("hidden", c.hidden, Range::positive);
  c.layers = r.get_or("layers", c.layers, Range::positive);
  c.cell = r.one_of_or("cell", c.cell, {"gru", "lstm"});
  c.bidirectional = r.get_or("bidirectional", c.bidirectional);
  c.attention = r.one_of_or("attention", c.attention, {"bahdanau", "luong"});
  c.score = r.one_of_or("score", c.score, {"dot", "general", "concat", "cosine"});
  c.local = r.one_of_or("local", c.local, {"none", "m", "p"});
  c.window = r.get_or("window", c.window, Range::non_negative);
  c.dropout = r.get_or("dropout", c.dropout, Range::probability);
  c.max_length = r.get_or("max_length", c.max_length, Range::positive);
  c.share_embeddings = r.get_or("share_embeddings", c.share_embeddings);
  c.tie_embeddings = r.get_or("tie_embeddings", c.tie_embeddings);
  r.finish();
  return c;
}

nlohmann::json RnnSeq2Seq::defaults() { return RnnSeq2SeqConfig{}.to_json(); }

std::shared_ptr<RnnSeq2Seq> make_rnn_seq2seq(const nlohmann::json& cfg, Generator& g) {
  return std::make_shared<RnnSeq2Seq>(RnnSeq2SeqConfig::from_json(cfg), g);
}

void register_rnn_seq2seq_models() {
  register_model({"rnn-attention", "RNN encoder-decoder with attention (Bahdanau or Luong) for translation",
                  RnnSeq2Seq::defaults(), [](const nlohmann::json& cfg) { return make_rnn_seq2seq(cfg); },
                  kTranslation, /*merge_defaults=*/false});
}

// ---------------------------------------------------------------- model

RnnSeq2Seq::RnnSeq2Seq(const RnnSeq2SeqConfig& c, Generator& g) : cfg_(c) {
  const char* op = "rnn-attention";
  ATTN_CHECK(c.vocab_size > eos_id, op, ": expected vocab_size > 3 (pad, unk, bos, eos), got ", c.vocab_size);
  ATTN_CHECK(c.emb_dim > 0 && c.hidden > 0 && c.layers > 0, op,
             ": expected positive emb_dim, hidden and layers, got ", c.emb_dim, ", ", c.hidden, ", ", c.layers);
  ATTN_CHECK(c.cell == "gru" || c.cell == "lstm", op, ": expected cell \"gru\" or \"lstm\", got \"", c.cell, "\"");
  ATTN_CHECK(c.attention == "bahdanau" || c.attention == "luong", op,
             ": expected attention \"bahdanau\" or \"luong\", got \"", c.attention, "\"");
  ATTN_CHECK(c.local == "none" || c.local == "m" || c.local == "p", op, ": expected local \"none\", \"m\" or \"p\", got \"",
             c.local, "\"");
  ATTN_CHECK(!c.bidirectional || c.hidden % 2 == 0, op,
             ": a bidirectional encoder splits hidden over two directions; expected an even hidden, got ", c.hidden);
  ATTN_CHECK(c.local == "none" || c.window >= (c.local == "p" ? 1 : 0), op, ": expected window >= ",
             c.local == "p" ? 1 : 0, " for local-", c.local, ", got ", c.window);
  ATTN_CHECK(c.dropout >= 0 && c.dropout < 1, op, ": expected dropout in [0, 1), got ", c.dropout);
  ATTN_CHECK(c.max_length > 0, op, ": expected a positive max_length, got ", c.max_length);
  ATTN_CHECK(!c.tie_embeddings || c.emb_dim == c.hidden, op,
             ": tie_embeddings needs emb_dim == hidden (the output projection reads h~ of width hidden), got emb_dim ",
             c.emb_dim, " and hidden ", c.hidden);
  const nn::ScoreKind kind = score_kind(c.score);
  ATTN_CHECK(kind != nn::ScoreKind::cosine || c.local == "none", op,
             ": cosine scores take global attention (local \"none\"), got local \"", c.local, "\"");
  const bool lstm = c.cell == "lstm";
  const int64_t D = c.bidirectional ? 2 : 1, H = c.hidden;

  src_embed = register_module("src_embed", std::make_shared<nn::Embedding>(c.vocab_size, c.emb_dim, g));
  tgt_embed = c.share_embeddings ? src_embed : std::make_shared<nn::Embedding>(c.vocab_size, c.emb_dim, g);
  register_module("tgt_embed", tgt_embed);
  auto make_rnn = [&](int64_t in, int64_t hid, bool bidir, bool batch_first) -> std::shared_ptr<nn::RnnBase> {
    nn::RnnOptions o{.input_size = in, .hidden_size = hid, .num_layers = c.layers, .batch_first = batch_first,
                     .dropout = c.dropout, .bidirectional = bidir};
    if (lstm) return std::make_shared<nn::LSTM>(o, g);
    return std::make_shared<nn::GRU>(o, g);
  };
  encoder = register_module("encoder", make_rnn(c.emb_dim, H / D, c.bidirectional, true));
  bridge_h = register_module("bridge_h", std::make_shared<nn::Linear>(H, H, true, g));
  if (lstm) bridge_c = register_module("bridge_c", std::make_shared<nn::Linear>(H, H, true, g));
  decoder = register_module("decoder", make_rnn(c.emb_dim + H, H, false, false));
  nn::ScoreOptions so{.kind = kind, .query_dim = H, .key_dim = H, .attn_dim = H};
  if (c.local == "none") {
    attn = register_module("attn", std::make_shared<nn::ScoreAttention>(so, g));
    if (kind == nn::ScoreKind::cosine) attn_beta = register_module("attn_beta", std::make_shared<nn::Linear>(H, 1, true, g));
  } else {
    nn::LocalAttentionOptions lo{.mode = c.local == "m" ? nn::LocalMode::monotonic : nn::LocalMode::predictive,
                                 .score = so, .window = c.window};
    local_attn = register_module("attn", std::make_shared<nn::LocalAttention>(lo, g));
  }
  W_c = register_module("W_c", std::make_shared<nn::Linear>(2 * H, H, false, g));
  output_proj = register_module("output_proj", std::make_shared<nn::Linear>(H, c.vocab_size, true, g));
  if (c.tie_embeddings) output_proj->weight = tgt_embed->weight;
  drop = register_module("drop", std::make_shared<nn::Dropout>(c.dropout));
}

void RnnDecodeState::select(const Tensor& rows) {
  ATTN_CHECK(rows.dim() == 1 && rows.dtype() == DType::i64, "RnnDecodeState::select: expected rows (B') i64, got shape ",
             rows.shape(), " dtype ", dtype_name(rows.dtype()));
  memory = index_select(memory, 0, rows);
  src_pad = index_select(src_pad, 0, rows);
  h = index_select(h, 1, rows);
  if (c.defined()) c = index_select(c, 1, rows);
  if (feed.defined()) feed = index_select(feed, 0, rows);
}

std::unique_ptr<RnnDecodeState> RnnSeq2Seq::encode(const Tensor& src, const Tensor& src_pad_in) const {
  const char* op = "rnn-attention";
  ATTN_CHECK(src.defined() && src.dim() == 2 && src.dtype() == DType::i64, op,
             ": expected src (B, S) i64, got shape ", src.defined() ? shape_str(src.shape()) : "undefined");
  // An undefined mask means no padding.
  const Tensor src_pad = src_pad_in.defined() ? src_pad_in : Tensor::zeros(src.shape(), DType::u8);
  ATTN_CHECK(src_pad.defined() && src_pad.shape() == src.shape() && src_pad.dtype() == DType::u8, op,
             ": expected src_pad u8 of src's shape ", src.shape(), ", got shape ",
             src_pad.defined() ? shape_str(src_pad.shape()) : "undefined");
  const int64_t B = src.size(0), S = src.size(1), H = cfg_.hidden, L = cfg_.layers;
  ATTN_CHECK(S >= 1 && S <= cfg_.max_length, op, ": expected a source length in [1, ", cfg_.max_length, "], got ", S);
  // Lengths for the packed encoder; padding must trail (as packed sequences assume).
  const std::vector<uint8_t> pad = src_pad.contiguous().to_vector<uint8_t>();
  std::vector<int64_t> len(B);
  for (int64_t b = 0; b < B; ++b) {
    int64_t n = 0;
    while (n < S && !pad[b * S + n]) ++n;
    for (int64_t j = n; j < S; ++j)
      ATTN_CHECK(pad[b * S + j], op, ": expected padding only at the end of each row; row ", b,
                 " has a token at ", j, " after padding at ", n);
    ATTN_CHECK(n >= 1, op, ": row ", b, " of src is all padding");
    len[b] = n;
  }
  const Tensor e = drop->forward(src_embed->forward(src));   // (B, S, E)
  const nn::RnnOutput r = encoder->run(e, Tensor(), Tensor(), Tensor::from_vector<int64_t>(len, {B}));
  auto st = std::make_unique<RnnDecodeState>();
  st->memory = r.output;   // (B, S, H)
  st->src_pad = src_pad;
  // (L·D, B, H/D) -> (L, B, H): both directions of layer l side by side.
  auto layers = [&](const Tensor& s) {
    return cfg_.bidirectional ? s.view({L, 2, B, H / 2}).permute({0, 2, 1, 3}).reshape({L, B, H}) : s;
  };
  st->h = tanh(bridge_h->forward(layers(r.h_n)));
  if (bridge_c) st->c = tanh(bridge_c->forward(layers(r.c_n)));
  if (cfg_.attention == "luong") st->feed = Tensor::zeros({B, H}, st->memory.dtype());
  return st;
}

nn::AttentionResult RnnSeq2Seq::attend(const Tensor& query, const RnnDecodeState& st) const {
  if (local_attn) return local_attn->forward(query, st.memory, st.t, st.src_pad);
  if (attn_beta) {   // cosine: beta = 1 + softplus(w·s + b), softplus(x) = relu(x) + log(1 + exp(-|x|))
    const Tensor z = attn_beta->forward(query).squeeze(-1);
    const Tensor beta = add(relu(z) + log(add(exp(neg(abs(z))), 1.0)), 1.0);
    const Tensor a = nn::masked_softmax(attn->score(query, st.memory, beta), st.src_pad);
    return {nn::detail::weighted_sum(a, st.memory), a};
  }
  return attn->forward(query, st.memory, st.src_pad);
}

Tensor RnnSeq2Seq::decode(RnnDecodeState& st, const Tensor& e, Tensor* weights) const {
  const bool bahdanau = cfg_.attention == "bahdanau";
  nn::AttentionResult a;
  Tensor x;
  if (bahdanau) {   // attend from the previous state, feed the context into the RNN
    a = attend(st.h.select(0, cfg_.layers - 1), st);
    x = concat({e, a.context}, -1);
  } else {          // input feeding of the previous attentional state
    x = concat({e, st.feed}, -1);
  }
  const nn::RnnOutput r = decoder->run(x.unsqueeze(0), st.h, st.c, Tensor());
  st.h = r.h_n;
  st.c = r.c_n;
  const Tensor s = r.output.select(0, 0);   // (B, H) top layer
  if (!bahdanau) a = attend(s, st);
  const Tensor ht = tanh(W_c->forward(concat({a.context, s}, -1)));   // h~ (B, H)
  st.feed = ht;
  ++st.t;
  if (weights) *weights = a.weights;
  return ht;
}

std::pair<Tensor, Tensor> RnnSeq2Seq::forward_with_attention(const Tensor& src, const Tensor& src_pad,
                                                             const Tensor& tgt_in) {
  auto st = encode(src, src_pad);
  ATTN_CHECK(tgt_in.defined() && tgt_in.dim() == 2 && tgt_in.dtype() == DType::i64 &&
                 tgt_in.size(0) == src.size(0),
             "rnn-attention: expected tgt_in (", src.size(0), ", T) i64, got shape ",
             tgt_in.defined() ? shape_str(tgt_in.shape()) : "undefined");
  const int64_t T = tgt_in.size(1);
  ATTN_CHECK(T >= 1 && T <= cfg_.max_length, "rnn-attention: expected a target length in [1, ", cfg_.max_length,
             "], got ", T);
  const Tensor emb = drop->forward(tgt_embed->forward(tgt_in));   // (B, T, E)
  std::vector<Tensor> hs(T), ws(T);
  for (int64_t t = 0; t < T; ++t) hs[t] = decode(*st, emb.select(1, t), &ws[t]);
  return {output_proj->forward(drop->forward(stack(hs, 1))), stack(ws, 1)};
}

Tensor RnnSeq2Seq::forward(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in) {
  return forward_with_attention(src, src_pad, tgt_in).first;
}

std::unique_ptr<DecodeState> RnnSeq2Seq::start(const Tensor& src, const Tensor& src_pad) {
  return encode(src, src_pad);
}

Tensor RnnSeq2Seq::step(DecodeState& state, const Tensor& tokens, Tensor* attention) {
  auto* st = dynamic_cast<RnnDecodeState*>(&state);
  ATTN_CHECK(st != nullptr, "rnn-attention: step() expected the state returned by this model's start()");
  ATTN_CHECK(tokens.defined() && tokens.dim() == 1 && tokens.dtype() == DType::i64 && tokens.size(0) == st->batch(),
             "rnn-attention: expected tokens (", st->batch(), ") i64, got shape ",
             tokens.defined() ? shape_str(tokens.shape()) : "undefined");
  const Tensor ht = decode(*st, drop->forward(tgt_embed->forward(tokens)), attention);
  return output_proj->forward(drop->forward(ht));
}

}  // namespace attn::models

// Translation inference: see include/attn/infer/translate.h.
#include "attn/infer/translate.h"

#include <algorithm>
#include <cstdio>

#include "attn/autograd/grad_mode.h"
#include "attn/core/error.h"
#include "attn/core/json_config.h"
#include "attn/io/base64.h"
#include "attn/io/checkpoint.h"
#include "attn/models/decode.h"
#include "attn/nn/init.h"

namespace attn::infer {


Translator::Translator(std::shared_ptr<models::Seq2SeqModel> model, std::unique_ptr<text::Tokenizer> tok,
                       nlohmann::json meta)
    : model_(std::move(model)), tok_(std::move(tok)), meta_(std::move(meta)) {
  ATTN_CHECK(model_ && tok_, "Translator: expected a model and a tokenizer");
  ATTN_CHECK(model_->vocab_size() == tok_->vocab_size(), "Translator: the model's vocabulary (", model_->vocab_size(),
             ") differs from the tokenizer's (", tok_->vocab_size(), ")");
}

std::vector<int64_t> Translator::encode_source(const std::string& s) const {
  ATTN_CHECK(!s.empty(), "translate: the source text is empty");
  std::vector<int64_t> ids = tok_->encode(s);
  ATTN_CHECK(!ids.empty(), "translate: the source text '", s, "' has no tokens");
  const int64_t cap = model_->max_length() - 1;
  if (int64_t(ids.size()) > cap) {
    std::fprintf(stderr, "attn: warning: the source has %zu tokens, more than the model's maximum %lld; "
                         "translating its first %lld\n", ids.size(), (long long)cap, (long long)cap);
    ids.resize(size_t(cap));
  }
  return ids;
}

namespace {

// The most target tokens (eos included) for a source of `source_tokens`: max_len when > 0, else
// about twice the source, within the model's maximum.
int64_t target_cap(const models::Seq2SeqModel& model, size_t source_tokens, int64_t max_len) {
  return max_len > 0 ? max_len : std::min<int64_t>(model.max_length() - 1, int64_t(source_tokens) * 2 + 10);
}

}  // namespace

std::vector<std::string> Translator::translate(const std::vector<std::string>& sources, int64_t beam,
                                               double length_penalty, int64_t max_len, int64_t batch) const {
  ATTN_CHECK(beam >= 1 && batch >= 1, "translate: expected beam >= 1 and batch >= 1, got ", beam, " and ", batch);
  NoGradGuard ng;
  const bool was = model_->is_training();
  model_->eval();
  std::vector<std::vector<int64_t>> ids(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) ids[i] = encode_source(sources[i]);
  // Sorted by length so each batch pads little; results go back to input order.
  std::vector<size_t> order(sources.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids[a].size() < ids[b].size(); });
  std::vector<std::string> out(sources.size());
  for (size_t s = 0, e = 0; s < order.size(); s = e) {
    e = std::min(order.size(), s + size_t(batch));
    // Beam search runs each batch to one cap, and a search to a longer cap is not the search to a
    // shorter one cut short (its final step and its early stop depend on the cap): a beam batch holds
    // only sentences of one cap, so that a sentence translates the same in any batch. Greedy
    // decoding is cut per row below (its tokens do not depend on the cap).
    if (beam > 1) {
      const int64_t first = target_cap(*model_, ids[order[s]].size(), max_len);
      for (size_t k = s + 1; k < e; ++k)
        if (target_cap(*model_, ids[order[k]].size(), max_len) != first) {
          e = k;
          break;
        }
    }
    size_t S = 0;
    for (size_t k = s; k < e; ++k) S = std::max(S, ids[order[k]].size());
    const int64_t B = int64_t(e - s);
    Tensor src = Tensor::zeros({B, int64_t(S)}, DType::i64);
    Tensor pad = Tensor::zeros({B, int64_t(S)}, DType::u8);
    for (size_t k = s; k < e; ++k) {
      const auto& v = ids[order[k]];
      int64_t* row = src.data<int64_t>() + (k - s) * S;
      uint8_t* prow = pad.data<uint8_t>() + (k - s) * S;
      for (size_t j = 0; j < S; ++j) {
        if (j < v.size()) row[j] = v[j];
        else prow[j] = 1;
      }
    }
    // Targets a little longer than the source, within the model's maximum.
    const int64_t cap = target_cap(*model_, S, max_len);
    models::DecodeResult r = beam == 1 ? models::greedy_decode(*model_, src, pad, cap)
                                       : models::beam_search(*model_, src, pad,
                                                             {.beam = beam, .length_penalty = length_penalty, .max_len = cap});
    for (size_t k = s; k < e; ++k) {
      // Each row's own cap (about twice its source), so a row translates the same in any batch.
      std::vector<int64_t> t = r.tokens[k - s];
      const size_t own = size_t(target_cap(*model_, ids[order[k]].size(), max_len));
      if (t.size() > own) t.resize(own);
      out[order[k]] = tok_->decode(t);
    }
  }
  model_->train(was);
  return out;
}

Alignment Translator::align(const std::string& source, int64_t beam) const {
  NoGradGuard ng;
  const bool was = model_->is_training();
  model_->eval();
  std::vector<int64_t> ids = encode_source(source);
  const int64_t S = int64_t(ids.size());
  Tensor src = Tensor::from_vector(ids, {1, S});
  Tensor pad = Tensor::zeros({1, S}, DType::u8);
  const int64_t cap = std::min<int64_t>(model_->max_length() - 1, S * 2 + 10);
  models::DecodeResult r = beam == 1 ? models::greedy_decode(*model_, src, pad, cap, true)
                                     : models::beam_search(*model_, src, pad,
                                                           {.beam = beam, .max_len = cap, .with_attention = true});
  Alignment a;
  for (int64_t id : ids) a.src_pieces.push_back(tok_->id_to_piece(id));
  for (int64_t id : r.tokens[0]) a.tgt_pieces.push_back(tok_->id_to_piece(id));
  a.translation = tok_->decode(r.tokens[0]);
  ATTN_CHECK(!r.attention.empty() && r.attention[0].defined(), "align: the decoder returned no attention weights");
  a.weights = r.attention[0].contiguous();
  // One row per generated token, eos included: label the last row "</s>" when eos ended the output.
  if (a.weights.size(0) == int64_t(a.tgt_pieces.size()) + 1) a.tgt_pieces.push_back("</s>");
  ATTN_CHECK(a.weights.size(0) == int64_t(a.tgt_pieces.size()), "align: ", a.weights.size(0),
             " rows of attention for ", a.tgt_pieces.size(), " target tokens");
  model_->train(was);
  return a;
}

text::BleuScore Translator::bleu(const std::vector<data::TextPair>& pairs, int64_t beam, double length_penalty,
                                 std::vector<std::string>* hypotheses) const {
  std::vector<std::string> src, ref;
  for (const auto& p : pairs) {
    src.push_back(p.src);
    ref.push_back(p.tgt);
  }
  std::vector<std::string> hyp = translate(src, beam, length_penalty);
  text::BleuScore s = text::corpus_bleu(hyp, ref);
  if (hypotheses) *hypotheses = std::move(hyp);
  return s;
}

namespace {

// The metadata's "kind" ("" when absent or not a string: an image checkpoint writes none).
std::string checkpoint_kind(const nlohmann::json& meta) {
  return meta.contains("kind") && meta["kind"].is_string() ? meta["kind"].get<std::string>() : "";
}

}  // namespace

bool is_translation_checkpoint(const std::string& checkpoint) {
  return checkpoint_kind(io::read_checkpoint_metadata(checkpoint)) == kTranslationCheckpoint;
}

Translator load_translator(const std::string& checkpoint, io::CheckpointWeights weights) {
  nlohmann::json meta = io::read_checkpoint_metadata(checkpoint);
  ConfigReader r(meta, "checkpoint '" + checkpoint + "'");
  if (checkpoint_kind(meta) != kTranslationCheckpoint) {
    std::string what = "no translation model";
    if (meta.contains("config") && meta["config"].is_object() && meta["config"].contains("model") &&
        meta["config"]["model"].is_string())
      what = "the image model '" + meta["config"]["model"].get<std::string>() + "'";
    fail("'", checkpoint, "' holds ", what, ", not a translation model (expected a checkpoint written by "
         "`attn train --model transformer|rnn-attention`)");
  }
  ConfigReader cfg = r.object("config");
  const std::string name = cfg.get<std::string>("model");
  ATTN_CHECK(r.has("tokenizer"), "'", checkpoint, "': the translation checkpoint has no tokenizer");
  auto tok = text::Tokenizer::deserialize(io::base64_decode(r.get<std::string>("tokenizer"), "checkpoint tokenizer"));
  std::shared_ptr<models::Seq2SeqModel> model;
  // The file opened once: its header tells the parameters' shapes before any weight is read.
  const io::SafetensorsReader file = io::open_checkpoint(checkpoint);
  ATTN_CHECK(weights == io::CheckpointWeights::model || io::checkpoint_has_ema(file), "'", checkpoint,
             "' has no EMA weights (its run was trained without --ema-decay)");
  try {
    // The strict load below overwrites every parameter: leave them unfilled (pages never touched),
    // so that a config claiming a model far larger than the file costs address space, not memory,
    // until the shapes below refuse it.
    nn::init::SkipRandomInit skip(nn::init::SkipRandomInit::Fill::none);
    model = models::create_seq2seq(name, cfg.json());
  } catch (const Error& e) {
    fail("checkpoint '", checkpoint, "': ", e.what());
  }
  nn::Module::ShapeList shapes;
  for (const io::SafetensorsEntry& e : file.entries())
    if (std::optional<std::string> k = io::checkpoint_weight_key(e.name, weights)) shapes.emplace_back(*k, e.shape);
  const std::string why = model->shape_mismatch(shapes, /*strict=*/true, /*max_listed=*/5);
  if (!why.empty()) fail("load_translator: '", checkpoint, "' is for another model: ", why);
  model->load_state_dict(file, {.strict = true,
                                .key = [weights](const std::string& k) { return io::checkpoint_weight_key(k, weights); }});
  model->eval();
  return Translator(std::move(model), std::move(tok), std::move(meta));
}

}  // namespace attn::infer

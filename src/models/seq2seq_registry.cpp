// The registry of translation models: a name and a JSON config rebuild any of them (checkpoints
// store the config).
#include <string>

#include "attn/core/error.h"
#include "attn/models/rnn_seq2seq.h"
#include "attn/models/seq2seq.h"
#include "attn/models/transformer.h"
#include "attn/ops/indexing.h"

namespace attn::models {

Tensor Seq2SeqModel::forward_rows(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in, const Tensor& rows) {
  const Tensor logits = forward(src, src_pad, tgt_in);
  return index_select(logits.reshape({-1, logits.size(-1)}), 0, rows);
}

std::vector<std::string> seq2seq_names() { return {"transformer", "rnn-attention"}; }

std::shared_ptr<Seq2SeqModel> create_seq2seq(const std::string& name, const nlohmann::json& overrides) {
  ATTN_CHECK(overrides.is_object(), "create_seq2seq: expected a JSON object of config overrides, got ",
             overrides.dump());
  nlohmann::json cfg = overrides;
  if (cfg.contains("model")) {
    ATTN_CHECK(cfg["model"] == name, "create_seq2seq: the config names model ", cfg["model"].dump(),
               " but '", name, "' was asked for");
  }
  cfg["model"] = name;
  if (name == "transformer") return make_transformer_seq2seq(cfg);
  if (name == "rnn-attention") return make_rnn_seq2seq(cfg);
  std::string known;
  for (const auto& n : seq2seq_names()) known += (known.empty() ? "" : ", ") + n;
  fail("unknown translation model '", name, "' (known: ", known, ")");
}

}  // namespace attn::models

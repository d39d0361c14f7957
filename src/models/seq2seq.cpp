// What every translation model shares: the row-selecting forward, and the typed registry lookup.
#include "attn/models/seq2seq.h"

#include <string>

#include "attn/core/error.h"
#include "attn/ops/indexing.h"

namespace attn::models {

Tensor Seq2SeqModel::forward_rows(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in, const Tensor& rows) {
  const Tensor logits = forward(src, src_pad, tgt_in);
  return index_select(logits.reshape({-1, logits.size(-1)}), 0, rows);
}

std::shared_ptr<Seq2SeqModel> create_seq2seq(const std::string& name, const nlohmann::json& overrides) {
  if (!has_model(name) || model_entry(name).task != kTranslation) {
    std::string known;
    for (const auto& n : model_names(kTranslation)) known += (known.empty() ? "" : ", ") + n;
    fail("unknown translation model '", name, "' (known: ", known, ")");
  }
  auto m = std::dynamic_pointer_cast<Seq2SeqModel>(create(name, overrides));
  ATTN_CHECK(m != nullptr, "create_seq2seq: the registry entry '", name, "' did not make a translation model");
  return m;
}

}  // namespace attn::models

// The fill-mask pipeline (attn/infer/fill_mask.h).
#include "attn/infer/fill_mask.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "attn/autograd/grad_mode.h"
#include "attn/core/error.h"

namespace attn::infer {

namespace {

// The text for a message: at most 80 bytes, cut before a UTF-8 continuation byte.
std::string fill_mask_quoted(std::string_view text) {
  if (text.size() <= 80) return "'" + std::string(text) + "'";
  size_t n = 77;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return "'" + std::string(text.substr(0, n)) + "...'";
}

// The top_k of softmax(logits) (V values), most probable first (equal ones by id).
std::vector<std::pair<double, int64_t>> fill_mask_top(const float* logits, int64_t V, int64_t top_k) {
  const double mx = *std::max_element(logits, logits + V);
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(double(logits[v]) - mx);
  std::vector<int64_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  const size_t k = size_t(std::min(top_k, V));
  std::partial_sort(order.begin(), order.begin() + ptrdiff_t(k), order.end(), [&](int64_t a, int64_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  std::vector<std::pair<double, int64_t>> top;
  for (size_t i = 0; i < k; ++i) top.emplace_back(std::exp(double(logits[order[i]]) - mx) / sum, order[i]);
  return top;
}

}  // namespace

FillMaskResult fill_mask(const BertPipeline& p, std::string_view text, const FillMaskOptions& o) {
  const models::BertArchitecture arch = p.model->cfg().architecture;
  ATTN_CHECK(arch == models::BertArchitecture::pretraining || arch == models::BertArchitecture::masked_lm,
             "fill-mask: the model ", p.model_name, " is a ", models::bert_architecture_name(arch),
             ", which has no masked-language head (BertForMaskedLM or BertForPreTraining has)");
  ATTN_CHECK(o.top_k >= 1, "fill-mask: expected top_k >= 1, got ", o.top_k);
  text::BertEncodeOptions eo;
  eo.truncation = o.truncation;
  eo.max_length = p.max_length;
  const text::BertEncoding e = p.tokenizer.encode(text, eo);
  FillMaskResult r;
  r.ids = e.ids;
  r.truncated = e.truncated;
  const int64_t mask = p.tokenizer.mask_id();
  for (size_t t = 0; t < e.ids.size(); ++t)
    if (e.ids[t] == mask) r.positions.push_back(int64_t(t));
  ATTN_CHECK(!r.positions.empty(), "fill-mask: no ", p.tokenizer.config().mask_token, " token in the text ",
             fill_mask_quoted(text), e.truncated ? " after truncation to " + std::to_string(p.max_length) + " tokens" : "");
  Tensor logits;
  {
    NoGradGuard ng;
    logits = p.model->forward({text::to_inputs({e}).input_ids}).prediction_logits.contiguous();   // (1, T, V)
  }
  const int64_t V = logits.size(2);
  const bool single = r.positions.size() == 1;
  for (int64_t pos : r.positions) {
    std::vector<FillMaskCandidate> row;
    for (const auto& [score, id] : fill_mask_top(logits.data<float>() + pos * V, V, o.top_k)) {
      std::vector<int64_t> filled = e.ids;
      filled[size_t(pos)] = id;
      std::erase(filled, p.tokenizer.pad_id());
      row.push_back({score, id, p.tokenizer.decode({id}), p.tokenizer.decode(filled, /*skip_special_tokens=*/single)});
    }
    r.masks.push_back(std::move(row));
  }
  return r;
}

}  // namespace attn::infer

// Sentence embeddings from a BERT (attn/infer/embed.h).
#include "attn/infer/embed.h"

#include <algorithm>
#include <numeric>

#include "attn/autograd/grad_mode.h"
#include "attn/core/error.h"

namespace attn::infer {

Pooling parse_pooling(const std::string& s) {
  if (s == "mean") return Pooling::mean;
  if (s == "cls") return Pooling::cls;
  if (s == "pooler") return Pooling::pooler;
  fail("embed: expected pooling mean, cls or pooler, got '", s, "'");
}

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::mean: return "mean";
    case Pooling::cls: return "cls";
    case Pooling::pooler: return "pooler";
  }
  return "?";
}

namespace {

// The batch's encodings padded on the right to the longest (padding id, type 0, mask 0).
text::BertInputs embed_padded_inputs(std::vector<text::BertEncoding> batch, int64_t pad_id) {
  size_t T = 0;
  for (const auto& e : batch) T = std::max(T, e.size());
  for (auto& e : batch) {
    e.ids.resize(T, pad_id);
    e.token_type_ids.resize(T, 0);
    e.attention_mask.resize(T, 0);
  }
  return text::to_inputs(batch);
}

// Pools one batch's outputs into rows of `out` (N, H): out[rows[b]] for sample b.
void embed_pool_batch(const models::BertOutput& y, const std::vector<text::BertEncoding>& batch,
                const std::vector<size_t>& rows, Pooling pooling, float* out, int64_t H) {
  const Tensor x = (pooling == Pooling::pooler ? y.pooler_output : y.last_hidden_state).contiguous();
  const int64_t T = pooling == Pooling::pooler ? 1 : x.size(1);
  for (size_t b = 0; b < batch.size(); ++b) {
    float* dst = out + int64_t(rows[b]) * H;
    const float* src = x.data<float>() + int64_t(b) * T * H;   // (T, H) of sample b; pooler: (1, H)
    if (pooling != Pooling::mean) {
      std::copy(src, src + H, dst);
      continue;
    }
    std::vector<double> sum(size_t(H), 0.0);
    int64_t n = 0;
    for (size_t t = 0; t < batch[b].size(); ++t) {
      if (!batch[b].attention_mask[t]) continue;
      ++n;
      for (int64_t h = 0; h < H; ++h) sum[size_t(h)] += src[int64_t(t) * H + h];
    }
    for (int64_t h = 0; h < H; ++h) dst[h] = float(sum[size_t(h)] / double(std::max<int64_t>(n, 1)));
  }
}

}  // namespace

Tensor embed(const BertPipeline& p, const std::vector<std::string>& texts, const EmbedOptions& o) {
  ATTN_CHECK(o.batch_size >= 1, "embed: expected batch_size >= 1, got ", o.batch_size);
  models::BertModel& bert = p.model->bert();
  ATTN_CHECK(o.pooling != Pooling::pooler || bert.has_pooler(), "embed: pooling 'pooler' needs a model with a "
             "pooler (BertModel, BertForPreTraining, BertForSequenceClassification); ", p.model_name, " is a ",
             models::bert_architecture_name(p.model->cfg().architecture), " (use mean or cls)");
  text::BertEncodeOptions eo;
  eo.truncation = o.truncation;
  eo.max_length = p.max_length;
  std::vector<text::BertEncoding> enc;
  enc.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    try {
      enc.push_back(p.tokenizer.encode(texts[i], eo));
    } catch (const Error& e) {
      fail("embed: text ", o.first_number + i, ": ", e.what());
    }
  }
  const int64_t H = p.model->cfg().hidden_size;
  Tensor out = Tensor::zeros({int64_t(texts.size()), H});
  // Shortest first: each batch is padded to its longest, so similar lengths waste the least.
  std::vector<size_t> order(texts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return enc[a].size() < enc[b].size(); });
  NoGradGuard ng;
  for (size_t start = 0; start < order.size(); start += size_t(o.batch_size)) {
    const size_t end = std::min(order.size(), start + size_t(o.batch_size));
    std::vector<size_t> rows(order.begin() + ptrdiff_t(start), order.begin() + ptrdiff_t(end));
    std::vector<text::BertEncoding> batch;
    for (size_t r : rows) batch.push_back(enc[r]);
    const text::BertInputs in = embed_padded_inputs(batch, p.tokenizer.pad_id());
    const models::BertOutput y = bert.forward({in.input_ids, in.token_type_ids, in.attention_mask});
    embed_pool_batch(y, batch, rows, o.pooling, out.data<float>(), H);
  }
  return out;
}

}  // namespace attn::infer

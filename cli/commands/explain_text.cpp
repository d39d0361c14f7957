// attn explain CKPT --text "..." [--layer L] [--head H] --out map.png; see explain_text.h.
#include "explain_text.h"

#include <algorithm>
#include <cstdio>

#include "attn/attn.h"
#include "attn/viz/explain.h"
#include "attn/viz/heatmap.h"

namespace attn::cli {

namespace {

// (NH, T, T) -> (T, T): head h, or the heads fused.
Tensor text_head_map(const Tensor& maps, std::optional<int64_t> head, viz::HeadFusion fusion) {
  if (head) return maps.select(0, *head).contiguous();
  const int64_t NH = maps.size(0), TT = maps.size(1) * maps.size(2);
  const std::vector<float> a = maps.contiguous().to_vector<float>();
  std::vector<float> w(a.begin(), a.begin() + TT);
  for (int64_t h = 1; h < NH; ++h)
    for (int64_t i = 0; i < TT; ++i) {
      const float v = a[size_t(h * TT + i)];
      float& x = w[size_t(i)];
      x = fusion == viz::HeadFusion::max ? std::max(x, v) : fusion == viz::HeadFusion::min ? std::min(x, v) : x + v;
    }
  if (fusion == viz::HeadFusion::mean)
    for (float& x : w) x /= float(NH);
  return Tensor::from_vector(w, {maps.size(1), maps.size(2)});
}

}  // namespace

void explain_text(const infer::BertSource& source, const TextExplainOptions& o) {
  const viz::HeadFusion fusion = viz::parse_head_fusion(o.fusion);
  const infer::BertPipeline p = infer::load_bert_pipeline(source);
  const int64_t L = p.model->cfg().num_hidden_layers, NH = p.model->cfg().num_attention_heads;
  ATTN_CHECK(o.layer >= -L && o.layer < L, "explain: expected --layer in [0, ", L, ") (or -", L,
             "..-1 counting from the last), got ", o.layer, ": ", p.model_name, " has ", L, " layers");
  const int64_t layer = o.layer < 0 ? L + o.layer : o.layer;
  ATTN_CHECK(!o.head || (*o.head >= 0 && *o.head < NH), "explain: expected --head in [0, ", NH, "), got ",
             o.head.value_or(0), ": ", p.model_name, " has ", NH, " heads");
  text::BertEncodeOptions eo;
  eo.truncation = o.truncation;
  eo.max_length = p.max_length;
  const text::BertEncoding e = p.tokenizer.encode(o.text, eo);
  models::BertOutput y;
  {
    NoGradGuard ng;
    y = p.model->bert().forward({text::to_inputs({e}).input_ids}, {.attentions = true});
  }
  const Tensor w = text_head_map(y.attentions[size_t(layer)].select(0, 0), o.head, fusion);   // (T, T)
  std::vector<std::string> tokens;
  for (int64_t id : e.ids) tokens.push_back(p.tokenizer.id_to_token(id));
  viz::AlignmentOptions ao;
  ao.cell = o.cell;
  const viz::AlignmentLayout lay = viz::alignment_layout(w.size(0), w.size(1), tokens, tokens, ao);
  viz::write_alignment_png(o.out, w, tokens, tokens, ao);
  const std::string heads = o.head ? "head " + std::to_string(*o.head) : "heads fused by " + o.fusion;
  if (o.json) {
    std::vector<std::vector<float>> rows;
    const std::vector<float> flat = w.to_vector<float>();
    for (size_t i = 0; i < tokens.size(); ++i)
      rows.emplace_back(flat.begin() + ptrdiff_t(i * tokens.size()), flat.begin() + ptrdiff_t((i + 1) * tokens.size()));
    nlohmann::json j = {{"text", o.text}, {"out", o.out}, {"layer", layer}, {"tokens", tokens}, {"attention", rows},
                        {"width", lay.width}, {"height", lay.height}, {"truncated", e.truncated}};
    j["head"] = o.head ? nlohmann::json(*o.head) : nlohmann::json(o.fusion);
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s: layer %lld, %s: %zu x %zu tokens (rows attend to columns); wrote %s (%lld x %lld)\n",
                p.model_name.c_str(), (long long)layer, heads.c_str(), tokens.size(), tokens.size(), o.out.c_str(),
                (long long)lay.width, (long long)lay.height);
  }
}

}  // namespace attn::cli

// attn classify-text CKPT "text" ["text b"]: the label and class probabilities of a fine-tuned
// BERT sequence classifier (attn train --task classify; infer/text_classify.h); two texts make a
// sentence pair (token types 0 and 1).
#include <algorithm>
#include <cstdio>

#include "attn/attn.h"
#include "attn/infer/text_classify.h"
#include "../commands.h"
#include "bert_flags.h"

namespace attn::cli {

namespace {

void print_classes(const infer::TextModel& m, const infer::TextClass& c, int64_t topk) {
  std::printf("%s (%.4f)\n", c.label.c_str(), double(c.probs[size_t(c.index)]));
  std::vector<size_t> order(c.probs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return c.probs[a] > c.probs[b]; });
  for (size_t i = 0; i < order.size() && int64_t(i) < topk; ++i)
    std::printf("  %.4f  %s\n", double(c.probs[order[i]]), m.labels[order[i]].c_str());
}

}  // namespace

void add_classify_text(CLI::App& app) {
  auto* c = app.add_subcommand("classify-text", "the label of a text or a text pair (a fine-tuned BERT classifier)");
  struct Opts {
    std::string ckpt;
    std::vector<std::string> texts;
    int64_t topk = 5;
    bool json = false;
    int threads = 0;
    std::string dtype = "f32";
  };
  auto o = std::make_shared<Opts>();
  c->add_option("checkpoint", o->ckpt, "a checkpoint of attn train --task classify")->required();
  c->add_option("texts", o->texts, "TEXT [TEXT_B]: one text, or a sentence pair")->required();
  c->add_option("--topk", o->topk, "probabilities listed (most probable first)")->capture_default_str();
  c->add_flag("--json", o->json, "one JSON object: {label, index, probs: {label: p}}");
  c->add_option("--threads", o->threads);
  add_dtype_flag(c, o->dtype);
  c->callback([o] {
    apply_threads(o->threads);
    ATTN_CHECK(o->texts.size() <= 2, "classify-text: expected one text or a pair (two), got ", o->texts.size(), " texts");
    const infer::TextModel m = infer::load_text_model(o->ckpt, parse_linear_dtype(o->dtype, "classify-text"));
    const infer::TextClass r = infer::classify_text(m, o->texts[0], o->texts.size() > 1 ? o->texts[1] : "");
    if (o->json) {
      nlohmann::json probs = nlohmann::json::object();
      for (size_t i = 0; i < r.probs.size(); ++i) probs[m.labels[i]] = r.probs[i];
      std::printf("%s\n", nlohmann::json({{"label", r.label}, {"index", r.index}, {"probs", probs}}).dump().c_str());
    } else {
      print_classes(m, r, o->topk);
    }
  });
}

}  // namespace attn::cli

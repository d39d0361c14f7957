// attn fill-mask CKPT "The [MASK] of the world." [--topk 5] [--json]: the most probable tokens for each
// [MASK] of each text, as Hugging Face's fill-mask pipeline gives them (attn/infer/fill_mask.h).
// attn fill-mask --weights bert/model.safetensors ... reads transformers' weights (config.json and
// vocab.txt beside them). Texts: the arguments, else the lines of --input FILE or of standard input.
#include <cstdio>

#include "attn/attn.h"
#include "attn/infer/fill_mask.h"
#include "../commands.h"
#include "bert_flags.h"

namespace attn::cli {

namespace {

// "fill-mask: text N: ..." from an error about one text.
[[noreturn]] void fail_for_text(size_t i, const Error& e) {
  std::string m = e.what();
  if (m.starts_with("fill-mask: ")) m = m.substr(11);
  fail("fill-mask: text ", i + 1, ": ", m);
}

nlohmann::json result_json(const std::string& text, const infer::FillMaskResult& r) {
  nlohmann::json masks = nlohmann::json::array();
  for (const auto& row : r.masks) {
    nlohmann::json cands = nlohmann::json::array();
    for (const infer::FillMaskCandidate& c : row)
      cands.push_back({{"score", c.score}, {"token", c.token}, {"token_str", c.token_str}, {"sequence", c.sequence}});
    masks.push_back(std::move(cands));
  }
  return {{"text", text}, {"masks", masks}, {"truncated", r.truncated}};
}

void print_result(const std::string& text, const infer::FillMaskResult& r) {
  std::printf("%s\n", text.c_str());
  for (size_t m = 0; m < r.masks.size(); ++m) {
    const char* indent = "  ";
    if (r.masks.size() > 1) {
      std::printf("  mask %zu of %zu (token %lld):\n", m + 1, r.masks.size(), (long long)r.positions[m]);
      indent = "    ";
    }
    for (const infer::FillMaskCandidate& c : r.masks[m])
      std::printf("%s%.4f  %-12s %s\n", indent, c.score, c.token_str.c_str(), c.sequence.c_str());
  }
}

}  // namespace

void add_fill_mask(CLI::App& app) {
  auto* c = app.add_subcommand("fill-mask", "the most probable tokens for each [MASK] of a text (a masked-language BERT)");
  struct Opts {
    std::vector<std::string> inputs;
    BertFlags bert;
    std::string input;
    int64_t topk = 5;
    bool json = false, no_truncation = false;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("inputs", o->inputs, "CKPT TEXT... (an attn checkpoint of a BERT), or TEXT... with --weights; no "
                "TEXT: the lines of --input or of standard input");
  add_bert_flags(c, o->bert);
  c->add_option("--input", o->input, "a file of texts, one per line ('-': standard input)");
  c->add_option("--topk", o->topk, "tokens per [MASK]")->capture_default_str();
  c->add_flag("--json", o->json, "one JSON object per text: {text, masks: [[{score, token, token_str, sequence}]]}");
  c->add_flag("--no-truncation", o->no_truncation, "a text longer than the model's max length is an error (default: "
              "truncated, with a warning)");
  c->add_option("--threads", o->threads);
  c->callback([o] {
    apply_threads(o->threads);
    std::vector<std::string> texts = o->inputs;
    const infer::BertSource src = o->bert.take_source(texts, "fill-mask");
    if (!o->input.empty()) {
      ATTN_CHECK(texts.empty(), "fill-mask: give texts as arguments or --input, not both");
      texts = read_lines(o->input, "fill-mask");
    } else if (texts.empty()) {
      texts = read_lines("-", "fill-mask");
    }
    ATTN_CHECK(!texts.empty(), "fill-mask: expected at least one text with a [MASK] (arguments, --input or standard "
               "input), got none");
    ATTN_CHECK(o->topk >= 1, "fill-mask: expected --topk >= 1, got ", o->topk);
    const infer::BertPipeline p = infer::load_bert_pipeline(src);
    const infer::FillMaskOptions fo{o->topk, !o->no_truncation};
    for (size_t i = 0; i < texts.size(); ++i) {
      infer::FillMaskResult r;
      try {
        r = infer::fill_mask(p, texts[i], fo);
      } catch (const Error& e) {
        fail_for_text(i, e);
      }
      if (o->json)
        std::printf("%s\n", result_json(texts[i], r).dump().c_str());
      else
        print_result(texts[i], r);
      std::fflush(stdout);
    }
  });
}

}  // namespace attn::cli

// attn tag CKPT "text": the words (and WordPiece tokens) of a text with a fine-tuned token classifier's
// labels (attn train --task tag; infer/text_classify.h), and the labelled spans they make (BIO).
#include <cstdio>

#include "attn/attn.h"
#include "attn/infer/text_classify.h"
#include "../commands.h"
#include "bert_flags.h"

namespace attn::cli {

void add_tag(CLI::App& app) {
  auto* c = app.add_subcommand("tag", "the labels of a text's words (a fine-tuned BERT token classifier)");
  struct Opts {
    std::string ckpt, text, dtype = "f32";
    bool json = false, tokens = false;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("checkpoint", o->ckpt, "a checkpoint of attn train --task tag")->required();
  c->add_option("text", o->text, "the text")->required();
  c->add_flag("--tokens", o->tokens, "also list every WordPiece token with its label");
  c->add_flag("--json", o->json, "one JSON object: {words, tags, tokens, token_tags, spans}");
  c->add_option("--threads", o->threads);
  add_dtype_flag(c, o->dtype);
  c->callback([o] {
    apply_threads(o->threads);
    const infer::TextModel m = infer::load_text_model(o->ckpt, parse_linear_dtype(o->dtype, "tag"));
    const infer::TaggedText t = infer::tag_text(m, o->text);
    if (o->json) {
      nlohmann::json spans = nlohmann::json::array();
      for (const infer::Span& s : t.spans) spans.push_back({{"first", s.first}, {"last", s.last}, {"type", s.type}});
      std::printf("%s\n", nlohmann::json({{"words", t.words}, {"tags", t.tags}, {"tokens", t.tokens},
                                          {"token_tags", t.token_tags}, {"spans", spans}}).dump().c_str());
      return;
    }
    for (size_t w = 0; w < t.words.size(); ++w) std::printf("%-20s %s\n", t.words[w].c_str(), t.tags[w].c_str());
    for (const infer::Span& s : t.spans) {
      std::string text;
      for (int64_t w = s.first; w <= s.last; ++w) text += (w > s.first ? " " : "") + t.words[size_t(w)];
      std::printf("span: %s [%s]\n", text.c_str(), s.type.c_str());
    }
    if (o->tokens)
      for (size_t k = 0; k < t.tokens.size(); ++k)
        std::printf("  token %-16s %s\n", t.tokens[k].c_str(), t.token_tags[k].c_str());
  });
}

}  // namespace attn::cli

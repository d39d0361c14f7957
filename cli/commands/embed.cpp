// attn embed CKPT [--pooling mean|cls|pooler] < lines.txt: one JSON array (the sentence embedding) per
// input line, in order (attn/infer/embed.h). attn embed --weights bert/model.safetensors ... reads
// transformers' weights. Lines: --input FILE, else standard input.
#include <charconv>
#include <cstdio>

#include "attn/attn.h"
#include "attn/infer/embed.h"
#include "../commands.h"
#include "bert_flags.h"

namespace attn::cli {

namespace {

// Lines embedded per call: the outputs of a call are held until printed.
constexpr size_t kEmbedChunk = 1024;

// One row as a JSON array, each float in its shortest round-trip form.
std::string vector_json(const float* v, int64_t n) {
  std::string s = "[";
  char buf[32];
  for (int64_t i = 0; i < n; ++i) {
    if (i) s += ',';
    const auto r = std::to_chars(buf, buf + sizeof buf, v[i]);
    s.append(buf, r.ptr);
  }
  return s + "]";
}

}  // namespace

void add_embed(CLI::App& app) {
  auto* c = app.add_subcommand("embed", "a sentence embedding (JSON array) for each input line, from a BERT");
  struct Opts {
    std::vector<std::string> inputs;
    BertFlags bert;
    std::string input = "-", pooling = "mean";
    int64_t batch = 32;
    bool no_truncation = false;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("checkpoint", o->inputs, "an attn checkpoint of a BERT (or --weights)");
  add_bert_flags(c, o->bert);
  c->add_option("--input", o->input, "a file of texts, one per line ('-': standard input)")->capture_default_str();
  c->add_option("--pooling", o->pooling, "mean (over the attended tokens, as sentence-transformers) | cls (the last "
                "hidden state of [CLS]) | pooler (tanh pooler output)")->capture_default_str();
  c->add_option("--batch-size", o->batch, "texts per forward pass (padded to the longest; results do not depend "
                "on it)")->capture_default_str();
  c->add_flag("--no-truncation", o->no_truncation, "a text longer than the model's max length is an error (default: "
              "truncated, with a warning)");
  c->add_option("--threads", o->threads);
  c->callback([o] {
    apply_threads(o->threads);
    std::vector<std::string> args = o->inputs;
    const infer::BertSource src = o->bert.take_source(args, "embed");
    ATTN_CHECK(args.empty(), "embed: texts come from --input or standard input, one per line; unexpected argument '",
               args.empty() ? "" : args.front(), "'");
    infer::EmbedOptions eo;
    eo.pooling = infer::parse_pooling(o->pooling);
    eo.batch_size = o->batch;
    eo.truncation = !o->no_truncation;
    ATTN_CHECK(eo.batch_size >= 1, "embed: expected --batch-size >= 1, got ", eo.batch_size);
    const std::vector<std::string> lines = read_lines(o->input, "embed");
    const infer::BertPipeline p = infer::load_bert_pipeline(src);
    for (size_t start = 0; start < lines.size(); start += kEmbedChunk) {
      const std::vector<std::string> chunk(lines.begin() + ptrdiff_t(start),
                                           lines.begin() + ptrdiff_t(std::min(lines.size(), start + kEmbedChunk)));
      eo.first_number = start + 1;
      const Tensor v = infer::embed(p, chunk, eo);
      const int64_t H = v.size(1);
      for (int64_t i = 0; i < v.size(0); ++i) std::printf("%s\n", vector_json(v.data<float>() + i * H, H).c_str());
      std::fflush(stdout);
    }
  });
}

}  // namespace attn::cli

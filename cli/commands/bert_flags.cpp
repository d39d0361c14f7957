// The flags of the text commands -> infer::BertSource; see bert_flags.h.
#include "bert_flags.h"

#include <fstream>
#include <iostream>

#include "attn/core/error.h"

namespace attn::cli {

void add_vocab_flag(CLI::App* c, BertFlags& f) {
  c->add_option("--vocab", f.vocab, "WordPiece vocab.txt (default: vocab.txt beside the weights, else "
                "bert-base-uncased's for uncased models; tokenizer_config.json beside it is read too)");
}

void add_bert_flags(CLI::App* c, BertFlags& f) {
  c->add_option("--weights", f.weights, "transformers' BERT weights (model.safetensors; config.json beside them)");
  c->add_option("--model", f.model, "registry name of the weights' base config (default bert-base-uncased)");
  c->add_option("--config", f.config, "Hugging Face config.json (default: config.json beside --weights)");
  c->add_option("--model-config", f.model_config, "JSON object of config overrides for --weights");
  add_vocab_flag(c, f);
}

infer::BertSource BertFlags::take_source(std::vector<std::string>& args, const char* cmd) const {
  infer::BertSource s;
  s.vocab = vocab;
  if (weights.empty()) {
    ATTN_CHECK(model.empty() && config.empty() && model_config.empty(), cmd, ": --model, --config and "
               "--model-config go with --weights; an attn checkpoint describes its own model");
    ATTN_CHECK(!args.empty(), cmd, ": expected an attn checkpoint (CKPT) or --weights W");
    s.checkpoint = args.front();
    args.erase(args.begin());
    return s;
  }
  s.weights = weights;
  if (!model.empty()) s.model = model;
  s.config = config;
  if (!model_config.empty()) {
    try {
      s.model_config = nlohmann::json::parse(model_config);
    } catch (const std::exception& e) {
      fail(cmd, ": --model-config is not valid JSON: ", e.what());
    }
  }
  return s;
}

std::vector<std::string> read_lines(const std::string& path, const char* cmd) {
  std::ifstream f;
  std::istream* in = &std::cin;
  if (path != "-") {
    f.open(path, std::ios::binary);
    ATTN_CHECK(f.good(), cmd, ": cannot read '", path, "'");
    in = &f;
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(*in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace attn::cli

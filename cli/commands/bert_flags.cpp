// The flags of the text commands -> infer::BertSource; see bert_flags.h.
#include "bert_flags.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "attn/core/error.h"

namespace attn::cli {

void add_vocab_flag(CLI::App* c, BertFlags& f) {
  c->add_option("--vocab", f.vocab, "WordPiece vocab.txt (default: vocab.txt beside the weights, else "
                "bert-base-uncased's for uncased models; tokenizer_config.json beside it is read too)");
}

void add_dtype_flag(CLI::App* c, std::string& dtype) {
  c->add_option("--dtype", dtype, "f32 | bf16 (Linear weights in bf16) | int8 (Linear weights int8 per channel, "
                "activations int8 per token)")->capture_default_str();
}

DType parse_linear_dtype(const std::string& dtype, const char* cmd) {
  ATTN_CHECK(dtype == "f32" || dtype == "bf16" || dtype == "int8", cmd, ": expected --dtype f32, bf16 or int8, got '",
             dtype, "'");
  return dtype == "bf16" ? DType::bf16 : dtype == "int8" ? DType::i8 : DType::f32;
}

void add_bert_flags(CLI::App* c, BertFlags& f) {
  c->add_option("--weights", f.weights, "transformers' BERT weights (model.safetensors; config.json beside them)");
  c->add_option("--model", f.model, "registry name of the weights' base config (default bert-base-uncased)");
  c->add_option("--config", f.config, "Hugging Face config.json (default: config.json beside --weights)");
  c->add_option("--model-config", f.model_config, "JSON object of config overrides for --weights");
  add_vocab_flag(c, f);
  add_dtype_flag(c, f.dtype);
}

infer::BertSource BertFlags::take_source(std::vector<std::string>& args, const char* cmd) const {
  infer::BertSource s;
  s.vocab = vocab;
  s.linear_dtype = parse_linear_dtype(dtype, cmd);
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

void copy_bert_tokenizer_files(const std::string& in, const std::string& out, const char* cmd) {
  namespace fs = std::filesystem;
  for (const char* name : {"vocab.txt", "tokenizer_config.json"}) {
    const fs::path from = fs::path(in).parent_path() / name, to = fs::path(out).parent_path() / name;
    if (!fs::is_regular_file(from) || fs::exists(to)) continue;
    std::error_code ec;
    fs::copy_file(from, to, ec);
    ATTN_CHECK(!ec, cmd, ": cannot copy ", from.string(), " to ", to.string(), ": ", ec.message());
    std::printf("copied %s -> %s\n", from.string().c_str(), to.string().c_str());
  }
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

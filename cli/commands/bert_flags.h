// Where the text commands (fill-mask, embed, explain --text) get their BERT and its vocabulary: an attn
// checkpoint as the first positional argument, or transformers' weights with --weights (config.json
// beside them), as an infer::BertSource (attn/infer/bert_pipeline.h).
//
//   BertFlags f;  add_bert_flags(c, f);                                      // at registration
//   infer::BertPipeline p = infer::load_bert_pipeline(f.take_source(args, "fill-mask"));
//   std::vector<std::string> lines = read_lines("-", "embed");              // '-': standard input
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "attn/infer/bert_pipeline.h"

namespace attn::cli {

struct BertFlags {
  std::string weights, model, config, model_config, vocab;
  std::string dtype = "f32";

  // The source, taken out of `args` (its first element is the checkpoint unless --weights is given);
  // what is left are the command's texts. Flag errors name `cmd`.
  infer::BertSource take_source(std::vector<std::string>& args, const char* cmd) const;
};

// --weights --model --config --model-config --vocab --dtype.
void add_bert_flags(CLI::App* c, BertFlags& f);
// --dtype f32 | bf16 | int8 (the Linear weights), for the commands that take no other BERT flags.
void add_dtype_flag(CLI::App* c, std::string& dtype);
// DType::f32, bf16 or i8 for a --dtype value; errors name `cmd`.
DType parse_linear_dtype(const std::string& dtype, const char* cmd);
// --model --config --model-config are shared with the image flags of the same command (explain):
// only --vocab is added.
void add_vocab_flag(CLI::App* c, BertFlags& f);

// Copies vocab.txt and tokenizer_config.json from beside `in` to beside `out` (a Hugging Face model
// directory's, or a checkpoint's), where the text commands look for them; files already there are kept.
void copy_bert_tokenizer_files(const std::string& in, const std::string& out, const char* cmd);

// The lines of a file ('-': standard input), without their "\n" or "\r\n".
std::vector<std::string> read_lines(const std::string& path, const char* cmd);

}  // namespace attn::cli

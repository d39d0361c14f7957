// A BERT with its tokenizer for the text commands (attn/infer/bert_pipeline.h).
#include "attn/infer/bert_pipeline.h"

#include <algorithm>
#include <filesystem>

#include "attn/core/env.h"
#include "attn/core/error.h"
#include "attn/models/pretrained.h"

namespace attn::infer {

namespace {

namespace fs = std::filesystem;

std::string vocab_beside(const std::string& path, const char* name) {
  return (fs::path(path).parent_path() / name).string();
}

std::string vocab_if_exists(const std::string& path) { return fs::is_regular_file(path) ? path : ""; }

// Whether the registry entry `name` is a model of the uncased vocabulary.
bool bert_uncased_model(const std::string& name) {
  if (!models::has_model(name)) return false;
  return name.find("uncased") != std::string::npos ||
         models::model_entry(name).description.find("uncased") != std::string::npos;
}

struct BertVocabFiles {
  std::string vocab, tokenizer_config;
};

BertVocabFiles find_bert_vocab(const BertSource& s, const std::string& model_name) {
  if (!s.vocab.empty()) {
    ATTN_CHECK(fs::is_regular_file(s.vocab), "bert: the vocabulary '", s.vocab, "' (--vocab) does not exist");
    return {s.vocab, vocab_if_exists(vocab_beside(s.vocab, "tokenizer_config.json"))};
  }
  const std::string& weights = s.checkpoint.empty() ? s.weights : s.checkpoint;
  const std::string next = vocab_beside(weights, "vocab.txt");
  if (fs::is_regular_file(next)) return {next, vocab_if_exists(vocab_beside(weights, "tokenizer_config.json"))};
  const std::string cache = env::bert_vocab_cache();
  if (bert_uncased_model(model_name)) {
    if (fs::is_regular_file(cache)) return {cache, ""};
    fail("bert: no vocabulary for ", model_name, " ('", weights, "'): expected ", next, ", --vocab V, or ",
         "bert-base-uncased's vocab.txt at ", cache, " (scripts/fetch_bert_vocab.sh writes it)");
  }
  fail("bert: no vocabulary for ", model_name, " ('", weights, "'): expected ", next, " or --vocab V (",
       "bert-base-uncased's vocab.txt at ", cache, " fits uncased models only)");
}

}  // namespace

BertPipeline load_bert_pipeline(const BertSource& s) {
  ATTN_CHECK(s.checkpoint.empty() != s.weights.empty(), "bert: expected an attn checkpoint or transformers' "
             "weights, got ", s.checkpoint.empty() ? "neither" : "both");
  models::PretrainedSource src;
  if (!s.checkpoint.empty()) {
    src = models::PretrainedSource::checkpoint(s.checkpoint);
  } else {
    src = models::PretrainedSource::foreign(s.weights, s.model);
    src.hf_config = s.config;
    src.model_config = s.model_config;
  }
  src.image_classifier_only = false;
  src.linear_dtype = s.linear_dtype;
  models::Pretrained p = models::load_pretrained(src);
  auto model = std::dynamic_pointer_cast<models::BertPreTrainedModel>(p.module);
  ATTN_CHECK(model != nullptr, "bert: '", src.path, "' holds ", p.model_name, ", not a BERT");
  const BertVocabFiles f = find_bert_vocab(s, p.model_name);
  text::BertTokenizer tok = text::BertTokenizer::from_files(f.vocab, f.tokenizer_config);
  ATTN_CHECK(tok.vocab_size() == model->cfg().vocab_size, "bert: the vocabulary '", f.vocab, "' has ",
             tok.vocab_size(), " tokens, but the model ", p.model_name, " ('", src.path, "') has vocab_size ",
             model->cfg().vocab_size, ": they are not each other's");
  const int64_t max_length = std::min(tok.config().model_max_length, model->cfg().max_position_embeddings);
  return {std::move(model), std::move(tok), p.model_name, f.vocab, f.tokenizer_config, max_length};
}

}  // namespace attn::infer

// Running a trained translation model: batched greedy or beam-search translation, the cross-attention
// alignment of one sentence, and corpus BLEU over sentence pairs.
//
//   infer::Translator t = infer::load_translator("runs/tf/checkpoint.safetensors");
//   std::string es = t.translate({"In the beginning God created the heaven and the earth."})[0];
//   infer::Alignment a = t.align("And God said, Let there be light");   // a.weights (T, S)
//   text::BleuScore b = t.bleu(pairs, /*beam=*/4);
//
// A checkpoint written by the translation task (train/tasks/translation.h) holds the model config,
// the tokenizer and the weights; nothing else is needed.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/data/text_pairs.h"
#include "attn/io/checkpoint.h"
#include "attn/models/seq2seq.h"
#include "attn/text/bleu.h"
#include "attn/text/tokenizer.h"

namespace attn::infer {

struct Alignment {
  std::vector<std::string> src_pieces, tgt_pieces;   // tokens as the tokenizer spells them
  Tensor weights;                                    // (T, S) f32: target token t attends source s
  std::string translation;
};

class Translator {
 public:
  Translator(std::shared_ptr<models::Seq2SeqModel> model, std::unique_ptr<text::Tokenizer> tok,
             nlohmann::json meta);
  // Batched; beam 1 = greedy. A sentence's translation does not depend on the batch it falls in:
  // its target cap is its own (max_len, or about twice its source), and beam search batches only
  // sentences of one cap. An empty source throws; a source longer than the model's maximum is
  // truncated with a warning on stderr.
  std::vector<std::string> translate(const std::vector<std::string>& sources, int64_t beam = 4,
                                     double length_penalty = 0.6, int64_t max_len = 0, int64_t batch = 64) const;
  Alignment align(const std::string& source, int64_t beam = 1) const;
  text::BleuScore bleu(const std::vector<data::TextPair>& pairs, int64_t beam = 4, double length_penalty = 0.6,
                       std::vector<std::string>* hypotheses = nullptr) const;
  models::Seq2SeqModel& model() const { return *model_; }
  const text::Tokenizer& tokenizer() const { return *tok_; }
  const nlohmann::json& metadata() const { return meta_; }   // the checkpoint's

 private:
  std::vector<int64_t> encode_source(const std::string& s) const;
  std::shared_ptr<models::Seq2SeqModel> model_;
  std::unique_ptr<text::Tokenizer> tok_;
  nlohmann::json meta_;
};

// The kind a translation checkpoint's metadata names.
inline constexpr const char* kTranslationCheckpoint = "seq2seq";

// Throws a clear attn::Error for a checkpoint that is not a translation model's (e.g. an image
// classifier's). `weights`: the model's own, or the EMA weights of a run trained with --ema-decay (an
// error when the checkpoint has none).
Translator load_translator(const std::string& checkpoint, io::CheckpointWeights weights = io::CheckpointWeights::model);
bool is_translation_checkpoint(const std::string& checkpoint);

}  // namespace attn::infer

// Training, evaluating and running translation models (models/seq2seq.h) end to end: sentence
// pairs, a SentencePiece (or character) vocabulary trained on the training split only, token-budget
// batches, label-smoothed cross-entropy, Adam with the inverse-square-root warm-up of "Attention Is
// All You Need", a progress bar in target tokens per second, a JSONL log, an SVG curve, atomic
// checkpoints with exact resume, and corpus BLEU (sacreBLEU's default) on the held-out test split.
//
//   train::Seq2SeqConfig cfg;  cfg.model = "transformer";  cfg.data = "bible-en-es";
//   cfg.model_config = {{"d_model", 256}, {"encoder_layers", 3}, {"decoder_layers", 3}};
//   train::Seq2SeqResult r = train::train_seq2seq(cfg);           // r.test_bleu, r.checkpoint
//   train::Translator t = train::load_translator(r.checkpoint);
//   std::string es = t.translate({"In the beginning God created the heaven and the earth."})[0];
//
// Data (cfg.data): "bible-en-es" (KJV -> Reina-Valera 1909 from Debian's SWORD modules, data/
// text_pairs.h; dev and test 1,000 verses each), "synthetic:copy|reverse|dates", or the path of a
// TSV file of "source<TAB>target" lines (dev/test cut from it the same way). The split is a pure
// function of (data, seed), so `eval` and a resumed run see the same test sentences.
// Checkpoints (OUT/checkpoint.safetensors) are self-contained: the model config, the tokenizer
// (serialized, base64 in the metadata) and the data spec travel with the weights.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/data/seq_batch.h"
#include "attn/data/text_pairs.h"
#include "attn/models/decode.h"
#include "attn/models/seq2seq.h"
#include "attn/text/bleu.h"
#include "attn/text/tokenizer.h"

namespace attn::train {

struct Seq2SeqConfig {
  std::string model = "transformer";                        // transformer | rnn-attention
  nlohmann::json model_config = nlohmann::json::object();   // overrides on the model's defaults
  std::string data = "bible-en-es";                         // see above
  std::string sword_dir = "/usr/share/sword";
  int64_t synthetic_size = 20000;                           // pairs of a synthetic task
  int64_t dev_count = 1000, test_count = 1000;              // (synthetic / TSV: min with 10% each)
  std::string tokenizer = "auto";   // auto (sentencepiece for text, char for synthetic) | unigram | bpe | char
  int64_t vocab_size = 8000;        // SentencePiece's (joint source + target vocabulary)
  int64_t max_tokens = 4096;        // per batch: B * max(S, T)
  int64_t max_length = 128;         // longer training pairs are dropped (counted)
  int64_t epochs = 10;
  int64_t max_steps = 0;            // 0: epochs
  double max_minutes = 0;           // > 0: stop training after this wall time (then evaluate)
  double lr = 1.0;                  // scale of the inverse-sqrt schedule: lr * d^-0.5 min(s^-0.5, s w^-1.5)
  int64_t warmup_steps = 4000;
  double label_smoothing = 0.1;
  double clip_grad = 0.0;
  double weight_decay = 0.0;
  double beta2 = 0.98;              // Adam (0.9, 0.98, 1e-9) as the paper
  uint64_t seed = 0;
  std::string out = "runs/translate";
  int64_t checkpoint_every = 0;     // steps; 0: at each evaluation only
  int64_t eval_every = 0;           // steps between dev evaluations; 0: each epoch
  int64_t eval_sentences = 200;     // dev sentences decoded (greedy) for the dev BLEU in the log
  int64_t beam = 4;                 // final test decoding (1: greedy)
  double length_penalty = 0.6;
  int64_t limit_train = 0;          // first N training pairs only (0: all)
  int64_t limit_test = 0;           // first N test pairs only (0: all)
  bool resume = false;
  int64_t stop_after = 0;           // stop after this step as if killed (tests)
  bool progress = true;
  bool quiet = false;
};

struct Seq2SeqResult {
  int64_t steps = 0;
  double test_bleu = 0, dev_bleu = 0;    // dev: greedy on eval_sentences; test: beam search
  std::string test_bleu_line;            // sacreBLEU's format
  double test_exact_match = 0;           // fraction of test hypotheses equal to their reference
                                         // (what the synthetic tasks, one "word" each, are judged by)
  double final_train_loss = 0;
  double tokens_per_second = 0;          // non-padded target tokens per second of training
  double train_seconds = 0;
  int64_t train_pairs = 0;
  std::vector<double> step_losses;       // every step run in this call
  std::string checkpoint, log, plot, metrics, samples;
};

Seq2SeqResult train_seq2seq(const Seq2SeqConfig& cfg);

// The data splits of a data spec (as the trainer makes them).
data::PairSplits load_translation_data(const std::string& data, uint64_t seed, const std::string& sword_dir,
                                       int64_t synthetic_size, int64_t dev_count, int64_t test_count);

// The training loss of one batch: label-smoothed cross-entropy of model.forward(src, src_pad, tgt_in)
// against tgt_out, averaged over the non-pad target tokens (what train_seq2seq minimises).
Tensor seq2seq_batch_loss(models::Seq2SeqModel& model, const data::SeqBatch& batch, double label_smoothing);

// The tokenizer the trainer builds for cfg (cfg.tokenizer, cfg.vocab_size, cfg.data) from the
// training pairs only: a joint SentencePiece model over sources and targets, or characters.
std::unique_ptr<text::Tokenizer> train_translation_tokenizer(const Seq2SeqConfig& cfg,
                                                             const std::vector<data::TextPair>& train);

// A trained model with its tokenizer, ready to translate.
struct Alignment {
  std::vector<std::string> src_pieces, tgt_pieces;   // tokens as the tokenizer spells them
  Tensor weights;                                    // (T, S) f32: target token t attends source s
  std::string translation;
};

class Translator {
 public:
  Translator(std::shared_ptr<models::Seq2SeqModel> model, std::unique_ptr<text::Tokenizer> tok,
             nlohmann::json meta);
  // Batched; beam 1 = greedy. An empty source throws; a source longer than the model's maximum is
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

// Throws a clear attn::Error for a checkpoint that is not a translation model's (e.g. an image
// classifier's).
Translator load_translator(const std::string& checkpoint);
bool is_translation_checkpoint(const std::string& checkpoint);

}  // namespace attn::train

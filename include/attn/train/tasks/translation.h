// The translation task of the Trainer (train/trainer.h): sentence pairs, a SentencePiece (or
// character) vocabulary trained on the training split only, token-budget batches, label-smoothed
// cross-entropy, Adam with the inverse-square-root warm-up of "Attention Is All You Need", and
// corpus BLEU (sacreBLEU's default) on the held-out test split.
//
//   train::TrainConfig cfg;  cfg.model = "transformer";  cfg.data = "bible-en-es";
//   cfg.model_config = {{"d_model", 256}, {"encoder_layers", 3}, {"decoder_layers", 3}};
//   train::TrainResult r = train::train(cfg);             // r.metric("test_bleu"), r.checkpoint
//   infer::Translator t = infer::load_translator(r.checkpoint);
//
// Data (cfg.data): "bible-en-es" (KJV -> Reina-Valera 1909 from Debian's SWORD modules, data/
// text_pairs.h; dev and test 1,000 verses each), "synthetic:copy|reverse|dates", or the path of a
// TSV file of "source<TAB>target" lines (dev/test cut from it the same way). The split is a pure
// function of (data, seed), so `eval` and a resumed run see the same test sentences.
// Checkpoints (OUT/checkpoint.safetensors) are self-contained: the model config, the tokenizer
// (serialized, base64 in the metadata, "tokenizer") and the data spec ("data") travel with the weights,
// under "kind": "seq2seq". The log records train_loss, dev_loss and dev_bleu (greedy, on
// eval_sentences dev pairs); metrics.json the test BLEU (beam search) and exact-match rate; OUT/
// test_translations.txt every test source, reference and hypothesis.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attn/data/seq_batch.h"
#include "attn/data/text_pairs.h"
#include "attn/models/seq2seq.h"
#include "attn/text/tokenizer.h"
#include "attn/train/trainer.h"

namespace attn::train {

// A run's data spec, as a translation checkpoint keeps it (its metadata "data").
struct TranslationDataSpec {
  std::string data;
  uint64_t seed = 0;
  int64_t synthetic_size = 0, dev_count = 0, test_count = 0;
};
// The data spec of a checkpoint's metadata, every value checked: attn::ConfigError names `context`
// (e.g. "checkpoint 'run/checkpoint.safetensors'") and the key ("data.seed").
TranslationDataSpec translation_data_spec(const nlohmann::json& metadata, const std::string& context);

// The data splits of a data spec (as the task makes them).
data::PairSplits load_translation_data(const std::string& data, uint64_t seed, const std::string& sword_dir,
                                       int64_t synthetic_size, int64_t dev_count, int64_t test_count);

// The training loss of one batch: label-smoothed cross-entropy of model.forward(src, src_pad, tgt_in)
// against tgt_out, averaged over the non-pad target tokens.
Tensor seq2seq_batch_loss(models::Seq2SeqModel& model, const data::SeqBatch& batch, double label_smoothing);

// The tokenizer the task builds (kind: auto | unigram | bpe | char; auto is char for synthetic:
// data, unigram otherwise) from the training pairs only: a joint SentencePiece model over sources
// and targets, or characters.
std::unique_ptr<text::Tokenizer> train_translation_tokenizer(const std::string& kind, int64_t vocab_size,
                                                             const std::string& data,
                                                             const std::vector<data::TextPair>& train);

// The task (registered as models::kTranslation).
std::unique_ptr<Task> make_translation_task(const TrainConfig& cfg);

}  // namespace attn::train

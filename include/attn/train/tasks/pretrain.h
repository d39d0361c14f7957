// BERT pre-training, the Trainer's task "pretrain" (train/trainer.h): masked-LM + next-sentence
// prediction on English text, instances as Google's create_pretraining_data.py builds them
// (data/pretraining.h), the model a BertForPreTraining (models/bert.h).
//
//   train::TrainConfig cfg;  cfg.model = "bert-mini";  cfg.task = "pretrain";  cfg.data = "bible+wordnet";
//   cfg.max_minutes = 15;
//   train::TrainResult r = train::train(cfg);   // r.metric("val_mlm_accuracy"), r.metric("val_nsp_accuracy")
//   // the checkpoint serves fill-mask: attn fill-mask r.checkpoint "In the beginning God created the [MASK]."
//
// `attn train --model bert-mini --task pretrain --data bible+wordnet` (BERT models, whose registry
// kind is "masked-lm", train on this task without --task too). Data: "bible", "wordnet" or
// "bible+wordnet" (the default); the vocabulary is bert-base-uncased's vocab.txt (PretrainTaskConfig::
// vocab, else scripts/fetch_bert_vocab.sh's cache: env::bert_vocab_cache()), whose size must be the
// model's vocab_size. The documents are split (seeded, data/pretraining.h split_documents) into
// training and validation; each side builds its instances from its own documents only (a random next
// segment of validation comes from validation documents). Training instances take dupe_factor passes;
// an epoch is every training instance once, in the order randperm(N, Generator(seed ^ "epoch") at
// offset epoch << 40), cut into batches of `batch` sequences (the last partial one dropped), each
// padded to its longest instance. Masks: dynamic (default) draws each instance's masks afresh every
// epoch, static fixes them per instance (per duplicate); validation's are static, with their own seed.
// Everything is a function of (seed, settings, micro-batch number), so a resumed run equals an
// uninterrupted one.
// Loss: the MLM cross-entropy over the batch's masked positions (the MLM head runs at those rows only,
// BertOutputOptions::mlm_rows) + the NSP cross-entropy over its sequences (HF BertForPreTraining's
// total_loss). Evaluation: val_loss, val_mlm_loss, val_mlm_accuracy (argmax at masked positions),
// val_nsp_loss, val_nsp_accuracy on the validation instances (the first limit_eval ones, when set);
// the log also has train_loss, train_mlm_accuracy and train_nsp_accuracy of the window.
// Defaults: AdamW lr 5e-4, betas (0.9, 0.999), eps 1e-6, weight decay 0.01 (not on LayerNorms and
// biases), linear warm-up over half an epoch then linear decay to 0 (--schedule cosine: timm's cosine),
// 10 epochs, out runs/<model>-pretrain. The checkpoint has "task": "pretrain" and the data spec ("data":
// data, seed, the instance and masking settings, batch); --resume rebuilds the data from that spec, so
// the data flags of the resuming call do not matter (only --limit-eval and the sources' directories do).
// Errors (attn::Error): a model that is not a BERT, or not a BertForPreTraining; the vocabulary missing
// (naming scripts/fetch_bert_vocab.sh) or of another size than the model's; the data's (unknown name,
// unreadable source, no text); fewer training instances than a batch.
#pragma once
#include <memory>

#include "attn/data/pretraining.h"
#include "attn/models/bert.h"
#include "attn/train/trainer.h"

namespace attn::train {

inline constexpr const char* kPretrainTask = "pretrain";

// One batch's losses and counts.
struct PretrainingLoss {
  Tensor loss;                 // mlm + nsp (0-d, differentiable)
  Tensor mlm_loss, nsp_loss;   // 0-d each
  int64_t mlm_correct = 0, nsp_correct = 0;   // argmax == label
  int64_t num_masked = 0, num_sequences = 0;
};

// The forward pass and loss of one batch (train or eval mode as the model is).
PretrainingLoss pretraining_loss(models::BertPreTrainedModel& model, const data::PretrainingBatch& batch);

// The model `name` (+ overrides) as pre-training needs it: a BERT with the BertForPreTraining heads;
// anything else is an error naming what was found.
std::shared_ptr<models::BertPreTrainedModel> make_pretraining_model(const std::string& name,
                                                                    const nlohmann::json& overrides);

// The vocab.txt to use: `path`, or env::bert_vocab_cache(); missing: an error naming
// scripts/fetch_bert_vocab.sh.
std::string pretraining_vocab(const std::string& path);

std::unique_ptr<Task> make_pretrain_task(const TrainConfig& cfg);

}  // namespace attn::train

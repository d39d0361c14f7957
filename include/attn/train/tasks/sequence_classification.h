// BERT fine-tuning for sentence and sentence-pair classification: the trainer's task "classify"
// (train/trainer.h), and what it shares with sequence labelling ("tag", token_classification.h): the
// data, the model built from a registry BERT or from pre-trained weights, evaluation.
//
//   train::TrainConfig cfg;  cfg.task = "classify";  cfg.model = "bert-mini";  cfg.data = "wordnet-lexname";
//   cfg.init = "runs/pretrain/checkpoint.safetensors";   // optional: pre-trained weights
//   train::TrainResult r = train::train(cfg);   // r.metric("test_accuracy"), r.metric("test_macro_f1")
//   infer::TextModel m = infer::load_text_model(r.checkpoint);   // infer/text_classify.h
//
// Data (cfg.data, data/wordnet_tasks.h): "wordnet-lexname" (a gloss -> its lexicographer file, 45
// classes; metrics accuracy and macro-F1) and "wordnet-pairs" (a gloss and a lemma as a sentence pair,
// token_type_ids 0 / 1 -> whether the gloss defines the lemma: no / yes; accuracy, macro-F1). The
// split is a pure function of (data, seed); texts are cut to cfg.text.max_length tokens.
// Model: BertForSequenceClassification (the pooler's output, dropout, Linear(H, labels)) with
// num_labels and id2label from the data. From scratch: the registry model cfg.model (with
// cfg.model_config) and its initialisation. With cfg.init (an attn checkpoint of any BERT
// architecture, e.g. BertForPreTraining from pre-training, or transformers' model.safetensors with
// config.json beside it, read as cfg.model): the checkpoint's config is the model's (cfg.model_config
// on top, e.g. dropouts), its base model's weights (embeddings, encoder, pooler when it has one) are
// loaded, the heads start fresh; a checkpoint of the same architecture with the same labels loads
// whole (its classifier too), one with other labels is an attn::Error naming both label sets.
// Training: AdamW (lr 3e-4 from scratch, 1e-4 from --init; weight decay 0.01, not on norms and biases),
// linear warm-up over 0.02 epoch (about 30 steps of wordnet-lexname) then cosine decay to 0, 3 epochs, batches of cfg.text.batch examples in a seeded order per epoch,
// cross-entropy with --label-smoothing. Checkpoints keep the model config (id2label included), the
// task ("task": "classify") and its data spec ("text_task": {data, seed, max_length}); the vocabulary
// is copied beside them (OUT/vocab.txt), so `attn classify-text`, `attn tag` and `attn eval` need only
// the checkpoint. The log records train_loss, train_accuracy, val_loss, val_accuracy, val_macro_f1
// (tag: val_span_f1); metrics.json the same on the test split, and the last evaluation's validation numbers.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attn/data/text_classification.h"
#include "attn/infer/text_classify.h"
#include "attn/models/bert.h"
#include "attn/train/trainer.h"

namespace attn::train {

// A text task's data, encoded for its model.
struct TextTaskData {
  std::string name;                   // "wordnet-lexname", ...
  bool tagging = false;               // sequence labelling (labels per token)
  std::vector<std::string> labels;    // by id
  std::vector<data::EncodedText> train, validation, test;
  int64_t dropped = 0;                // tagging: sentences without a labelled word (data/wordnet_tasks.h)
};
// The data of `name` (data/wordnet_tasks.h) encoded with `tok`: the first limit_train training and
// the first limit_eval validation and test examples (0: all; only those are tokenized); an unknown
// name is an attn::Error naming the known ones.
TextTaskData load_text_task_data(const std::string& name, uint64_t seed, const text::BertTokenizer& tok,
                                 int64_t max_length, int64_t limit_train = 0, int64_t limit_eval = 0);

// The training loss: cross-entropy of logits (B, C) against labels (B), or of logits (B, T, C)
// against labels (B, T) with -100 ignored (data::kIgnoreLabel): the mean over the labelled tokens.
Tensor text_task_loss(const Tensor& logits, const Tensor& labels, double label_smoothing);

struct TextEvalResult {
  double loss = 0, accuracy = 0, macro_f1 = 0;   // tagging: over the labelled tokens (first pieces)
  infer::SpanScore span;                          // tagging: word-level spans
  int64_t count = 0;                              // examples
};
// The model on `examples` (eval mode, no gradients; batches of `batch`, similar lengths together).
TextEvalResult evaluate_text_model(models::BertPreTrainedModel& model, const std::vector<data::EncodedText>& examples,
                                   const std::vector<std::string>& labels, bool tagging, int64_t pad_id,
                                   int64_t batch = 64);

std::unique_ptr<Task> make_sequence_classification_task(const TrainConfig& cfg);

}  // namespace attn::train

// BERT fine-tuning for sequence labelling: the trainer's task "tag" (train/trainer.h), the twin of
// "classify" (sequence_classification.h says what they share: the model from scratch or from
// pre-trained weights, checkpoints, the schedule).
//
//   train::TrainConfig cfg;  cfg.task = "tag";  cfg.model = "bert-mini";  cfg.data = "wordnet-supersense";
//   train::TrainResult r = train::train(cfg);   // r.metric("test_span_f1")
//
// Data: "wordnet-supersense" (data/wordnet_tasks.h): WordNet's example sentences, the words that match
// the synset's lemmas tagged B- / I-<lexicographer file>, the others O (91 labels). Model:
// BertForTokenClassification (dropout, Linear(H, labels) at every token). The label of a word sits on
// its first WordPiece; the other pieces, [CLS] and [SEP] carry -100 and are left out of the loss
// (data/text_classification.h). Judged by word-level span F1 (conlleval: exact span and type;
// infer/text_classify.h), with the token accuracy and macro-F1 over the first pieces beside it.
#pragma once
#include <memory>

#include "attn/train/tasks/sequence_classification.h"

namespace attn::train {

std::unique_ptr<Task> make_token_classification_task(const TrainConfig& cfg);

}  // namespace attn::train

// The BERT fine-tuning task behind "classify" and "tag" (sequence_classification.cpp).
#pragma once
#include <memory>

#include "attn/train/trainer.h"

namespace attn::train {

// tagging: BertForTokenClassification on sequence-labelling data; else BertForSequenceClassification.
std::unique_ptr<Task> make_bert_text_task(const TrainConfig& cfg, bool tagging);

}  // namespace attn::train

// The sequence-labelling task "tag" (include/attn/train/tasks/token_classification.h): the BERT text
// task of sequence_classification.cpp with a token classifier.
#include "attn/train/tasks/token_classification.h"

#include "text_task.h"

namespace attn::train {

std::unique_ptr<Task> make_token_classification_task(const TrainConfig& cfg) { return make_bert_text_task(cfg, true); }

}  // namespace attn::train

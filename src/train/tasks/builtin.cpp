// The tasks attn trains, registered under the task kinds the model registry names, and the BERT
// tasks chosen with --task (pretrain, classify, tag).
#include "attn/train/tasks/image_classification.h"
#include "attn/train/tasks/pretrain.h"
#include "attn/train/tasks/sequence_classification.h"
#include "attn/train/tasks/token_classification.h"
#include "attn/train/tasks/translation.h"

namespace attn::train {

void register_builtin_tasks() {
  static const bool done = [] {
    register_task(models::kImageClassification, make_image_classification_task);
    register_task(models::kTranslation, make_translation_task);
    register_task("classify", make_sequence_classification_task);
    register_task("tag", make_token_classification_task);
    register_task(models::kMaskedLM, make_pretrain_task);   // a BERT without --task pre-trains
    register_task(kPretrainTask, make_pretrain_task);
    return true;
  }();
  (void)done;
}

}  // namespace attn::train

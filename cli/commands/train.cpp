// attn train: any registered model on its task (train/trainer.h): image classifiers (optionally with
// DeiT distillation from a teacher checkpoint), translation models, BERT pre-training and BERT
// fine-tuning (--task).
//   attn train --model transformer --data bible-en-es --model-config '{"d_model": 256}' --max-minutes 60
//   attn train --model resnet_fmnist --epochs 10 --augment --out runs/resnet
//   attn train --model deit_fmnist_distilled --teacher runs/resnet/checkpoint.safetensors --distill hard
//   attn train --task pretrain --model bert-mini --data bible+wordnet --max-minutes 60 --out runs/pre
//   attn train --task classify --model bert-mini --data wordnet-lexname --init runs/pre/checkpoint.safetensors
//   attn train --task tag --model bert-mini --data wordnet-supersense --max-steps 500
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "attn/attn.h"
#include "attn/train/trainer.h"
#include "../commands.h"
#include "train_flags.h"

namespace attn::cli {

namespace {

const char* kImageGroup = "image models";
const char* kTranslationGroup = "translation models (--model transformer | rnn-attention)";
const char* kPretrainGroup = "BERT pre-training (--task pretrain, --model bert-mini | bert-small | bert-base-uncased ...)";
const char* kTextGroup = "BERT fine-tuning (--task classify | tag)";

// An option whose value lands in a std::optional (unset: the task's default).
template <class T>
CLI::Option* add_optional(CLI::App* c, const std::string& name, std::optional<T>& target, const std::string& help) {
  return c->add_option_function<T>(name, [&target](const T& v) { target = v; }, help);
}

}  // namespace

void apply_threads(int threads) {
  if (threads > 0) set_num_threads(threads);
}

void add_common_train_flags(CLI::App* c, TrainFlags& f) {
  train::TrainConfig& cfg = f.cfg;
  c->add_option("--model", cfg.model, "model name (see `attn info --list`)")->capture_default_str();
  add_optional(c, "--task", cfg.task, "the task: pretrain (BERT masked-LM + next-sentence pre-training) | classify "
                                      "(BERT sentence / sentence-pair classification) | tag (BERT sequence labelling; "
                                      "classify and tag default to --model bert-mini); default: the model's (image "
                                      "classification, translation; BERT models pre-train)");
  c->add_option("--model-config", f.model_json, "JSON object of config overrides, e.g. '{\"hidden\": [256]}'");
  add_optional(c, "--data", cfg.data,
               "image models: fashion-mnist (default), or a folder DIR: DIR/train/<class>/*.png|jpg and "
               "DIR/test/<class>/... (or val/; without both, validation is a fixed 10% of train/), images resized "
               "to the model's image_size, the class count taken from train/; translation models: bible-en-es "
               "(default), synthetic:<task> or a TSV file; BERT pre-training: bible+wordnet (default), bible or "
               "wordnet; --task classify: wordnet-lexname (default) | wordnet-pairs; --task tag: wordnet-supersense");
  add_optional(c, "--epochs", cfg.epochs, "epochs (default: image 5, translation 10, BERT pre-training 10)");
  c->add_option("--max-steps", cfg.max_steps, "stop after N optimizer steps");
  c->add_option("--max-minutes", cfg.max_minutes, "stop training after this wall time, then evaluate");
  add_optional(c, "--lr", cfg.lr,
               "image: peak learning rate of AdamW warm-up + cosine (default 1e-3); translation: the scale of the "
               "inverse-sqrt schedule (default 1.0); BERT pre-training: peak of the linear warm-up and decay (5e-4); "
               "BERT classify and tag: the peak (3e-4, or 1e-4 when fine-tuning from --init)");
  add_optional(c, "--min-lr", cfg.min_lr, "floor of the decay (default 1e-5; BERT pre-training 0)");
  add_optional(c, "--wd", cfg.weight_decay, "weight decay, not on norms, biases, tokens (default: image 0.05, "
                                            "translation 0, BERT pre-training 0.01)");
  add_optional(c, "--warmup-epochs", cfg.warmup_epochs, "warm-up in epochs (default 1; BERT pre-training 0.5)");
  add_optional(c, "--warmup-steps", cfg.warmup_steps, "warm-up in steps (inverse-sqrt: default 4000; others: "
                                                      "instead of --warmup-epochs)");
  add_optional(c, "--schedule", cfg.schedule, "decay after the warm-up: cosine | linear (default: BERT pre-training "
                                              "linear, image cosine)");
  add_optional(c, "--batch", f.batch, "sequences or images per micro-batch (default: image 128, BERT 32)");
  add_optional(c, "--limit-eval", f.limit_eval, "image, BERT: evaluate on the first N examples");
  add_optional(c, "--vocab", f.vocab, "BERT: vocab.txt (default: beside --init's weights, else bert-base-uncased's "
                                      "from scripts/fetch_bert_vocab.sh's cache)");
  add_optional(c, "--beta2", cfg.beta2, "Adam's beta2 (default: image 0.999, translation 0.98)");
  c->add_option("--label-smoothing", cfg.label_smoothing, "image and translation losses")->capture_default_str();
  c->add_option("--clip-grad", cfg.clip_grad, "global gradient-norm clip (0: off)")->capture_default_str();
  c->add_option("--ema-decay", cfg.ema_decay, "keep an EMA of the weights (0: off; e.g. 0.9998)")->capture_default_str();
  c->add_option("--grad-accum", cfg.grad_accum, "micro-batches per optimizer step")->capture_default_str();
  c->add_flag("--sync-bn", cfg.sync_batch_norm, "under mpirun: batch norm with the statistics of the combined batch "
              "(as PyTorch's SyncBatchNorm); default: each rank's own");
  c->add_option_function<std::string>(
       "--precision", [&cfg](const std::string& s) { cfg.precision = train::parse_precision(s); },
       "f32 | bf16: mixed precision, the GEMMs in bf16 with f32 weights, optimizer state and reductions "
       "(needs a CPU with a native bf16 matmul)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  c->add_option("--seed", cfg.seed)->capture_default_str();
  c->add_option("--threads", f.threads, "threads (default: ATTN_NUM_THREADS or all cores)");
  add_optional(c, "--out", cfg.out, "output directory (default: image runs/default, translation runs/<model>, BERT "
                                          "pre-training runs/<model>-pretrain)");
  c->add_option("--ckpt-every", cfg.checkpoint_every, "also checkpoint every N steps")->capture_default_str();
  c->add_option("--eval-every", cfg.eval_every, "steps between evaluations (0: each epoch)");
  c->add_flag("--resume", cfg.resume, "continue from OUT/checkpoint.safetensors");
  c->add_option("--limit-train", cfg.limit_train, "use only the first N training examples");
}

void add_image_train_flags(CLI::App* c, TrainFlags& f) {
  train::ImageTaskConfig& ic = f.cfg.image;
  const char* g = kImageGroup;
  c->add_option("--data-dir", ic.data_dir, "where the Fashion-MNIST files are")->group(g)->capture_default_str();
  c->add_flag("--augment,!--no-augment", ic.augment, "random crop (padding 2) + flip")->group(g);
  c->add_option("--rand-augment", ic.rand_augment, "RandAugment: number of ops per image (0: off; DeiT: 2)")
      ->group(g)->capture_default_str();
  c->add_option("--rand-augment-magnitude", ic.rand_augment_magnitude, "RandAugment magnitude bin (0..30)")
      ->group(g)->capture_default_str();
  c->add_option("--erase", ic.erase_p, "random erasing probability (DeiT: 0.25)")->group(g)->capture_default_str();
  c->add_option("--mixup", ic.mixup, "Mixup alpha (0: off; DeiT: 0.8)")->group(g)->capture_default_str();
  c->add_option("--cutmix", ic.cutmix, "CutMix alpha (0: off; DeiT: 1.0)")->group(g)->capture_default_str();
  c->add_option("--repeated-aug", ic.repeated_aug,
                "repeated augmentation: each image N times in a row, differently augmented, epochs cut to a multiple of "
                "256 (0: off; DeiT: 3)")->group(g)->capture_default_str();
}

void add_translation_train_flags(CLI::App* c, TrainFlags& f) {
  train::TranslationTaskConfig& tc = f.cfg.translation;
  const char* g = kTranslationGroup;
  c->add_option("--max-tokens", tc.max_tokens, "tokens per batch (B x longest side)")->group(g)->capture_default_str();
  c->add_option("--max-length", tc.max_length, "drop longer training pairs (tokens; BERT fine-tuning: tokens per "
                "sequence, longer ones cut, default 128)")->group(g)->capture_default_str();
  c->add_option("--vocab-size", tc.vocab_size, "SentencePiece vocabulary (joint)")->group(g)->capture_default_str();
  c->add_option("--tokenizer", tc.tokenizer, "auto | unigram | bpe | char")->group(g)->capture_default_str();
  c->add_option("--eval-sentences", tc.eval_sentences, "dev sentences decoded for the logged BLEU")->group(g)
      ->capture_default_str();
  c->add_option("--beam", tc.beam, "beam size for the final test BLEU (1: greedy)")->group(g)->capture_default_str();
  c->add_option("--synthetic-size", tc.synthetic_size, "pairs of a synthetic:<task> dataset")->group(g)
      ->capture_default_str();
  c->add_option("--limit-test", tc.limit_test, "decode only the first N test pairs")->group(g);
}

void add_pretrain_train_flags(CLI::App* c, TrainFlags& f) {
  train::PretrainTaskConfig& pc = f.cfg.pretrain;
  const char* g = kPretrainGroup;
  c->add_option("--max-seq-length", pc.max_seq_length, "tokens per instance")->group(g)->capture_default_str();
  c->add_option("--short-seq-prob", pc.short_seq_prob, "probability of a shorter target length")->group(g)
      ->capture_default_str();
  c->add_option("--masked-lm-prob", pc.masked_lm_prob, "fraction of tokens predicted")->group(g)->capture_default_str();
  c->add_option("--max-predictions", pc.max_predictions_per_seq, "most masked tokens per instance")->group(g)
      ->capture_default_str();
  c->add_option("--dupe-factor", pc.dupe_factor, "passes over the corpus, each with its own segmentation")->group(g)
      ->capture_default_str();
  c->add_option("--masking", pc.masking, "dynamic (masks drawn afresh each epoch) | static (fixed per duplicate)")
      ->check(CLI::IsMember({"dynamic", "static"}))->group(g)->capture_default_str();
  c->add_flag("--whole-word-mask", pc.whole_word_mask, "mask whole words (a word's ## pieces with it)")->group(g);
  c->add_option("--validation-fraction", pc.validation_fraction, "documents held out for validation")->group(g)
      ->capture_default_str();
  c->add_option("--sword-dir", pc.sword_dir, "where the SWORD modules are (the KJV)")->group(g)->capture_default_str();
  c->add_option("--wordnet-dir", pc.wordnet_dir, "WordNet 3.0's dict directory (default: ATTN_WORDNET_DIR or "
                                                 "/usr/share/wordnet)")->group(g);
}

void add_text_train_flags(CLI::App* c, TrainFlags& f) {
  c->add_option("--init", f.cfg.init, "pre-trained weights: an attn checkpoint of a BERT (e.g. from pre-training) or "
                "transformers' model.safetensors (config.json beside it); the encoder is loaded, the head is new")
      ->group(kTextGroup);
}

void finish_train_flags(TrainFlags& f) {
  apply_threads(f.threads);
  if (f.batch) f.cfg.image.batch = f.cfg.pretrain.batch = f.cfg.text.batch = *f.batch;
  if (f.limit_eval) f.cfg.image.limit_eval = f.cfg.pretrain.limit_eval = f.cfg.text.limit_eval = *f.limit_eval;
  if (f.vocab) f.cfg.pretrain.vocab = f.cfg.text.vocab = *f.vocab;
  if (!f.model_json.empty()) {
    auto j = nlohmann::json::parse(f.model_json, nullptr, false);
    ATTN_CHECK(!j.is_discarded() && j.is_object(), "--model-config: expected a JSON object, got '", f.model_json, "'");
    f.cfg.model_config = j;
  }
}

void print_result(const train::TrainResult& r) {
  if (!r.finished) {
    std::printf("stopped after step %lld\n", (long long)r.steps);
    return;
  }
  const nlohmann::json& m = r.metrics;
  if (m.contains("test_accuracy") && !m.contains("test_macro_f1")) {
    std::printf("test accuracy: %.2f%%  (test loss %.4f, val accuracy %.2f%%, %lld steps, %.0f img/s end to end)\n",
                100 * r.metric("test_accuracy"), r.metric("test_loss"), 100 * r.metric("val_accuracy"),
                (long long)r.steps, r.items_per_second);
    if (m.contains("test_accuracy_ema")) std::printf("  EMA weights: %.2f%%\n", 100 * r.metric("test_accuracy_ema"));
    if (m.contains("test_accuracy_cls") && !std::isnan(r.metric("test_accuracy_cls")))
      std::printf("  class head alone: %.2f%%, distillation head alone: %.2f%%\n", 100 * r.metric("test_accuracy_cls"),
                  100 * r.metric("test_accuracy_dist"));
  }
  if (m.contains("test_bleu_line"))
    std::printf("test %s\n  exact match %.2f%%  (%lld steps, %.0f target tokens/s, %.1f min of training)\n",
                m["test_bleu_line"].get<std::string>().c_str(), 100 * r.metric("test_exact_match"), (long long)r.steps,
                r.items_per_second, r.train_seconds / 60);
  if (m.contains("test_macro_f1")) {
    std::printf("test accuracy: %.2f%%, macro-F1 %.4f", 100 * r.metric("test_accuracy"), r.metric("test_macro_f1"));
    if (m.contains("test_span_f1"))
      std::printf(", span F1 %.4f (precision %.4f, recall %.4f)", r.metric("test_span_f1"),
                  r.metric("test_span_precision"), r.metric("test_span_recall"));
    std::printf("  (test loss %.4f, %lld steps, %.0f tokens/s)\n", r.metric("test_loss"), (long long)r.steps,
                r.items_per_second);
  }
  if (m.contains("val_mlm_accuracy"))
    std::printf("validation: MLM accuracy %.2f%% (loss %.4f), NSP accuracy %.2f%% (loss %.4f)  (%lld steps, %.1f "
                "sequences/s, %.1f min of training)\n",
                100 * r.metric("val_mlm_accuracy"), r.metric("val_mlm_loss"), 100 * r.metric("val_nsp_accuracy"),
                r.metric("val_nsp_loss"), (long long)r.steps, r.items_per_second, r.train_seconds / 60);
  std::printf("checkpoint: %s\nlog:        %s\ncurve:      %s\nmetrics:    %s\n", r.checkpoint.c_str(), r.log.c_str(),
              r.plot.c_str(), r.metrics_path.c_str());
  if (m.contains("samples"))   // a file name beside metrics.json
    std::printf("samples:    %s\n",
                (std::filesystem::path(r.metrics_path).parent_path() / m["samples"].get<std::string>()).c_str());
}

void add_train(CLI::App& app) {
  auto* c = app.add_subcommand("train", "train a model");
  auto f = std::make_shared<TrainFlags>();
  add_common_train_flags(c, *f);
  add_image_train_flags(c, *f);
  train::ImageTaskConfig& ic = f->cfg.image;
  c->add_option("--teacher", ic.teacher, "DeiT distillation: the teacher's checkpoint (any attn classifier)")
      ->group(kImageGroup);
  c->add_option("--distill", ic.distill, "distillation: none | soft | hard (into the distillation head of a "
                                          "distilled model, e.g. deit_fmnist_distilled, else into the class head; "
                                          "none trains the class head only)")
      ->check(CLI::IsMember({"none", "soft", "hard"}))
      ->group(kImageGroup)
      ->capture_default_str();
  c->add_option("--alpha", ic.alpha, "distillation weight: (1 - alpha) CE + alpha distill")->group(kImageGroup)
      ->capture_default_str();
  c->add_option("--tau", ic.tau, "soft distillation temperature")->group(kImageGroup)->capture_default_str();
  add_translation_train_flags(c, *f);
  add_pretrain_train_flags(c, *f);
  add_text_train_flags(c, *f);
  c->callback([c, f] {
    finish_train_flags(*f);
    // A flag of another task's group is refused: it would silently do nothing.
    const std::string kind = models::has_model(f->cfg.model) ? models::model_entry(f->cfg.model).task : "";
    const bool text = f->cfg.task && (*f->cfg.task == "classify" || *f->cfg.task == "tag");
    const bool translation = !text && kind == models::kTranslation;
    const bool pretrain =
        !text && (f->cfg.task.value_or(kind) == "pretrain" || (!f->cfg.task && kind == models::kMaskedLM));
    const std::string mine = text ? kTextGroup : pretrain ? kPretrainGroup : translation ? kTranslationGroup : kImageGroup;
    for (const CLI::Option* o : c->get_options()) {
      const std::string grp = o->get_group();
      const bool task_group = grp == kImageGroup || grp == kTranslationGroup || grp == kPretrainGroup || grp == kTextGroup;
      const bool shared = text && o->check_lname("max-length");   // fine-tuning's tokens per sequence
      ATTN_CHECK(shared || !task_group || grp == mine || o->count() == 0, "train: ", o->get_name(), " applies to ", grp,
                 ", not to ", text ? "--task " + *f->cfg.task : f->cfg.model);
    }
    ATTN_CHECK(!translation || (!f->batch && !f->limit_eval), "train: --batch and --limit-eval apply to image and "
               "BERT models, not to ", f->cfg.model, " (translation batches are sized with --max-tokens)");
    if (text && c->count("--max-length")) f->cfg.text.max_length = f->cfg.translation.max_length;
    // BERT fine-tuning from scratch without --model: bert-mini (the default model is an image classifier).
    if (text && c->count("--model") == 0 && f->cfg.init.empty()) f->cfg.model = "bert-mini";
    const train::TrainResult r = train::train(f->cfg);
    if (dist::world().rank() == 0) print_result(r);   // under mpirun: once, by the rank that wrote the files
  });
}

}  // namespace attn::cli

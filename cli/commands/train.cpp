// attn train: any registered model on its task (train/trainer.h): image classifiers (optionally with
// DeiT distillation from a teacher checkpoint), translation models, and BERT fine-tuning (--task).
//   attn train --model transformer --data bible-en-es --model-config '{"d_model": 256}' --max-minutes 60
//   attn train --model resnet_fmnist --epochs 10 --augment --out runs/resnet
//   attn train --model deit_fmnist_distilled --teacher runs/resnet/checkpoint.safetensors --distill hard
//   attn train --task classify --model bert-mini --data wordnet-lexname --init runs/pre/checkpoint.safetensors
//   attn train --task tag --model bert-mini --data wordnet-supersense --max-steps 500
#include <algorithm>
#include <cmath>
#include <iterator>
#include <cstdio>
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
  add_optional(c, "--task", cfg.task,
               "the task (default: the model's): classify (BERT sentence / sentence-pair classification) | tag "
               "(BERT sequence labelling); their --model defaults to bert-mini");
  c->add_option("--model-config", f.model_json, "JSON object of config overrides, e.g. '{\"hidden\": [256]}'");
  add_optional(c, "--data", cfg.data,
               "image models: fashion-mnist (default), or a folder DIR: DIR/train/<class>/*.png|jpg and "
               "DIR/test/<class>/... (or val/; without both, validation is a fixed 10% of train/), images resized "
               "to the model's image_size, the class count taken from train/; translation models: bible-en-es "
               "(default), synthetic:<task> or a TSV file; --task classify: wordnet-lexname (default) | "
               "wordnet-pairs; --task tag: wordnet-supersense");
  add_optional(c, "--epochs", cfg.epochs, "epochs (default: image 5, translation 10)");
  c->add_option("--max-steps", cfg.max_steps, "stop after N optimizer steps");
  c->add_option("--max-minutes", cfg.max_minutes, "stop training after this wall time, then evaluate");
  add_optional(c, "--lr", cfg.lr,
               "image: peak learning rate of AdamW warm-up + cosine (default 1e-3); translation: the scale of the "
               "inverse-sqrt schedule (default 1.0)");
  add_optional(c, "--min-lr", cfg.min_lr, "cosine floor (default 1e-5)");
  add_optional(c, "--wd", cfg.weight_decay, "weight decay, not on norms, biases, tokens (default: image 0.05, "
                                            "translation 0)");
  add_optional(c, "--warmup-epochs", cfg.warmup_epochs, "cosine warm-up in epochs (default 1)");
  add_optional(c, "--warmup-steps", cfg.warmup_steps, "inverse-sqrt warm-up in steps (default 4000)");
  add_optional(c, "--beta2", cfg.beta2, "Adam's beta2 (default: image 0.999, translation 0.98)");
  c->add_option("--label-smoothing", cfg.label_smoothing)->capture_default_str();
  c->add_option("--clip-grad", cfg.clip_grad, "global gradient-norm clip (0: off)")->capture_default_str();
  c->add_option("--ema-decay", cfg.ema_decay, "keep an EMA of the weights (0: off; e.g. 0.9998)")->capture_default_str();
  c->add_option("--grad-accum", cfg.grad_accum, "micro-batches per optimizer step")->capture_default_str();
  c->add_option_function<std::string>(
       "--precision", [&cfg](const std::string& s) { cfg.precision = train::parse_precision(s); },
       "f32 (bf16 mixed precision is not available yet)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  c->add_option("--seed", cfg.seed)->capture_default_str();
  c->add_option("--threads", f.threads, "threads (default: ATTN_NUM_THREADS or all cores)");
  add_optional(c, "--out", cfg.out, "output directory (default: image runs/default, translation runs/<model>)");
  c->add_option("--ckpt-every", cfg.checkpoint_every, "also checkpoint every N steps")->capture_default_str();
  c->add_option("--eval-every", cfg.eval_every, "steps between evaluations (0: each epoch)");
  c->add_flag("--resume", cfg.resume, "continue from OUT/checkpoint.safetensors");
  c->add_option("--limit-train", cfg.limit_train, "use only the first N training examples");
}

void add_image_train_flags(CLI::App* c, TrainFlags& f) {
  train::ImageTaskConfig& ic = f.cfg.image;
  const char* g = kImageGroup;
  c->add_option("--data-dir", ic.data_dir, "where the Fashion-MNIST files are")->group(g)->capture_default_str();
  c->add_option("--batch", ic.batch, "images per batch (BERT fine-tuning: examples, default 32)")->group(g)
      ->capture_default_str();
  c->add_option("--limit-eval", ic.limit_eval, "evaluate on the first N images (BERT fine-tuning: examples)")->group(g);
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

void add_text_train_flags(CLI::App* c, TrainFlags& f) {
  train::TextTaskConfig& tc = f.cfg.text;
  const char* g = kTextGroup;
  c->add_option("--init", f.cfg.init, "pre-trained weights: an attn checkpoint of a BERT (e.g. from pre-training) or "
                "transformers' model.safetensors (config.json beside it); the encoder is loaded, the head is new")->group(g);
  c->add_option("--vocab", tc.vocab, "vocab.txt (default: beside --init's weights, else bert-base-uncased's)")->group(g);
}

// The flags BERT fine-tuning shares with the other tasks' groups: --batch (examples, default 32),
// --limit-eval (validation / test examples) and --max-length (tokens per sequence, default 128).
const char* kTextShared[] = {"--batch", "--limit-eval", "--max-length"};

void take_text_shared_flags(const CLI::App* c, TrainFlags& f) {
  train::TextTaskConfig& tc = f.cfg.text;
  if (c->count("--batch")) tc.batch = f.cfg.image.batch;
  if (c->count("--limit-eval")) tc.limit_eval = f.cfg.image.limit_eval;
  if (c->count("--max-length")) tc.max_length = f.cfg.translation.max_length;
}

void finish_train_flags(TrainFlags& f) {
  apply_threads(f.threads);
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
  std::printf("checkpoint: %s\nlog:        %s\ncurve:      %s\nmetrics:    %s\n", r.checkpoint.c_str(), r.log.c_str(),
              r.plot.c_str(), r.metrics_path.c_str());
  if (m.contains("samples")) std::printf("samples:    %s\n", m["samples"].get<std::string>().c_str());
}

void add_train(CLI::App& app) {
  auto* c = app.add_subcommand("train", "train a model");
  auto f = std::make_shared<TrainFlags>();
  add_common_train_flags(c, *f);
  add_image_train_flags(c, *f);
  train::ImageTaskConfig& ic = f->cfg.image;
  c->add_option("--teacher", ic.teacher, "DeiT distillation: the teacher's checkpoint (any attn classifier)")
      ->group(kImageGroup);
  c->add_option("--distill", ic.distill, "distillation: none | soft | hard (needs a distilled model, e.g. "
                                          "deit_fmnist_distilled or swin_fmnist_distilled; none trains its class "
                                          "head only)")
      ->check(CLI::IsMember({"none", "soft", "hard"}))
      ->group(kImageGroup)
      ->capture_default_str();
  c->add_option("--alpha", ic.alpha, "distillation weight: (1 - alpha) CE + alpha distill")->group(kImageGroup)
      ->capture_default_str();
  c->add_option("--tau", ic.tau, "soft distillation temperature")->group(kImageGroup)->capture_default_str();
  add_translation_train_flags(c, *f);
  add_text_train_flags(c, *f);
  c->callback([c, f] {
    finish_train_flags(*f);
    // A flag of another task's group is refused: it would silently do nothing.
    const bool text = f->cfg.task && (*f->cfg.task == "classify" || *f->cfg.task == "tag");
    const bool translation = !text && models::has_model(f->cfg.model) &&
                             models::model_entry(f->cfg.model).task == models::kTranslation;
    const std::string own = text ? kTextGroup : translation ? kTranslationGroup : kImageGroup;
    for (const CLI::Option* o : c->get_options()) {
      const std::string g = o->get_group();
      const bool shared = text && std::any_of(std::begin(kTextShared), std::end(kTextShared),
                                              [&](const char* n) { return o->check_lname(n + 2); });
      ATTN_CHECK(shared || g == own || (g != kImageGroup && g != kTranslationGroup && g != kTextGroup) || o->count() == 0,
                 "train: ", o->get_name(), " applies to ", g, ", not to ", text ? "--task " + *f->cfg.task : f->cfg.model,
                 translation ? " (translation batches are sized with --max-tokens)" : "");
    }
    if (text) take_text_shared_flags(c, *f);
    // BERT fine-tuning from scratch without --model: bert-mini (the default model is an image classifier).
    if (text && c->count("--model") == 0 && f->cfg.init.empty()) f->cfg.model = "bert-mini";
    print_result(train::train(f->cfg));
  });
}

}  // namespace attn::cli

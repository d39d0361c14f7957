// attn train: train an image classifier (see include/attn/train/classifier.h), optionally with DeiT
// distillation from a teacher checkpoint, or a translation model (include/attn/train/seq2seq.h):
//   attn train --model transformer --data bible-en-es --model-config '{"d_model": 256}' --max-minutes 60
//   attn train --model resnet_fmnist --epochs 10 --augment --out runs/resnet
//   attn train --model deit_fmnist_distilled --teacher runs/resnet/checkpoint.safetensors --distill hard
#include <cmath>
#include <algorithm>
#include <cstdio>

#include "attn/attn.h"
#include "attn/train/classifier.h"
#include "attn/train/seq2seq.h"
#include "../commands.h"

namespace attn::cli {

void apply_threads(int threads) {
  if (threads > 0) set_num_threads(threads);
}

void add_train_flags(CLI::App* c, train::TrainConfig& cfg, int& threads, std::string& model_json) {
  c->add_option("--model", cfg.model, "model name (see `attn info --list`)")->capture_default_str();
  c->add_option("--model-config", model_json, "JSON object of config overrides, e.g. '{\"hidden\": [256]}'");
  c->add_option("--data", cfg.data,
                "image models: fashion-mnist, or a folder DIR: DIR/train/<class>/*.png|jpg and DIR/test/<class>/... "
                "(or val/; without both, validation is a fixed 10% of train/), images resized to the model's "
                "image_size, the class count taken from train/; translation models: bible-en-es, "
                "synthetic:<task> or a TSV file")
      ->capture_default_str();
  c->add_option("--data-dir", cfg.data_dir, "where the Fashion-MNIST files are")->capture_default_str();
  c->add_option("--epochs", cfg.epochs)->capture_default_str();
  c->add_option("--batch", cfg.batch)->capture_default_str();
  c->add_option("--lr", cfg.lr, "peak learning rate (AdamW, warm-up + cosine)")->capture_default_str();
  c->add_option("--min-lr", cfg.min_lr)->capture_default_str();
  c->add_option("--wd", cfg.weight_decay, "weight decay (not on norms, biases, tokens)")->capture_default_str();
  c->add_option("--warmup-epochs", cfg.warmup_epochs)->capture_default_str();
  c->add_option("--label-smoothing", cfg.label_smoothing)->capture_default_str();
  c->add_option("--clip-grad", cfg.clip_grad, "global gradient-norm clip (0: off)")->capture_default_str();
  c->add_flag("--augment,!--no-augment", cfg.augment, "random crop (padding 2) + flip");
  c->add_option("--rand-augment", cfg.rand_augment, "RandAugment: number of ops per image (0: off; DeiT: 2)")
      ->capture_default_str();
  c->add_option("--rand-augment-magnitude", cfg.rand_augment_magnitude, "RandAugment magnitude bin (0..30)")
      ->capture_default_str();
  c->add_option("--erase", cfg.erase_p, "random erasing probability (DeiT: 0.25)")->capture_default_str();
  c->add_option("--mixup", cfg.mixup, "Mixup alpha (0: off; DeiT: 0.8)")->capture_default_str();
  c->add_option("--cutmix", cfg.cutmix, "CutMix alpha (0: off; DeiT: 1.0)")->capture_default_str();
  c->add_option("--repeated-aug", cfg.repeated_aug,
                "repeated augmentation: each image N times in a row, differently augmented, epochs cut to a multiple of "
                "256 (0: off; DeiT: 3)")->capture_default_str();
  c->add_option("--ema-decay", cfg.ema_decay, "keep an EMA of the weights (0: off; e.g. 0.9998)")->capture_default_str();
  c->add_option("--seed", cfg.seed)->capture_default_str();
  c->add_option("--threads", threads, "threads (default: ATTN_NUM_THREADS or all cores)");
  c->add_option("--out", cfg.out, "output directory")->capture_default_str();
  c->add_option("--ckpt-every", cfg.checkpoint_every, "also checkpoint every N steps")->capture_default_str();
  c->add_flag("--resume", cfg.resume, "continue from OUT/checkpoint.safetensors");
  c->add_option("--limit-train", cfg.limit_train, "use only the first N training images");
  c->add_option("--limit-eval", cfg.limit_eval, "evaluate on the first N images");
  c->add_option("--max-steps", cfg.max_steps, "stop after N steps");
}

void finish_train_flags(train::TrainConfig& cfg, int threads, const std::string& model_json) {
  apply_threads(threads);
  if (!model_json.empty()) {
    auto j = nlohmann::json::parse(model_json, nullptr, false);
    ATTN_CHECK(!j.is_discarded() && j.is_object(), "--model-config: expected a JSON object, got '", model_json, "'");
    cfg.model_config = j;
  }
}

void print_result(const train::TrainResult& r) {
  std::printf("test accuracy: %.2f%%  (test loss %.4f, val accuracy %.2f%%, %lld steps, %.0f img/s end to end)\n",
              100 * r.test_accuracy, r.test_loss, 100 * r.val_accuracy, (long long)r.steps, r.images_per_second);
  if (!std::isnan(r.test_accuracy_ema)) std::printf("  EMA weights: %.2f%%\n", 100 * r.test_accuracy_ema);
  if (!std::isnan(r.test_accuracy_cls))
    std::printf("  class head alone: %.2f%%, distillation head alone: %.2f%%\n", 100 * r.test_accuracy_cls,
                100 * r.test_accuracy_dist);
  std::printf("checkpoint: %s\nlog:        %s\ncurve:      %s\nmetrics:    %s\n", r.checkpoint.c_str(), r.log.c_str(),
              r.plot.c_str(), r.metrics.c_str());
}

void add_train(CLI::App& app) {
  auto* c = app.add_subcommand("train", "train a model");
  auto cfg = std::make_shared<train::TrainConfig>();
  auto threads = std::make_shared<int>(0);
  auto model_json = std::make_shared<std::string>();
  add_train_flags(c, *cfg, *threads, *model_json);
  c->add_option("--teacher", cfg->teacher, "DeiT distillation: the teacher's checkpoint (any attn classifier)");
  c->add_option("--distill", cfg->distill, "distillation: none | soft | hard (needs a distilled model, e.g. "
                                           "deit_fmnist_distilled; none trains its class head only)")
      ->check(CLI::IsMember({"none", "soft", "hard"}))
      ->capture_default_str();
  c->add_option("--alpha", cfg->alpha, "distillation weight: (1 - alpha) CE + alpha distill")->capture_default_str();
  c->add_option("--tau", cfg->tau, "soft distillation temperature")->capture_default_str();
  // Translation models (--model transformer | rnn-attention): their own flags; the shared ones above
  // (--data, --epochs, --lr, --seed, --out, ...) apply when given.
  auto sq = std::make_shared<train::Seq2SeqConfig>();
  auto* g = "translation models (--model transformer | rnn-attention)";
  c->add_option("--max-tokens", sq->max_tokens, "tokens per batch (B x longest side)")->group(g)->capture_default_str();
  c->add_option("--max-length", sq->max_length, "drop longer training pairs (tokens)")->group(g)->capture_default_str();
  c->add_option("--vocab-size", sq->vocab_size, "SentencePiece vocabulary (joint)")->group(g)->capture_default_str();
  c->add_option("--tokenizer", sq->tokenizer, "auto | unigram | bpe | char")->group(g)->capture_default_str();
  c->add_option("--warmup-steps", sq->warmup_steps, "inverse-sqrt schedule warm-up")->group(g)->capture_default_str();
  c->add_option("--max-minutes", sq->max_minutes, "stop training after this wall time, then evaluate")->group(g);
  c->add_option("--eval-every", sq->eval_every, "steps between dev evaluations (0: each epoch)")->group(g);
  c->add_option("--eval-sentences", sq->eval_sentences, "dev sentences decoded for the logged BLEU")->group(g)
      ->capture_default_str();
  c->add_option("--beam", sq->beam, "beam size for the final test BLEU (1: greedy)")->group(g)->capture_default_str();
  c->add_option("--synthetic-size", sq->synthetic_size, "pairs of a synthetic:<task> dataset")->group(g)
      ->capture_default_str();
  c->add_option("--limit-test", sq->limit_test, "decode only the first N test pairs")->group(g);
  c->callback([c, cfg, sq, threads, model_json] {
    finish_train_flags(*cfg, *threads, *model_json);
    const auto names = models::seq2seq_names();
    if (std::find(names.begin(), names.end(), cfg->model) == names.end()) {
      print_result(train::train_classifier(*cfg));
      return;
    }
    train::Seq2SeqConfig& s = *sq;
    s.model = cfg->model;
    s.model_config = cfg->model_config;
    auto given = [&](const char* flag) { return c->count(flag) > 0; };
    if (given("--data")) s.data = cfg->data;
    if (given("--epochs")) s.epochs = cfg->epochs;
    if (given("--lr")) s.lr = cfg->lr;
    if (given("--seed")) s.seed = cfg->seed;
    s.out = given("--out") ? cfg->out : "runs/" + cfg->model;
    if (given("--label-smoothing")) s.label_smoothing = cfg->label_smoothing;
    if (given("--clip-grad")) s.clip_grad = cfg->clip_grad;
    if (given("--wd")) s.weight_decay = cfg->weight_decay;
    if (given("--ckpt-every")) s.checkpoint_every = cfg->checkpoint_every;
    if (given("--max-steps")) s.max_steps = cfg->max_steps;
    if (given("--limit-train")) s.limit_train = cfg->limit_train;
    s.resume = cfg->resume;
    for (const char* f : {"--batch", "--augment", "--teacher", "--mixup", "--cutmix", "--rand-augment", "--ema-decay",
                          "--repeated-aug"})
      ATTN_CHECK(!given(f), "train: ", f, " applies to image models, not to ", cfg->model,
                 " (translation batches are sized with --max-tokens)");
    train::Seq2SeqResult r = train::train_seq2seq(s);
    if (r.test_bleu_line.empty()) {
      std::printf("stopped after step %lld\n", (long long)r.steps);
      return;
    }
    std::printf("test %s\n  exact match %.2f%%  (%lld steps, %.0f target tokens/s, %.1f min of training)\n",
                r.test_bleu_line.c_str(), 100 * r.test_exact_match, (long long)r.steps, r.tokens_per_second,
                r.train_seconds / 60);
    std::printf("checkpoint: %s\nlog:        %s\ncurve:      %s\nmetrics:    %s\nsamples:    %s\n",
                r.checkpoint.c_str(), r.log.c_str(), r.plot.c_str(), r.metrics.c_str(), r.samples.c_str());
  });
}

}  // namespace attn::cli

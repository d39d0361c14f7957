// The translation task (see include/attn/train/tasks/translation.h).
#include "attn/train/tasks/translation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "attn/autograd/grad_mode.h"
#include "attn/core/error.h"
#include "attn/core/json_config.h"
#include "attn/core/parallel.h"
#include "attn/infer/translate.h"
#include "attn/io/base64.h"
#include "attn/io/safetensors.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/loss.h"
#include "attn/viz/plot.h"
#include "attn/core/progress.h"

namespace attn::train {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

bool is_synthetic(const std::string& data) { return data.rfind("synthetic:", 0) == 0; }

std::vector<data::SeqPair> encode_pairs(const text::Tokenizer& tok, const std::vector<data::TextPair>& pairs) {
  std::vector<data::SeqPair> out(pairs.size());
  parallel_for(0, int64_t(pairs.size()), 64, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[size_t(i)] = {tok.encode(pairs[size_t(i)].src), tok.encode(pairs[size_t(i)].tgt)};
  });
  return out;
}

// Teacher-forced loss over a whole split (no label smoothing: the plain per-token NLL).
double split_loss(models::Seq2SeqModel& model, const std::vector<data::SeqPair>& pairs, int64_t max_tokens,
                  int64_t max_length, const Shard& shard = Shard{}) {
  if (pairs.empty()) return NAN;
  NoGradGuard ng;
  const bool was = model.is_training();
  model.eval();
  data::SeqBatcher batcher(pairs, {.max_tokens = max_tokens, .max_length = max_length,
                                   .over_length = data::OverLength::truncate, .shuffle = false});
  double sum = 0;
  int64_t n = 0;
  const std::vector<std::vector<int64_t>> batches = batcher.epoch_batches(0);
  for (size_t k = size_t(shard.rank); k < batches.size(); k += size_t(shard.world)) {   // this rank's batches
    data::SeqBatch b = batcher.make_batch(batches[k]);
    sum += seq2seq_batch_loss(model, b, 0.0).item() * double(b.num_tgt_tokens);
    n += b.num_tgt_tokens;
  }
  model.train(was);
  std::vector<double> v = {sum, double(n)};
  shard.sum(v);
  sum = v[0];
  n = int64_t(v[1]);
  return n ? sum / double(n) : NAN;
}

class TranslationTask : public Task {
 public:
  explicit TranslationTask(const TrainConfig& cfg) : cfg_(cfg), tc_(cfg.translation), seed_(cfg.seed) {
    data_ = cfg.data.value_or("bible-en-es");
  }

  OptimDefaults defaults() const override {
    OptimDefaults d;
    d.schedule = OptimDefaults::Schedule::inverse_sqrt;
    d.lr = 1.0;   // the scale of lr * d^-0.5 min(s^-0.5, s w^-1.5)
    d.weight_decay = 0.0;
    d.beta2 = 0.98;
    d.eps = 1e-9;
    d.warmup_steps = 4000;
    d.epochs = 10;
    d.out = "runs/" + cfg_.model;
    return d;
  }

  void setup(const nlohmann::json* resume) override {
    // Resuming: the checkpoint's data spec, tokenizer and model config. ConfigErrors of the metadata
    // have no context: the Trainer puts the checkpoint's name in front.
    std::string model_name = cfg_.model;
    nlohmann::json model_cfg = cfg_.model_config;
    if (resume) {
      ConfigReader r(*resume, "");
      ATTN_CHECK(r.get_or("kind", "") == std::string(infer::kTranslationCheckpoint),
                 "train --resume: the checkpoint is not a translation checkpoint");
      const TranslationDataSpec d = translation_data_spec(*resume, "");
      data_ = d.data;
      seed_ = d.seed;
      tc_.synthetic_size = d.synthetic_size;
      tc_.dev_count = d.dev_count;
      tc_.test_count = d.test_count;
      model_name = r.object("config").get<std::string>("model");
      model_cfg = resume->at("config");
      tok_b64_ = r.get<std::string>("tokenizer");
      ConfigReader ts = r.object("train_state");
      resume_at_.epoch = ts.get<int64_t>("epoch", Range::non_negative);
      resume_at_.index = ts.get<int64_t>("batch", Range::non_negative);
    }
    // Resuming, the config is whole: the model first (its config checked before the data is read).
    // Otherwise the model's vocabulary is the tokenizer's, trained on the data.
    if (resume) model_ = models::create_seq2seq(model_name, model_cfg);
    load_data(resume);
    if (!resume) {
      if (model_cfg.is_object() || model_cfg.is_null()) model_cfg["vocab_size"] = tok_->vocab_size();
      model_ = models::create_seq2seq(model_name, model_cfg);
    }
    ATTN_CHECK(model_->vocab_size() == tok_->vocab_size(), "train: the model's vocabulary (", model_->vocab_size(),
               ") differs from the tokenizer's (", tok_->vocab_size(), ")");
    max_len_ = std::min(tc_.max_length, model_->max_length() - 1);
    batcher_ = std::make_unique<data::SeqBatcher>(
        train_ids_, data::SeqBatchOptions{.max_tokens = tc_.max_tokens * shard_.world, .max_length = max_len_,
                                          .over_length = data::OverLength::drop, .seed = seed_});
    ATTN_CHECK(batcher_->num_pairs() > 0, "train: no training pair is within max_length ", max_len_);
    if (!cfg_.quiet && batcher_->num_dropped_long() > 0)
      std::fprintf(stderr, "data: %lld training pairs longer than %lld tokens dropped\n",
                   (long long)batcher_->num_dropped_long(), (long long)max_len_);
  }

  std::shared_ptr<models::Model> model() const override { return model_; }
  int64_t batches_per_epoch() const override { return batcher_->num_batches_in_epoch(0); }
  int64_t d_model() const override {
    const nlohmann::json c = model_->config();
    return c.value("d_model", c.value("hidden", int64_t(512)));
  }

  // The position was read from the checkpoint's train_state in setup().
  void seek(int64_t micro_batches, const nlohmann::json&) override {
    if (micro_batches > 0) batcher_->seek(resume_at_);
  }
  nlohmann::json position() const override {
    const data::SeqPosition p = batcher_->position();
    return {{"epoch", p.epoch}, {"batch", p.index}};
  }

  StepOutput step(int64_t) override {
    data::SeqBatch b = batcher_->next();
    double weight = 1.0;
    if (shard_.world > 1) {
      // This rank's part of the combined batch, in order; a rank left without a pair (a batch of fewer
      // pairs than ranks) runs the first pair with weight 0, so that every rank has a backward pass.
      const auto [from, to] = shard_.part(int64_t(b.indices.size()));
      std::vector<int64_t> mine(b.indices.begin() + from, b.indices.begin() + to);
      if (mine.empty()) {
        mine = {b.indices[0]};
        weight = 0.0;
      }
      b = batcher_->make_batch(mine);
    }
    StepOutput out;
    const int64_t tokens = weight > 0 ? b.num_tgt_tokens : 0;
    out.loss = seq2seq_batch_loss(*model_, b, cfg_.label_smoothing);
    if (shard_.world > 1) out.loss = mul(out.loss, shard_.share(double(tokens)));
    out.items = tokens;
    return out;
  }

  nlohmann::json evaluate() override {
    const double dev_loss = split_loss(*model_, dev_ids_, tc_.max_tokens, max_len_, shard_);
    double dev_bleu = 0;
    const size_t n = std::min<size_t>(size_t(std::max<int64_t>(tc_.eval_sentences, 0)), splits_.dev.size());
    if (n > 0) {
      std::vector<data::TextPair> sample(splits_.dev.begin(), splits_.dev.begin() + int64_t(n));
      infer::Translator tr(model_, text::Tokenizer::deserialize(tok_->serialize()), nlohmann::json::object());
      dev_bleu = tr.bleu(sample, 1).score;
      model_->train();
    }
    dev_sentences_ = int64_t(n);
    return {{"dev_loss", dev_loss}, {"dev_bleu", dev_bleu}};
  }

  nlohmann::json window_record(const Window& w) const override {
    return {{"train_loss", w.loss / double(std::max<int64_t>(w.steps, 1))}};
  }
  std::vector<std::pair<std::string, double>> progress_fields(const Window& w, double lr) const override {
    return {{"loss", w.loss / double(std::max<int64_t>(w.steps, 1))}, {"lr", lr}};
  }
  std::string unit() const override { return "tok"; }

  std::string summary(const nlohmann::json& rec) const override {
    char line[512];
    std::snprintf(line, sizeof line,
                  "step %lld (epoch %.2f): train loss %s, dev loss %s, dev BLEU (greedy, %lld sentences) %.2f, "
                  "%.0f target tokens/s",
                  (long long)rec["step"].get<int64_t>(), rec["epoch_float"].get<double>(),
                  format_fixed(rec["train_loss"]).c_str(), format_fixed(rec["dev_loss"]).c_str(), (long long)dev_sentences_,
                  rec["dev_bleu"].get<double>(), rec["tokens_per_second"].get<double>());
    return line;
  }

  std::string plot_title() const override { return data_ + ": " + model_->config().value("model", std::string()); }
  std::string plot_x() const override { return "step"; }
  std::vector<viz::Series> plot_series(const nlohmann::json& history) const override {
    viz::Series tl{"train loss", {}, {}}, vl{"dev loss", {}, {}}, vb{"dev BLEU / 100", {}, {}, true};
    for (size_t i = 0; i < history.size(); ++i) {
      ConfigReader h(history[i], "", "history[" + std::to_string(i) + "].");
      const double x = h.get<double>("step");
      tl.x.push_back(x); tl.y.push_back(h.get<double>("train_loss"));
      vl.x.push_back(x); vl.y.push_back(h.get<double>("dev_loss"));
      vb.x.push_back(x); vb.y.push_back(h.get<double>("dev_bleu") / 100.0);
    }
    return {tl, vl, vb};
  }

  nlohmann::json checkpoint_extra() const override {
    return {{"kind", infer::kTranslationCheckpoint}, {"data", data_json()}, {"tokenizer", tok_b64_}};
  }

  std::vector<Setting> settings() const override { return {{"--max-tokens", tc_.max_tokens, false}}; }
  // Data parallelism: training batches and the dev loss are sharded; the BLEU decodes (dev sample,
  // test) run whole on every rank (the same numbers everywhere).
  void set_shard(const Shard& shard) override { shard_ = shard; }

  nlohmann::json finish(const TrainResult& res, const nlohmann::json& history,
                        const std::shared_ptr<models::Model>&) override;

 private:
  void load_data(const nlohmann::json* resume);
  nlohmann::json data_json() const {
    return {{"data", data_}, {"seed", seed_}, {"synthetic_size", tc_.synthetic_size},
            {"dev_count", tc_.dev_count}, {"test_count", tc_.test_count}};
  }

  TrainConfig cfg_;
  TranslationTaskConfig tc_;
  std::string data_;
  uint64_t seed_;
  data::PairSplits splits_;
  std::unique_ptr<text::Tokenizer> tok_;
  std::string tok_b64_;
  std::vector<data::SeqPair> train_ids_, dev_ids_;
  std::shared_ptr<models::Seq2SeqModel> model_;
  std::unique_ptr<data::SeqBatcher> batcher_;
  data::SeqPosition resume_at_;
  Shard shard_;
  int64_t max_len_ = 0, dev_sentences_ = 0;
};

void TranslationTask::load_data(const nlohmann::json* resume) {
  const auto t_data = std::chrono::steady_clock::now();
  splits_ = load_translation_data(data_, seed_, tc_.sword_dir, tc_.synthetic_size, tc_.dev_count, tc_.test_count);
  if (cfg_.limit_train > 0 && int64_t(splits_.train.size()) > cfg_.limit_train)
    splits_.train.resize(size_t(cfg_.limit_train));
  if (tc_.limit_test > 0 && int64_t(splits_.test.size()) > tc_.limit_test) splits_.test.resize(size_t(tc_.limit_test));
  if (resume)
    tok_ = text::Tokenizer::deserialize(io::base64_decode(tok_b64_, "checkpoint tokenizer"));
  else
    tok_ = train_translation_tokenizer(tc_.tokenizer, tc_.vocab_size, data_, splits_.train);
  tok_b64_ = io::base64_encode(tok_->serialize());
  train_ids_ = encode_pairs(*tok_, splits_.train);
  dev_ids_ = encode_pairs(*tok_, splits_.dev);
  if (!cfg_.quiet)
    std::fprintf(stderr, "data: %s, %zu train / %zu dev / %zu test pairs, %s vocabulary of %lld (%.1f s)\n",
                 data_.c_str(), splits_.train.size(), splits_.dev.size(), splits_.test.size(), tok_->kind().c_str(),
                 (long long)tok_->vocab_size(), seconds_since(t_data));
}

// The test split, decoded with beam search.
nlohmann::json TranslationTask::finish(const TrainResult& res, const nlohmann::json& history,
                                       const std::shared_ptr<models::Model>&) {
  model_->eval();
  infer::Translator tr(model_, text::Tokenizer::deserialize(tok_->serialize()), nlohmann::json::object());
  std::vector<std::string> hyps;
  const auto t_test = std::chrono::steady_clock::now();
  text::BleuScore bleu = tr.bleu(splits_.test, tc_.beam, tc_.length_penalty, &hyps);
  const double test_secs = seconds_since(t_test);
  int64_t exact = 0;
  for (size_t i = 0; i < hyps.size(); ++i) exact += hyps[i] == splits_.test[i].tgt;
  // Beside metrics.json in the run's directory; named relative to it, so a copied run stays whole.
  const std::string samples = "test_translations.txt";
  {
    std::string text;
    for (size_t i = 0; i < hyps.size(); ++i)
      text += "SRC " + splits_.test[i].src + "\nREF " + splits_.test[i].tgt + "\nHYP " + hyps[i] + "\n\n";
    if (shard_.rank == 0)
      io::write_file_atomic((std::filesystem::path(res.checkpoint).parent_path() / samples).string(), text);
  }
  return {{"data", data_json()}, {"test_bleu", bleu.score}, {"test_bleu_line", bleu.format()},
          {"test_exact_match", hyps.empty() ? 0.0 : double(exact) / double(hyps.size())},
          {"beam", tc_.beam}, {"length_penalty", tc_.length_penalty},
          {"dev_bleu_greedy", history.empty() ? 0.0 : history.back().value("dev_bleu", 0.0)},
          {"tokens_per_second", res.items_per_second}, {"train_seconds", res.train_seconds},
          {"test_decode_seconds", test_secs}, {"train_pairs", batcher_->num_pairs()},
          {"vocab_size", tok_->vocab_size()}, {"tokenizer", tok_->kind()}, {"samples", samples}};
}

}  // namespace

std::unique_ptr<text::Tokenizer> train_translation_tokenizer(const std::string& kind_in, int64_t vocab_size,
                                                             const std::string& data,
                                                             const std::vector<data::TextPair>& train) {
  std::string kind = kind_in;
  if (kind == "auto") kind = is_synthetic(data) ? "char" : "unigram";
  std::vector<std::string> text;
  text.reserve(train.size() * 2);
  for (const auto& p : train) {
    text.push_back(p.src);
    text.push_back(p.tgt);
  }
  if (kind == "char") return text::CharTokenizer::build(text);
  ATTN_CHECK(kind == "unigram" || kind == "bpe", "train: expected --tokenizer auto | unigram | bpe | char, got '",
             kind, "'");
  text::SentencePieceOptions o;
  o.vocab_size = vocab_size;
  o.model_type = kind;
  o.num_threads = std::max(1, get_num_threads());
  return text::SentencePieceTokenizer::train(text, o);
}

Tensor seq2seq_batch_loss(models::Seq2SeqModel& model, const data::SeqBatch& b, double label_smoothing) {
  // Only the non-padded target positions reach the output projection and the loss: the same mean as
  // cross_entropy with ignore_index over all of them (the padding contributes nothing to either),
  // without the vocabulary GEMM and softmax of the padding (about 6% of a 4,096-token Bible batch).
  const Tensor flat = b.tgt_out.reshape({-1}).contiguous().to(DType::i64);
  const int64_t* t = flat.data<int64_t>();
  std::vector<int64_t> rows, targets;
  rows.reserve(size_t(flat.numel()));
  targets.reserve(size_t(flat.numel()));
  for (int64_t i = 0; i < flat.numel(); ++i)
    if (t[i] != models::pad_id) { rows.push_back(i); targets.push_back(t[i]); }
  const auto R = int64_t(rows.size());
  Tensor logits = model.forward_rows(b.src, b.src_pad, b.tgt_in, Tensor::from_vector<int64_t>(rows, {R}));
  return cross_entropy(logits, Tensor::from_vector<int64_t>(targets, {R}),
                       {.label_smoothing = label_smoothing, .ignore_index = models::pad_id});
}

TranslationDataSpec translation_data_spec(const nlohmann::json& metadata, const std::string& context) {
  ConfigReader d = ConfigReader(metadata, context).object("data");
  TranslationDataSpec s;
  s.data = d.get<std::string>("data");
  s.seed = d.get<uint64_t>("seed");
  s.synthetic_size = d.get<int64_t>("synthetic_size", Range::non_negative);
  s.dev_count = d.get<int64_t>("dev_count", Range::non_negative);
  s.test_count = d.get<int64_t>("test_count", Range::non_negative);
  return s;
}

data::PairSplits load_translation_data(const std::string& data, uint64_t seed, const std::string& sword_dir,
                                       int64_t synthetic_size, int64_t dev_count, int64_t test_count) {
  std::vector<data::TextPair> pairs;
  if (data == "bible-en-es") {
    pairs = data::load_bible_pairs(sword_dir);
  } else if (is_synthetic(data)) {
    pairs = data::make_synthetic_pairs(data.substr(10), synthetic_size, seed);
  } else {
    ATTN_CHECK(std::filesystem::exists(data), "translation data: expected bible-en-es, synthetic:<task> (",
               [] {
                 std::string s;
                 for (const auto& n : data::synthetic_task_names()) s += (s.empty() ? "" : "|") + n;
                 return s;
               }(),
               ") or a TSV file, got '", data, "' (no such file)");
    pairs = data::read_tsv_pairs(data);
  }
  ATTN_CHECK(pairs.size() >= 3, "translation data '", data, "': expected at least 3 sentence pairs, found ",
             pairs.size());
  const int64_t n = int64_t(pairs.size());
  if (data != "bible-en-es") {
    dev_count = std::min(dev_count, std::max<int64_t>(1, n / 10));
    test_count = std::min(test_count, std::max<int64_t>(1, n / 10));
  }
  return data::split_pairs(pairs, dev_count, test_count, seed);
}

std::unique_ptr<Task> make_translation_task(const TrainConfig& cfg) { return std::make_unique<TranslationTask>(cfg); }

}  // namespace attn::train

// BERT fine-tuning tasks "classify" and "tag" (include/attn/train/tasks/sequence_classification.h,
// token_classification.h): one class, the architecture by the task.
#include "attn/train/tasks/sequence_classification.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include "attn/autograd/grad_mode.h"
#include "attn/core/env.h"
#include "attn/core/error.h"
#include "attn/core/json_config.h"
#include "attn/core/parallel.h"
#include "attn/core/progress.h"
#include "attn/data/wordnet_tasks.h"
#include "attn/io/checkpoint.h"
#include "attn/models/pretrained.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/loss.h"
#include "attn/ops/reduce.h"
#include "attn/viz/plot.h"
#include "text_task.h"

namespace attn::train {

namespace {

namespace fs = std::filesystem;

template <class T, class F>
std::vector<data::EncodedText> encode_all(const std::vector<T>& in, F&& f) {
  std::vector<data::EncodedText> out(in.size());
  parallel_for(0, int64_t(in.size()), 256, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[size_t(i)] = f(in[size_t(i)]);
  });
  return out;
}

// The labels of a config's id2label in id order ("" where missing).
std::vector<std::string> text_config_labels(const models::BertConfig& c) {
  std::vector<std::string> l;
  for (const auto& [id, name] : c.id2label) l.push_back(name);
  return l;
}

std::string text_label_list(const std::vector<std::string>& l) {
  std::string s;
  for (size_t i = 0; i < l.size() && i < 6; ++i) s += (i ? ", " : "") + l[i];
  if (l.size() > 6) s += ", ...";
  return std::to_string(l.size()) + " labels (" + s + ")";
}

// The first n of v (n <= 0: all).
template <class T>
std::vector<T> first_n(const std::vector<T>& v, int64_t n) {
  if (n <= 0 || n >= int64_t(v.size())) return v;
  return std::vector<T>(v.begin(), v.begin() + n);
}

}  // namespace

TextTaskData load_text_task_data(const std::string& name, uint64_t seed, const text::BertTokenizer& tok,
                                 int64_t max_length, int64_t limit_train, int64_t limit_eval) {
  const data::WordNetTask kind = data::wordnet_task_data_kind(name);
  const data::WordNet& wn = data::WordNet::shared();   // read once per process
  TextTaskData d;
  d.name = name;
  if (kind == data::WordNetTask::supersense) {
    const data::TaggingData t = data::wordnet_supersense_data(wn, seed);
    d.tagging = true;
    d.labels = t.labels;
    d.dropped = t.dropped;
    auto enc = [&](const data::TaggedSentence& s) { return data::encode_tagged(tok, s.words, s.tags, max_length); };
    d.train = encode_all(first_n(t.train, limit_train), enc);
    d.validation = encode_all(first_n(t.validation, limit_eval), enc);
    d.test = encode_all(first_n(t.test, limit_eval), enc);
    return d;
  }
  const data::TextClassificationData t =
      kind == data::WordNetTask::lexname ? data::wordnet_lexname_data(wn, seed) : data::wordnet_pairs_data(wn, seed);
  d.labels = t.labels;
  auto enc = [&](const data::TextExample& x) { return data::encode_text(tok, x.text, x.text_b, x.label, max_length); };
  d.train = encode_all(first_n(t.train, limit_train), enc);
  d.validation = encode_all(first_n(t.validation, limit_eval), enc);
  d.test = encode_all(first_n(t.test, limit_eval), enc);
  return d;
}

Tensor text_task_loss(const Tensor& logits, const Tensor& labels, double label_smoothing) {
  const CrossEntropyOptions o{.label_smoothing = label_smoothing, .ignore_index = data::kIgnoreLabel};
  if (logits.dim() == 2) return cross_entropy(logits, labels, o);
  ATTN_CHECK(logits.dim() == 3 && labels.dim() == 2, "text_task_loss: expected logits (B, C) or (B, T, C) with labels "
             "(B) or (B, T), got ", logits.shape(), " and ", labels.shape());
  return cross_entropy(logits.reshape({-1, logits.size(2)}), labels.reshape({-1}), o);
}

TextEvalResult evaluate_text_model(models::BertPreTrainedModel& model, const std::vector<data::EncodedText>& ex,
                                   const std::vector<std::string>& labels, bool tagging, int64_t pad_id,
                                   int64_t batch) {
  TextEvalResult r;
  r.count = int64_t(ex.size());
  if (ex.empty()) return r;
  NoGradGuard ng;
  const bool was = model.is_training();
  model.eval();
  // Similar lengths together (less padding); the metrics do not depend on the order.
  std::vector<int64_t> order(ex.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return ex[size_t(a)].ids.size() < ex[size_t(b)].ids.size(); });
  std::vector<int64_t> gold, pred;
  std::vector<std::vector<std::string>> gold_tags(ex.size()), pred_tags(ex.size());
  double loss_sum = 0;
  int64_t loss_n = 0;
  for (size_t at = 0; at < order.size(); at += size_t(batch)) {
    const std::vector<int64_t> idx(order.begin() + int64_t(at), order.begin() + int64_t(std::min(order.size(), at + size_t(batch))));
    const data::TextBatch b = data::make_text_batch(ex, idx, pad_id);
    const Tensor logits = model.forward({b.input_ids, b.token_type_ids, b.attention_mask}).logits.contiguous();
    const int64_t C = logits.size(-1);
    const float* p = logits.data<float>();
    const int64_t T = b.input_ids.size(1);
    for (size_t k = 0; k < idx.size(); ++k) {
      const data::EncodedText& e = ex[size_t(idx[k])];
      auto argmax = [&](int64_t row) { return int64_t(std::max_element(p + row * C, p + (row + 1) * C) - (p + row * C)); };
      if (!tagging) {
        gold.push_back(e.labels[0]);
        pred.push_back(argmax(int64_t(k)));
        continue;
      }
      for (size_t t = 0; t < e.labels.size(); ++t)
        if (e.labels[t] != data::kIgnoreLabel) {
          gold.push_back(e.labels[t]);
          pred.push_back(argmax(int64_t(k) * T + int64_t(t)));
        }
      auto& g = gold_tags[size_t(idx[k])];
      auto& q = pred_tags[size_t(idx[k])];
      // Word-level tags: a word's label is its first piece's; a word cut by truncation keeps its
      // gold tag and is predicted O.
      for (size_t w = 0; w < e.word_token.size(); ++w) {
        const int64_t tok = e.word_token[w];
        q.push_back(tok < 0 ? labels[0] : labels[size_t(argmax(int64_t(k) * T + tok))]);
        g.push_back(labels[size_t(e.word_tags[w])]);
      }
    }
    const std::vector<int64_t> y = b.labels.to_vector<int64_t>();
    const auto n = int64_t(y.size()) - int64_t(std::count(y.begin(), y.end(), data::kIgnoreLabel));
    loss_sum += text_task_loss(logits, b.labels, 0.0).item() * double(n);
    loss_n += n;
  }
  model.train(was);
  r.loss = loss_n ? loss_sum / double(loss_n) : NAN;
  int64_t correct = 0;
  for (size_t i = 0; i < gold.size(); ++i) correct += gold[i] == pred[i];
  r.accuracy = gold.empty() ? 0.0 : double(correct) / double(gold.size());
  r.macro_f1 = infer::macro_f1(gold, pred, int64_t(labels.size()));
  if (tagging) r.span = infer::span_f1(gold_tags, pred_tags);
  return r;
}

// ---------------------------------------------------------------- the task

namespace {

class BertTextTask : public Task {
 public:
  BertTextTask(const TrainConfig& cfg, bool tagging)
      : cfg_(cfg), tc_(cfg.text), tagging_(tagging), kind_(tagging ? "tag" : "classify"), seed_(cfg.seed) {
    data_ = cfg.data.value_or(tagging ? "wordnet-supersense" : "wordnet-lexname");
  }

  OptimDefaults defaults() const override {
    OptimDefaults d;
    d.lr = cfg_.init.empty() ? 3e-4 : 1e-4;
    d.min_lr = 0.0;
    d.weight_decay = 0.01;
    d.warmup_epochs = 0.02;
    d.epochs = 3;
    d.data = data_;
    d.out = "runs/" + kind_ + "-" + data_;
    return d;
  }

  void setup(const nlohmann::json* resume) override;
  std::shared_ptr<models::Model> model() const override { return model_; }
  int64_t batches_per_epoch() const override {
    const int64_t combined = tc_.batch * shard_.world;
    return (int64_t(d_.train.size()) + combined - 1) / combined;
  }
  // Data parallelism: training batches are sharded; evaluation (macro-F1 and span F1 need every
  // prediction) runs whole on every rank.
  void set_shard(const Shard& shard) override { shard_ = shard; }
  void seek(int64_t, const nlohmann::json&) override {}   // the order is a function of (seed, epoch)

  StepOutput step(int64_t micro) override {
    const int64_t combined = tc_.batch * shard_.world;
    const int64_t bpe = batches_per_epoch(), epoch = micro / bpe, at = (micro % bpe) * combined;
    if (epoch != order_epoch_) {
      order_ = data::epoch_order(int64_t(d_.train.size()), seed_, epoch);
      order_epoch_ = epoch;
    }
    const int64_t end = std::min<int64_t>(at + combined, int64_t(order_.size()));
    const auto [from, to] = shard_.part(end - at);   // this rank's part of the combined batch
    std::vector<int64_t> idx(order_.begin() + at + from, order_.begin() + at + to);
    const bool empty = idx.empty();   // fewer examples than ranks: run one with weight 0
    if (empty) idx = {order_[size_t(at)]};
    const data::TextBatch b = data::make_text_batch(d_.train, idx, pad_id_);
    const Tensor logits = model_->forward({b.input_ids, b.token_type_ids, b.attention_mask}).logits;
    StepOutput out;
    out.loss = text_task_loss(logits, b.labels, cfg_.label_smoothing);
    out.items = b.tokens;
    // Train accuracy over the labelled items of the batch.
    const Tensor pred = argmax(logits.detach(), -1);
    const auto p = pred.to_vector<int64_t>(), y = b.labels.to_vector<int64_t>();
    double correct = 0, n = 0;
    for (size_t i = 0; i < y.size(); ++i)
      if (y[i] != data::kIgnoreLabel) {
        correct += p[i] == y[i];
        n += 1;
      }
    if (empty) correct = n = 0;
    if (shard_.world > 1) out.loss = mul(out.loss, shard_.share(n));
    if (empty) out.items = 0;
    out.sums = {correct, n};
    return out;
  }

  nlohmann::json evaluate() override { return split_json(d_.validation, "val"); }

  nlohmann::json window_record(const Window& w) const override {
    return {{"train_loss", w.loss / double(std::max<int64_t>(w.steps, 1))}, {"train_accuracy", window_accuracy(w)}};
  }
  std::vector<std::pair<std::string, double>> progress_fields(const Window& w, double lr) const override {
    return {{"loss", w.loss / double(std::max<int64_t>(w.steps, 1))}, {"acc", window_accuracy(w)}, {"lr", lr}};
  }
  std::string unit() const override { return "tok"; }

  std::string summary(const nlohmann::json& rec) const override {
    char line[512];
    std::snprintf(line, sizeof line, "step %lld (epoch %.2f): train loss %s, train acc %s, val loss %s, val acc %s, %s %s, %.0f tokens/s",
                  (long long)rec["step"].get<int64_t>(), rec["epoch_float"].get<double>(),
                  format_fixed(rec["train_loss"]).c_str(), format_fixed(rec["train_accuracy"]).c_str(),
                  format_fixed(rec["val_loss"]).c_str(), format_fixed(rec["val_accuracy"]).c_str(),
                  tagging_ ? "val span F1" : "val macro-F1", format_fixed(rec[tagging_ ? "val_span_f1" : "val_macro_f1"]).c_str(),
                  rec["tokens_per_second"].get<double>());
    return line;
  }

  std::string plot_title() const override { return data_ + ": " + model_name_ + " (" + kind_ + ")"; }
  std::string plot_x() const override { return "step"; }
  std::vector<viz::Series> plot_series(const nlohmann::json& history) const override {
    const std::string metric = tagging_ ? "val_span_f1" : "val_accuracy";
    viz::Series tl{"train loss", {}, {}}, vl{"val loss", {}, {}}, vm{tagging_ ? "val span F1" : "val accuracy", {}, {}, true};
    for (size_t i = 0; i < history.size(); ++i) {
      ConfigReader h(history[i], "", "history[" + std::to_string(i) + "].");
      const double x = h.get<double>("step");
      tl.x.push_back(x); tl.y.push_back(h.get<double>("train_loss"));
      vl.x.push_back(x); vl.y.push_back(h.get<double>("val_loss"));
      vm.x.push_back(x); vm.y.push_back(h.get<double>(metric));
    }
    return {tl, vl, vm};
  }

  nlohmann::json checkpoint_extra() const override {
    return {{"task", kind_}, {"text_task", {{"data", data_}, {"seed", seed_}, {"max_length", tc_.max_length}}}};
  }

  std::vector<Setting> settings() const override {
    return {{"--data", data_, true}, {"--seed", seed_, true}, {"--batch", tc_.batch, true},
            {"--max-length", tc_.max_length, true}, {"--limit-train", cfg_.limit_train, true}};
  }

  nlohmann::json finish(const TrainResult& res, const nlohmann::json& history,
                        const std::shared_ptr<models::Model>&) override {
    nlohmann::json m = split_json(d_.test, "test");
    // The last evaluation's validation numbers, beside the test split's (what selects among runs).
    for (const char* k : {"val_accuracy", "val_macro_f1", "val_span_f1"})
      if (!history.empty() && history.back().contains(k)) m[k] = history.back().at(k);
    m["data"] = data_;
    m["task"] = kind_;
    m["init"] = cfg_.init;
    m["labels"] = int64_t(d_.labels.size());
    m["train_examples"] = int64_t(d_.train.size());
    if (tagging_) m["dropped_sentences"] = d_.dropped;
    m["tokens_per_second"] = res.items_per_second;
    m["train_seconds"] = res.train_seconds;
    return m;
  }

 private:
  void build_model(const nlohmann::json* resume);
  void load_init(const nlohmann::json& overrides);
  const text::BertTokenizer& tokenizer();

  static double window_accuracy(const Window& w) {
    return w.sums.size() >= 2 && w.sums[1] > 0 ? w.sums[0] / w.sums[1] : 0.0;
  }

  nlohmann::json split_json(const std::vector<data::EncodedText>& ex, const std::string& prefix) {
    const TextEvalResult r = evaluate_text_model(*model_, ex, d_.labels, tagging_, pad_id_);
    model_->train();
    nlohmann::json j = {{prefix + "_loss", r.loss}, {prefix + "_accuracy", r.accuracy}, {prefix + "_macro_f1", r.macro_f1},
                        {prefix + "_examples", r.count}};
    if (tagging_) {
      j[prefix + "_span_f1"] = r.span.f1;
      j[prefix + "_span_precision"] = r.span.precision;
      j[prefix + "_span_recall"] = r.span.recall;
    }
    return j;
  }

  TrainConfig cfg_;
  TextTaskConfig tc_;
  bool tagging_;
  std::string kind_, data_, model_name_, vocab_path_;
  uint64_t seed_;
  TextTaskData d_;
  std::optional<text::BertTokenizer> tok_;
  std::shared_ptr<models::BertPreTrainedModel> model_;
  int64_t pad_id_ = 0;
  std::vector<int64_t> order_;
  int64_t order_epoch_ = -1;
  Shard shard_;
};

// The vocabulary: --vocab, else vocab.txt beside --init's weights, else bert-base-uncased's cache.
// Resuming: the run's own copy (OUT/vocab.txt).
const text::BertTokenizer& BertTextTask::tokenizer() {
  if (tok_) return *tok_;
  const std::string out = cfg_.out.value_or(defaults().out);
  std::string path = tc_.vocab;
  const std::string beside = cfg_.init.empty() ? "" : (fs::path(cfg_.init).parent_path() / "vocab.txt").string();
  if (path.empty() && cfg_.resume) path = out + "/vocab.txt";
  if (path.empty() && !beside.empty() && fs::is_regular_file(beside)) path = beside;
  if (path.empty()) path = env::bert_vocab_cache();
  ATTN_CHECK(fs::is_regular_file(path), "train --task ", kind_, ": no vocabulary at '", path, "': expected --vocab "
             "FILE, vocab.txt beside --init's weights", beside.empty() ? "" : " (" + beside + ")",
             ", or bert-base-uncased's vocab.txt at ", env::bert_vocab_cache(), " (scripts/fetch_bert_vocab.sh)");
  tok_ = text::BertTokenizer::from_files(path);
  vocab_path_ = path;
  return *tok_;
}

// Pre-trained weights: the checkpoint's config with this task's head; its base model loaded (its
// classifier too when it has this architecture and these labels).
void BertTextTask::load_init(const nlohmann::json& overrides) {
  models::PretrainedSource src = models::is_attn_checkpoint(cfg_.init)
                                     ? models::PretrainedSource::checkpoint(cfg_.init)
                                     : models::PretrainedSource::foreign(cfg_.init, cfg_.model);
  src.image_classifier_only = false;
  src.pack_linear_weights = false;
  models::Pretrained p = models::load_pretrained(src);
  auto from = std::dynamic_pointer_cast<models::BertPreTrainedModel>(p.module);
  ATTN_CHECK(from != nullptr, "train --init: '", cfg_.init, "' holds ", p.model_name, ", not a BERT");
  model_name_ = p.model_name;
  nlohmann::json c = models::bert_config_to_json(from->cfg());
  c.update(cfg_.model_config);
  c.update(overrides);
  model_ = models::create_bert(model_name_, c);
  const models::BertConfig& fc = from->cfg();
  if (fc.architecture == model_->cfg().architecture) {
    const std::vector<std::string> have = text_config_labels(fc);
    ATTN_CHECK(have == d_.labels, "train --init: '", cfg_.init, "' is a ", models::bert_architecture_name(fc.architecture),
               " of ", text_label_list(have), ", but ", data_, " has ", text_label_list(d_.labels),
               ": its classifier does not fit (start from a pre-trained encoder instead)");
    model_->load_state_dict(from->state_dict());
    return;
  }
  // The base model: every key of ours but the pooler (absent from masked-LM checkpoints) must be there.
  const io::TensorList sd = from->bert().state_dict();
  std::string missing;
  for (const auto& entry : model_->bert().state_dict()) {
    const std::string& name = entry.first;
    const bool found = std::any_of(sd.begin(), sd.end(), [&](const auto& kv) { return kv.first == name; });
    if (!found && !name.starts_with("pooler.")) missing += (missing.empty() ? "" : ", ") + name;
  }
  ATTN_CHECK(missing.empty(), "train --init: '", cfg_.init, "' lacks ", missing);
  nn::LoadOptions lo;
  lo.strict = false;
  model_->bert().load_state_dict(sd, lo);
}

void BertTextTask::build_model(const nlohmann::json* resume) {
  nlohmann::json overrides = {
      {"architecture", tagging_ ? "BertForTokenClassification" : "BertForSequenceClassification"},
      {"num_labels", int64_t(d_.labels.size())}, {"id2label", nlohmann::json::object()}};
  for (size_t i = 0; i < d_.labels.size(); ++i) overrides["id2label"][std::to_string(i)] = d_.labels[i];
  if (resume) {
    ConfigReader r(*resume, "");
    model_name_ = r.object("config").get<std::string>("model");
    model_ = models::create_bert(model_name_, resume->at("config"));
    const std::vector<std::string> have = text_config_labels(model_->cfg());
    ATTN_CHECK(have == d_.labels, "train --resume: the checkpoint's model has ", text_label_list(have), ", but ",
               data_, " has ", text_label_list(d_.labels));
    return;
  }
  if (!cfg_.init.empty()) {
    load_init(overrides);
  } else {
    model_name_ = cfg_.model;
    nlohmann::json c = cfg_.model_config.is_object() ? cfg_.model_config : nlohmann::json::object();
    c.update(overrides);
    model_ = models::create_bert(model_name_, c);
  }
  ATTN_CHECK(model_->cfg().vocab_size == tok_->vocab_size(), "train --task ", kind_, ": the vocabulary '", vocab_path_,
             "' has ", tok_->vocab_size(), " tokens, the model ", model_name_, " vocab_size ", model_->cfg().vocab_size);
}

void BertTextTask::setup(const nlohmann::json* resume) {
  if (resume) {
    ConfigReader r = ConfigReader(*resume, "").object("text_task");
    data_ = r.get<std::string>("data");
    seed_ = r.get<uint64_t>("seed");
    tc_.max_length = r.get<int64_t>("max_length", Range::positive);
  }
  const data::WordNetTask kind = data::wordnet_task_data_kind(data_);
  ATTN_CHECK((kind == data::WordNetTask::supersense) == tagging_, "train --task ", kind_, ": expected ",
             tagging_ ? "sequence-labelling data (wordnet-supersense)" : "sentence or sentence-pair data (wordnet-lexname, wordnet-pairs)",
             ", got --data ", data_, tagging_ ? " (sentence classification: --task classify)" : " (sequence labelling: --task tag)");
  ATTN_CHECK(tc_.batch >= 1 && tc_.max_length >= 3, "train --task ", kind_, ": expected --batch >= 1 and --max-length >= 3, got ",
             tc_.batch, " and ", tc_.max_length);
  // The model's kind before the data is read (a BERT from the registry, or --init's).
  ATTN_CHECK(resume || !cfg_.init.empty() ||
                 (models::has_model(cfg_.model) && models::model_entry(cfg_.model).task == models::kMaskedLM),
             "train --task ", kind_, ": expected a BERT model (", [] {
               std::string s;
               for (const auto& n : models::model_names(models::kMaskedLM)) s += (s.empty() ? "" : ", ") + n;
               return s;
             }(), "), got ", cfg_.model,
             models::has_model(cfg_.model) ? " (a " + models::model_entry(cfg_.model).task + " model)" : std::string());
  const auto t0 = std::chrono::steady_clock::now();
  const text::BertTokenizer& tok = tokenizer();
  pad_id_ = tok.pad_id();
  d_ = load_text_task_data(data_, seed_, tok, tc_.max_length, cfg_.limit_train, tc_.limit_eval);
  ATTN_CHECK(!d_.train.empty(), "train --task ", kind_, ": expected training examples in ", data_, ", found none");
  build_model(resume);
  const std::string out = cfg_.out.value_or(defaults().out);
  fs::create_directories(out);
  const std::string copy = out + "/vocab.txt";
  if (!fs::exists(copy) || !fs::equivalent(vocab_path_, copy))
    fs::copy_file(vocab_path_, copy, fs::copy_options::overwrite_existing);
  if (!cfg_.quiet)
    std::fprintf(stderr, "data: %s, %zu labels; %zu train / %zu validation / %zu test %s%s (%.1f s); model %s%s\n",
                 data_.c_str(), d_.labels.size(), d_.train.size(), d_.validation.size(), d_.test.size(),
                 tagging_ ? "sentences" : "examples",
                 tagging_ ? (", " + std::to_string(d_.dropped) + " sentences without a lemma match dropped").c_str() : "",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), model_name_.c_str(),
                 cfg_.init.empty() ? " from scratch" : (" from " + cfg_.init).c_str());
}

}  // namespace

std::unique_ptr<Task> make_bert_text_task(const TrainConfig& cfg, bool tagging) {
  return std::make_unique<BertTextTask>(cfg, tagging);
}

std::unique_ptr<Task> make_sequence_classification_task(const TrainConfig& cfg) { return make_bert_text_task(cfg, false); }

}  // namespace attn::train

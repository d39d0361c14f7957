// BERT pre-training (see include/attn/train/tasks/pretrain.h).
#include "attn/train/tasks/pretrain.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "attn/autograd/grad_mode.h"
#include "attn/core/env.h"
#include "attn/core/error.h"
#include "attn/core/json_config.h"
#include "attn/core/progress.h"
#include "attn/core/rng.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/loss.h"
#include "attn/ops/reduce.h"
#include "attn/viz/plot.h"

namespace attn::train {

namespace {

// Window sums: masked positions, their summed MLM loss, correct MLM guesses; sequences, summed NSP
// loss, correct NSP guesses.
enum PretrainSum { kMasked, kMlmLoss, kMlmCorrect, kSeqs, kNspLoss, kNspCorrect, kNumSums };

int64_t pretrain_correct(const Tensor& logits, const Tensor& labels) {
  if (labels.numel() == 0) return 0;
  const auto guess = argmax(logits, -1).to_vector<int64_t>();
  const auto want = labels.to_vector<int64_t>();
  int64_t n = 0;
  for (size_t i = 0; i < want.size(); ++i) n += guess[i] == want[i];
  return n;
}

double pretrain_ratio(double a, double b) { return b > 0 ? a / b : NAN; }

// A batch's contribution to the sums above.
std::vector<double> pretrain_sums(const PretrainingLoss& l) {
  std::vector<double> s(kNumSums, 0.0);
  s[kMasked] = double(l.num_masked);
  s[kMlmLoss] = l.mlm_loss.item() * double(l.num_masked);
  s[kMlmCorrect] = double(l.mlm_correct);
  s[kSeqs] = double(l.num_sequences);
  s[kNspLoss] = l.nsp_loss.item() * double(l.num_sequences);
  s[kNspCorrect] = double(l.nsp_correct);
  return s;
}

// The data spec a checkpoint keeps ("data"): what rebuilds the same instances.
struct PretrainDataSpec {
  std::string data = "bible+wordnet";
  uint64_t seed = 0;
  PretrainTaskConfig pc;
};

nlohmann::json pretrain_spec_json(const PretrainDataSpec& d) {
  const PretrainTaskConfig& p = d.pc;
  return {{"data", d.data}, {"seed", d.seed}, {"max_seq_length", p.max_seq_length},
          {"short_seq_prob", p.short_seq_prob}, {"masked_lm_prob", p.masked_lm_prob},
          {"max_predictions_per_seq", p.max_predictions_per_seq}, {"dupe_factor", p.dupe_factor},
          {"masking", p.masking}, {"whole_word_mask", p.whole_word_mask},
          {"validation_fraction", p.validation_fraction}, {"batch", p.batch}};
}

void read_pretrain_spec(const nlohmann::json& meta, PretrainDataSpec& d) {
  ConfigReader r = ConfigReader(meta, "").object("data");
  d.data = r.get<std::string>("data");
  d.seed = r.get<uint64_t>("seed");
  PretrainTaskConfig& p = d.pc;
  p.max_seq_length = r.get<int64_t>("max_seq_length", Range::positive);
  p.short_seq_prob = r.get<double>("short_seq_prob");
  p.masked_lm_prob = r.get<double>("masked_lm_prob");
  p.max_predictions_per_seq = r.get<int64_t>("max_predictions_per_seq", Range::non_negative);
  p.dupe_factor = r.get<int64_t>("dupe_factor", Range::positive);
  p.masking = r.get<std::string>("masking");
  p.whole_word_mask = r.get<bool>("whole_word_mask");
  p.validation_fraction = r.get<double>("validation_fraction");
  p.batch = r.get<int64_t>("batch", Range::positive);
}

class PretrainTask : public Task {
 public:
  explicit PretrainTask(const TrainConfig& cfg) : cfg_(cfg) {
    spec_.data = cfg.data.value_or("bible+wordnet");
    spec_.seed = cfg.seed;
    spec_.pc = cfg.pretrain;
  }

  OptimDefaults defaults() const override {
    OptimDefaults d;
    d.schedule = OptimDefaults::Schedule::warmup_linear;
    d.lr = 5e-4;
    d.min_lr = 0;
    d.weight_decay = 0.01;
    d.eps = 1e-6;
    d.warmup_epochs = 0.5;
    d.epochs = 10;
    d.out = "runs/" + cfg_.model + "-pretrain";
    return d;
  }

  void setup(const nlohmann::json* resume) override;
  std::shared_ptr<models::Model> model() const override { return model_; }
  int64_t batches_per_epoch() const override { return int64_t(train_.size()) / (spec_.pc.batch * shard_.world); }
  void set_shard(const Shard& shard) override { shard_ = shard; }
  int64_t d_model() const override { return model_->cfg().hidden_size; }
  // Every batch is a function of its micro-batch number: nothing to seek.
  void seek(int64_t, const nlohmann::json&) override {}

  StepOutput step(int64_t micro) override {
    const int64_t per = batches_per_epoch(), epoch = micro / per, index = micro % per;
    const std::vector<int64_t>& order = epoch_order(epoch);
    // This rank's part of the combined batch (world x --batch instances, in order).
    const int64_t first = (index * shard_.world + shard_.rank) * spec_.pc.batch;
    const std::vector<int64_t> which(order.begin() + first, order.begin() + first + spec_.pc.batch);
    const data::PretrainingBatch b = data::make_pretraining_batch(train_, which, vocab_, masking(), spec_.seed,
                                                                  spec_.pc.masking == "static" ? -1 : epoch);
    PretrainingLoss l = pretraining_loss(*model_, b);
    StepOutput out;
    out.loss = l.loss;
    if (shard_.world > 1)   // each mean weighted by this rank's share of its unit: masked tokens, sequences
      out.loss = add(shard_.weighted(l.mlm_loss, double(l.num_masked)), shard_.weighted(l.nsp_loss, double(l.num_sequences)));
    out.items = l.num_sequences;
    out.sums = pretrain_sums(l);
    return out;
  }

  nlohmann::json evaluate() override;

  nlohmann::json window_record(const Window& w) const override {
    const auto s = [&](PretrainSum k) { return size_t(k) < w.sums.size() ? w.sums[size_t(k)] : 0.0; };
    return {{"train_loss", w.loss / double(std::max<int64_t>(w.steps, 1))},
            {"train_mlm_accuracy", pretrain_ratio(s(kMlmCorrect), s(kMasked))},
            {"train_nsp_accuracy", pretrain_ratio(s(kNspCorrect), s(kSeqs))}};
  }
  std::vector<std::pair<std::string, double>> progress_fields(const Window& w, double lr) const override {
    const nlohmann::json r = window_record(w);
    return {{"loss", r["train_loss"].get<double>()}, {"mlm_acc", r["train_mlm_accuracy"].get<double>()},
            {"nsp_acc", r["train_nsp_accuracy"].get<double>()}, {"lr", lr}};
  }
  std::string unit() const override { return "seq"; }

  std::string summary(const nlohmann::json& rec) const override {
    char line[512];
    std::snprintf(line, sizeof line,
                  "step %lld (epoch %.2f): train loss %s, val loss %s, val MLM accuracy %.2f%% (loss %s), "
                  "val NSP accuracy %.2f%% (loss %s), %.1f seq/s",
                  (long long)rec["step"].get<int64_t>(), rec["epoch_float"].get<double>(),
                  format_fixed(rec["train_loss"]).c_str(), format_fixed(rec["val_loss"]).c_str(),
                  100 * rec["val_mlm_accuracy"].get<double>(), format_fixed(rec["val_mlm_loss"]).c_str(),
                  100 * rec["val_nsp_accuracy"].get<double>(), format_fixed(rec["val_nsp_loss"]).c_str(),
                  rec.value("sequences_per_second", 0.0));
    return line;
  }

  std::string plot_title() const override { return spec_.data + ": " + cfg_model_name() + " pre-training"; }
  std::string plot_x() const override { return "step"; }
  std::vector<viz::Series> plot_series(const nlohmann::json& history) const override {
    viz::Series tl{"train loss", {}, {}}, vl{"val loss", {}, {}};
    viz::Series ma{"val MLM accuracy", {}, {}, true}, na{"val NSP accuracy", {}, {}, true};
    for (size_t i = 0; i < history.size(); ++i) {
      ConfigReader h(history[i], "", "history[" + std::to_string(i) + "].");
      const double x = h.get<double>("step");
      for (auto [series, key] : {std::pair{&tl, "train_loss"}, {&vl, "val_loss"}, {&ma, "val_mlm_accuracy"},
                                 {&na, "val_nsp_accuracy"}}) {
        series->x.push_back(x);
        series->y.push_back(h.get<double>(key));
      }
    }
    return {tl, vl, ma, na};
  }

  nlohmann::json checkpoint_extra() const override { return {{"task", kPretrainTask}, {"data", pretrain_spec_json(spec_)}}; }

  std::vector<Setting> settings() const override {
    const PretrainTaskConfig& p = spec_.pc;
    return {{"--batch", p.batch, true},           {"--max-seq-length", p.max_seq_length, true},
            {"--dupe-factor", p.dupe_factor, true}, {"--masking", p.masking, true},
            {"--whole-word-mask", p.whole_word_mask, true}, {"--masked-lm-prob", p.masked_lm_prob, true},
            {"--limit-eval", p.limit_eval, false}};
  }

  nlohmann::json finish(const TrainResult& res, const nlohmann::json&, const std::shared_ptr<models::Model>&) override {
    nlohmann::json m = evaluate();
    m["data"] = pretrain_spec_json(spec_);
    m["train_instances"] = int64_t(train_.size());
    m["validation_instances"] = int64_t(val_.size());
    m["sequences_per_second"] = res.items_per_second;
    m["train_seconds"] = res.train_seconds;
    return m;
  }

 private:
  data::MaskingOptions masking() const {
    return {.masked_lm_prob = spec_.pc.masked_lm_prob, .max_predictions_per_seq = spec_.pc.max_predictions_per_seq,
            .whole_word = spec_.pc.whole_word_mask};
  }
  std::string cfg_model_name() const { return model_->config().value("model", std::string("bert")); }
  const std::vector<int64_t>& epoch_order(int64_t epoch) {
    if (epoch != order_epoch_) {
      Generator g(spec_.seed ^ 0x65706f6368ull);
      g.set_state(g.seed(), uint64_t(epoch) << 40);
      order_ = randperm(int64_t(train_.size()), g).to_vector<int64_t>();
      order_epoch_ = epoch;
    }
    return order_;
  }
  void load_data();

  TrainConfig cfg_;
  PretrainDataSpec spec_;
  std::shared_ptr<models::BertPreTrainedModel> model_;
  data::MaskVocab vocab_;
  std::vector<data::PretrainingInstance> train_, val_;
  std::vector<int64_t> order_;
  int64_t order_epoch_ = -1;
  Shard shard_;
};

void PretrainTask::setup(const nlohmann::json* resume) {
  std::string name = cfg_.model;
  nlohmann::json overrides = cfg_.model_config;
  if (resume) {
    ConfigReader r(*resume, "");
    ATTN_CHECK(r.get_or("task", "") == std::string(kPretrainTask),
               "train --resume: the checkpoint is not a pre-training checkpoint (no \"task\": \"pretrain\")");
    read_pretrain_spec(*resume, spec_);
    // The data settings come from the checkpoint; a --data of this call that names other data is refused.
    ATTN_CHECK(!cfg_.data || *cfg_.data == spec_.data, "train --resume: the checkpoint was pre-trained on --data '",
               spec_.data, "'; this call has --data '", *cfg_.data,
               "'. Pass the run's own --data (or none) to continue it, or start a new run with --init");
    spec_.pc.limit_eval = cfg_.pretrain.limit_eval;
    name = r.object("config").get<std::string>("model");
    overrides = resume->at("config");
  }
  model_ = make_pretraining_model(name, overrides);
  load_data();
  ATTN_CHECK(vocab_.vocab_size == model_->cfg().vocab_size, "train --task pretrain: the vocabulary has ",
             vocab_.vocab_size, " tokens but the model's vocab_size is ", model_->cfg().vocab_size);
  ATTN_CHECK(spec_.pc.max_seq_length <= model_->cfg().max_position_embeddings, "train --task pretrain: expected ",
             "--max-seq-length <= the model's max_position_embeddings ", model_->cfg().max_position_embeddings,
             ", got ", spec_.pc.max_seq_length);
  ATTN_CHECK(spec_.pc.batch >= 1, "train --task pretrain: expected --batch >= 1, got ", spec_.pc.batch);
  ATTN_CHECK(int64_t(train_.size()) >= spec_.pc.batch * shard_.world, "train --task pretrain: the training split has ",
             train_.size(), " instances, fewer than one batch of ", spec_.pc.batch * shard_.world);
}

void PretrainTask::load_data() {
  const auto t0 = std::chrono::steady_clock::now();
  ATTN_CHECK(spec_.pc.masking == "dynamic" || spec_.pc.masking == "static",
             "train --task pretrain: expected --masking dynamic | static, got '", spec_.pc.masking, "'");
  const text::BertTokenizer tok = text::BertTokenizer::from_files(pretraining_vocab(cfg_.pretrain.vocab));
  vocab_ = data::mask_vocab(tok);
  const data::PretrainingSources src{.sword_dir = cfg_.pretrain.sword_dir, .wordnet_dir = cfg_.pretrain.wordnet_dir};
  const std::vector<data::TokenDocument> docs =
      data::tokenize_documents(data::load_pretraining_documents(spec_.data, src), tok, "data '" + spec_.data + "'");
  const data::DocumentSplit split = data::split_documents(int64_t(docs.size()), spec_.pc.validation_fraction, spec_.seed);
  const data::InstanceOptions io{.max_seq_length = spec_.pc.max_seq_length, .short_seq_prob = spec_.pc.short_seq_prob,
                                 .dupe_factor = spec_.pc.dupe_factor};
  train_ = data::create_instances(data::select_documents(docs, split.train), io, vocab_.ids, spec_.seed);
  if (cfg_.limit_train > 0 && int64_t(train_.size()) > cfg_.limit_train) train_.resize(size_t(cfg_.limit_train));
  if (!split.validation.empty()) {
    data::InstanceOptions vo = io;
    vo.dupe_factor = 1;
    val_ = data::create_instances(data::select_documents(docs, split.validation), vo, vocab_.ids, ~spec_.seed);
  }
  if (spec_.pc.limit_eval > 0 && int64_t(val_.size()) > spec_.pc.limit_eval) val_.resize(size_t(spec_.pc.limit_eval));
  if (!cfg_.quiet)
    std::fprintf(stderr, "data: %s, %zu documents (%zu train / %zu validation), %zu train / %zu validation instances "
                 "of <= %lld tokens (%.1f s)\n", spec_.data.c_str(), docs.size(), split.train.size(),
                 split.validation.size(), train_.size(), val_.size(), (long long)spec_.pc.max_seq_length,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

nlohmann::json PretrainTask::evaluate() {
  NoGradGuard ng;
  const bool was = model_->is_training();
  model_->eval();
  double s[kNumSums] = {};
  const auto n = int64_t(val_.size());
  for (int64_t at = spec_.pc.batch * shard_.rank; at < n; at += spec_.pc.batch * shard_.world) {   // this rank's batches
    std::vector<int64_t> which;
    for (int64_t i = at; i < std::min(n, at + spec_.pc.batch); ++i) which.push_back(i);
    const data::PretrainingBatch b = data::make_pretraining_batch(val_, which, vocab_, masking(), ~spec_.seed, -1);
    const std::vector<double> part = pretrain_sums(pretraining_loss(*model_, b));
    for (size_t k = 0; k < part.size(); ++k) s[k] += part[k];
  }
  model_->train(was);
  std::vector<double> all(s, s + kNumSums);
  shard_.sum(all);
  std::copy(all.begin(), all.end(), s);
  const double mlm = pretrain_ratio(s[kMlmLoss], s[kMasked]), nsp = pretrain_ratio(s[kNspLoss], s[kSeqs]);
  return {{"val_loss", mlm + nsp}, {"val_mlm_loss", mlm}, {"val_mlm_accuracy", pretrain_ratio(s[kMlmCorrect], s[kMasked])},
          {"val_nsp_loss", nsp}, {"val_nsp_accuracy", pretrain_ratio(s[kNspCorrect], s[kSeqs])},
          {"val_instances", n}};
}

}  // namespace

PretrainingLoss pretraining_loss(models::BertPreTrainedModel& model, const data::PretrainingBatch& b) {
  models::BertOutputOptions o;
  o.mlm_rows = b.mlm_rows;
  const models::BertOutput out =
      model.forward({b.inputs.input_ids, b.inputs.token_type_ids, b.inputs.attention_mask}, o);
  ATTN_CHECK(out.prediction_logits.defined() && out.seq_relationship_logits.defined(),
             "pretraining_loss: expected a BertForPreTraining (MLM and NSP heads), got a ",
             models::bert_architecture_name(model.cfg().architecture));
  PretrainingLoss l;
  l.num_masked = b.num_masked;
  l.num_sequences = b.nsp_labels.numel();
  l.mlm_loss = cross_entropy(out.prediction_logits, b.mlm_labels);
  l.nsp_loss = cross_entropy(out.seq_relationship_logits, b.nsp_labels);
  l.loss = add(l.mlm_loss, l.nsp_loss);
  l.mlm_correct = pretrain_correct(out.prediction_logits, b.mlm_labels);
  l.nsp_correct = pretrain_correct(out.seq_relationship_logits, b.nsp_labels);
  return l;
}

std::shared_ptr<models::BertPreTrainedModel> make_pretraining_model(const std::string& name,
                                                                    const nlohmann::json& overrides) {
  const models::ModelEntry& e = models::model_entry(name);
  ATTN_CHECK(e.task == models::kMaskedLM, "train --task pretrain: expected a BERT model (bert-mini, bert-small, "
             "bert-base-uncased, ...), got '", name, "', a model of the task ", e.task);
  auto m = std::dynamic_pointer_cast<models::BertPreTrainedModel>(models::create(name, overrides));
  ATTN_CHECK(m != nullptr, "train --task pretrain: expected a BERT model, got '", name, "'");
  ATTN_CHECK(m->cfg().architecture == models::BertArchitecture::pretraining,
             "train --task pretrain: expected the architecture BertForPreTraining (MLM and NSP heads), got ",
             models::bert_architecture_name(m->cfg().architecture));
  return m;
}

std::string pretraining_vocab(const std::string& path) {
  const std::string p = path.empty() ? env::bert_vocab_cache() : path;
  ATTN_CHECK(std::filesystem::is_regular_file(p), "pretraining: expected bert-base-uncased's vocab.txt at '", p,
             "', found no such file: run scripts/fetch_bert_vocab.sh (or pass --vocab FILE)");
  return p;
}

std::unique_ptr<Task> make_pretrain_task(const TrainConfig& cfg) { return std::make_unique<PretrainTask>(cfg); }

}  // namespace attn::train

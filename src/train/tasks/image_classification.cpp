// The image-classification task (see include/attn/train/tasks/image_classification.h).
#include "attn/train/tasks/image_classification.h"

#include <cstdio>
#include <optional>
#include <tuple>

#include "attn/autograd/grad_mode.h"
#include "attn/core/error.h"
#include "attn/core/json_config.h"
#include "attn/core/rng.h"
#include "attn/data/augment.h"
#include "attn/data/fashion_mnist.h"
#include "attn/data/image_folder_splits.h"
#include "attn/data/loader.h"
#include "attn/models/pretrained.h"
#include "attn/models/distilled.h"
#include "attn/ops/loss.h"
#include "attn/ops/reduce.h"
#include "attn/train/distill.h"
#include "attn/viz/plot.h"
#include "attn/core/progress.h"

namespace attn::train {

namespace {

bool is_folder_data(const std::string& data) { return data != "fashion-mnist"; }

// The first n examples of a dataset.
// Examples [from, from + n) of a dataset.
class Prefix : public data::Dataset {
 public:
  Prefix(std::shared_ptr<const data::Dataset> base, int64_t n, int64_t from = 0)
      : base_(std::move(base)), from_(from), n_(std::min(n, base_->size() - from)) {}
  int64_t size() const override { return n_; }
  Shape image_shape() const override { return base_->image_shape(); }
  int64_t read(int64_t i, float* out) const override {
    ATTN_CHECK(i >= 0 && i < n_, "dataset: index ", i, " out of range [0, ", n_, ")");
    return base_->read(from_ + i, out);
  }

 private:
  std::shared_ptr<const data::Dataset> base_;
  int64_t from_, n_;
};

int64_t count_correct(const Tensor& logits, const Tensor& labels) {
  Tensor pred = argmax(logits, -1);
  const int64_t* p = pred.data<int64_t>();
  const int64_t* y = labels.data<int64_t>();
  int64_t c = 0;
  for (int64_t i = 0; i < pred.numel(); ++i) c += p[i] == y[i];
  return c;
}

// How a model maps a dataset's images: the logits' width for one blank image (no grad, eval).
int64_t output_classes(models::ImageClassifier& m, const Shape& image_shape, const std::string& what) {
  NoGradGuard ng;
  const bool was_training = m.is_training();
  m.eval();
  Shape s{1};
  s.insert(s.end(), image_shape.begin(), image_shape.end());
  Tensor out;
  try {
    out = m.forward(Tensor::zeros(s));
  } catch (const Error& e) {
    m.train(was_training);
    fail("train: the ", what, " does not take this dataset's images ", image_shape, ": ", e.what());
  }
  m.train(was_training);
  return out.size(-1);
}

// The datasets of a run: Fashion-MNIST (its fixed validation split held out of the training file), or
// an image folder (data/image_folder_splits.h) read at the model's image size and channel count.
struct RunData {
  std::shared_ptr<data::Dataset> train, val, test;
  std::vector<std::string> classes;   // image folders: the class names (Fashion-MNIST: empty)
};

RunData load_data(const std::string& data, const std::string& data_dir, const nlohmann::json& model_cfg, bool quiet) {
  RunData d;
  if (!is_folder_data(data)) {
    d.train = std::make_shared<data::FashionMnist>(data::FashionMnist::load(data_dir, data::Split::train));
    d.val = std::make_shared<data::FashionMnist>(data::FashionMnist::load(data_dir, data::Split::val));
    d.test = std::make_shared<data::FashionMnist>(data::FashionMnist::load(data_dir, data::Split::test));
    return d;
  }
  ATTN_CHECK(model_cfg.contains("image_size") && model_cfg["image_size"].is_number_integer() &&
                 model_cfg.contains("in_channels") && model_cfg["in_channels"].is_number_integer(),
             "train: the model ", model_cfg.value("model", std::string("?")),
             " has no integer image_size / in_channels in its config: it cannot read an image folder");
  const int64_t size = model_cfg["image_size"].get<int64_t>(), channels = model_cfg["in_channels"].get<int64_t>();
  data::ImageFolderSplits s = data::load_image_folder_splits(data, size, channels);
  d.train = s.train;
  d.val = s.val;
  d.test = s.test;
  d.classes = s.classes;
  if (!quiet)
    std::fprintf(stderr,
                 "data: %s: %zu classes; %lld training images, %lld validation (%s), %lld test (%s); read at "
                 "%lld x %lld, %lld channel%s (the model's image_size / in_channels: --model-config sets them)\n",
                 data.c_str(), s.classes.size(), (long long)s.train->size(), (long long)s.val->size(),
                 s.val_from.c_str(), (long long)s.test->size(), s.test_from.c_str(),
                 (long long)size, (long long)size, (long long)channels, channels == 1 ? "" : "s");
  return d;
}

class ImageClassificationTask : public Task {
 public:
  explicit ImageClassificationTask(const TrainConfig& cfg) : cfg_(cfg), ic_(cfg.image) {
    data_ = cfg.data.value_or("fashion-mnist");
    const auto norm = data::dataset_normalization(data_);
    mean_ = norm.first;
    std_ = norm.second;
  }

  OptimDefaults defaults() const override {
    OptimDefaults d;   // AdamW 1e-3, wd 0.05, one warm-up epoch, cosine to 1e-5, 5 epochs
    d.out = "runs/default";
    return d;
  }

  void setup(const nlohmann::json* resume) override {
    nlohmann::json model_cfg;
    if (resume) {
      // ConfigErrors of the metadata have no context: the Trainer puts the checkpoint's name in front.
      ConfigReader r(*resume, "");
      const std::string name = r.object("config").get<std::string>("model");
      model_ = models::create_model(name, resume->at("config"));
      model_cfg = model_->config();
      // Distillation settings: the checkpoint's, unless this call names a teacher of its own.
      ConfigReader ts = r.object("train_state");
      if (ic_.teacher.empty() && ic_.distill == "none" && ts.has("distill")) {
        ConfigReader d = ts.object("distill");
        ic_.distill = d.one_of("type", {"none", "soft", "hard"});
        ic_.teacher = d.get<std::string>("teacher");
        ic_.alpha = d.get<double>("alpha", Range::unit_interval);
        ic_.tau = d.get<double>("tau", Range::positive);
      }
    } else {
      // An image folder sets the class count unless --model-config does (as timm's --num-classes).
      nlohmann::json overrides = cfg_.model_config;
      if (is_folder_data(data_) && overrides.is_object() && !overrides.contains("num_classes"))
        overrides["num_classes"] = int64_t(data::image_folder_classes(data_).size());
      model_ = models::create_model(cfg_.model, overrides);
      model_cfg = model_->config();
    }
    model_name_ = model_cfg["model"].get<std::string>();
    // Data: after the model, whose image size and channel count an image folder is read at.
    run_data_ = load_data(data_, ic_.data_dir, model_cfg, cfg_.quiet);
    train_ds_ = run_data_.train;
    if (cfg_.limit_train > 0) train_ds_ = std::make_shared<Prefix>(train_ds_, cfg_.limit_train);
    setup_distillation();
    setup_loader();
  }

  std::shared_ptr<models::Model> model() const override { return model_; }
  int64_t batches_per_epoch() const override { return loader_->batches_per_epoch(); }

  void seek(int64_t micro_batches, const nlohmann::json&) override { loader_->seek_global(micro_batches); }
  nlohmann::json position() const override { return {{"epoch", loader_->global_step() / batches_per_epoch()}}; }

  StepOutput step(int64_t micro) override {
    data::Batch b = loader_->next();
    Tensor x = b.images, target = b.labels;
    if (mixing_) {
      // One generator position per micro-batch: the same step mixes the same way after a resume.
      Generator mg(cfg_.seed ^ 0x6d69787570ull);
      mg.set_state(mg.seed(), uint64_t(micro) << 16);
      data::MixedBatch mb = data::mixup(b.images, b.labels, mix_opt_, mg);
      x = mb.images;
      target = mb.targets;
    }
    StepOutput out;
    Tensor logits;
    if (deit_ || teacher_) {
      // DeiT: both heads; the teacher sees the same (augmented) batch, in eval mode, without grad. A
      // model without a distillation token distils into its class head (the paper's "usual distillation").
      Tensor cls, dist;
      if (deit_) {
        std::tie(cls, dist) = deit_->forward_heads(x);
      } else {
        cls = dist = model_->forward(x);
      }
      Tensor t;
      if (teacher_) {
        NoGradGuard ng;
        t = teacher_->forward(x);
      }
      out.loss = (*criterion_)(cls, dist, target, t).total;
      NoGradGuard ng;
      logits = deit_ ? models::combine_distilled_heads(cls.detach(), dist.detach(), deit_->distilled_output())
                     : cls.detach();
    } else {
      logits = model_->forward(x);
      // Mixed targets already carry the label smoothing.
      out.loss = cross_entropy(logits, target, {.label_smoothing = mixing_ ? 0.0 : cfg_.label_smoothing});
    }
    out.loss = shard_.weighted(out.loss, double(b.labels.numel()));   // a mean over this rank's images
    NoGradGuard ng;
    out.items = b.labels.numel();
    out.sums = {double(count_correct(logits, b.labels)), double(b.labels.numel())};
    return out;
  }

  void set_shard(const Shard& shard) override { shard_ = shard; }

  nlohmann::json evaluate() override {
    EvalResult v = train::evaluate(*model_, *run_data_.val, mean_, std_, 256, ic_.limit_eval, &shard_);
    nlohmann::json r = {{"val_loss", v.loss}, {"val_accuracy", v.accuracy}};
    if (deit_) {
      r["val_accuracy_cls"] = v.accuracy_cls;
      r["val_accuracy_dist"] = v.accuracy_dist;
      r["val_accuracy_both"] = v.accuracy;
    }
    return r;
  }

  nlohmann::json window_record(const Window& w) const override {
    return {{"train_loss", w.loss / double(std::max<int64_t>(w.steps, 1))}, {"train_accuracy", accuracy(w)}};
  }
  std::vector<std::pair<std::string, double>> progress_fields(const Window& w, double) const override {
    return {{"loss", w.loss / double(std::max<int64_t>(w.steps, 1))}, {"acc", accuracy(w)}};
  }
  std::string unit() const override { return "img"; }

  std::string summary(const nlohmann::json& rec) const override {
    std::string heads;
    if (deit_)
      heads = " (class head " + format_fixed(rec["val_accuracy_cls"]) + ", distillation head " + format_fixed(rec["val_accuracy_dist"]) + ")";
    char line[512];
    std::snprintf(line, sizeof line, "epoch %lld: train loss %s, train acc %s, val loss %s, val acc %s%s, %.0f img/s",
                  (long long)rec["epoch"].get<int64_t>(), format_fixed(rec["train_loss"]).c_str(),
                  format_fixed(rec["train_accuracy"]).c_str(), format_fixed(rec["val_loss"]).c_str(), format_fixed(rec["val_accuracy"]).c_str(),
                  heads.c_str(), rec["images_per_second"].get<double>());
    return line;
  }

  std::string plot_title() const override { return data_ + ": " + model_name_; }
  std::string plot_x() const override { return "epoch"; }
  std::vector<viz::Series> plot_series(const nlohmann::json& history) const override {
    viz::Series tl{"train loss", {}, {}}, vl{"val loss", {}, {}}, va{"val accuracy", {}, {}, true};
    for (size_t i = 0; i < history.size(); ++i) {
      ConfigReader h(history[i], "", "history[" + std::to_string(i) + "].");
      const double ep = h.get<double>("epoch_float");
      tl.x.push_back(ep); tl.y.push_back(h.get<double>("train_loss"));
      vl.x.push_back(ep); vl.y.push_back(h.get<double>("val_loss"));
      va.x.push_back(ep); va.y.push_back(h.get<double>("val_accuracy"));
    }
    return {tl, vl, va};
  }

  nlohmann::json train_state_extra() const override {
    nlohmann::json ts = {{"data", data_}, {"mean", mean_}, {"std", std_}};
    if (deit_ || teacher_) ts["distill"] = distill_json();
    if (!run_data_.classes.empty()) ts["class_names"] = run_data_.classes;
    return ts;
  }

  std::vector<Setting> settings() const override {
    return {{"--data", data_, true},
            {"--seed", cfg_.seed, true},
            {"--batch", ic_.batch, true},
            {"--limit-train", cfg_.limit_train, true},
            {"--augment", ic_.augment, true},
            {"--rand-augment", ic_.rand_augment, true},
            {"--rand-augment-magnitude", ic_.rand_augment_magnitude, true},
            {"--erase", ic_.erase_p, true},
            {"--mixup", ic_.mixup, true},
            {"--cutmix", ic_.cutmix, true},
            {"--repeated-aug", ic_.repeated_aug, true}};
  }

  nlohmann::json finish(const TrainResult& res, const nlohmann::json& history,
                        const std::shared_ptr<models::Model>& ema) override {
    EvalResult t = train::evaluate(*model_, *run_data_.test, mean_, std_, 256, ic_.limit_eval, &shard_);
    nlohmann::json m = {{"test_accuracy", t.accuracy}, {"test_loss", t.loss},
                        {"images_per_second", res.items_per_second}};
    m["val_accuracy"] = history.empty() ? NAN : history.back().at("val_accuracy").get<double>();
    if (deit_ || teacher_) m["distill"] = distill_json();
    if (deit_) {
      m["test_accuracy_cls"] = t.accuracy_cls;
      m["test_accuracy_dist"] = t.accuracy_dist;
    }
    if (ema) {
      auto c = std::dynamic_pointer_cast<models::ImageClassifier>(ema);
      ATTN_CHECK(c != nullptr, "train: the EMA copy is not an image classifier");
      m["test_accuracy_ema"] = train::evaluate(*c, *run_data_.test, mean_, std_, 256, ic_.limit_eval, &shard_).accuracy;
    }
    m["recipe"] = {{"augment", ic_.augment}, {"rand_augment", ic_.rand_augment},
                   {"rand_augment_magnitude", ic_.rand_augment_magnitude}, {"erase_p", ic_.erase_p},
                   {"mixup", ic_.mixup}, {"cutmix", ic_.cutmix}, {"label_smoothing", cfg_.label_smoothing},
                   {"repeated_aug", ic_.repeated_aug}};
    return m;
  }

 private:
  static double accuracy(const Window& w) {
    if (w.sums.size() < 2) return 0.0;
    return w.sums[0] / std::max(w.sums[1], 1.0);
  }
  nlohmann::json distill_json() const {
    return {{"type", ic_.distill}, {"teacher", ic_.teacher}, {"alpha", ic_.alpha}, {"tau", ic_.tau}};
  }
  void setup_distillation();
  void setup_loader();

  TrainConfig cfg_;
  ImageTaskConfig ic_;
  std::string data_, model_name_;
  std::vector<float> mean_, std_;
  std::shared_ptr<models::ImageClassifier> model_, teacher_;
  models::DistilledHeads* deit_ = nullptr;   // a model with DeiT's distillation head
  std::optional<DistillationLoss> criterion_;
  RunData run_data_;
  std::shared_ptr<data::Dataset> train_ds_;
  std::unique_ptr<data::DataLoader> loader_;
  Shard shard_;
  bool mixing_ = false;
  data::MixupOptions mix_opt_;
};

// The criterion, and the teacher (checked against the data before any step).
void ImageClassificationTask::setup_distillation() {
  const DistillType distill_type = parse_distill_type(ic_.distill);
  deit_ = models::as_distilled(*model_);
  ATTN_CHECK(distill_type == DistillType::none || !ic_.teacher.empty(), "train: --distill ", ic_.distill,
             " needs a teacher checkpoint (--teacher)");
  ATTN_CHECK(distill_type != DistillType::none || ic_.teacher.empty(), "train: a teacher ('", ic_.teacher,
             "') was given but --distill is none (use soft or hard)");
  criterion_.emplace(DistillConfig{.type = distill_type, .alpha = ic_.alpha, .tau = ic_.tau,
                                   .label_smoothing = cfg_.label_smoothing});
  const std::string data_name = is_folder_data(data_) ? "'" + data_ + "'" : data_;
  const Shape image_shape = train_ds_->image_shape();
  const int64_t data_classes = is_folder_data(data_) ? int64_t(run_data_.classes.size())
                                                     : int64_t(data::FashionMnist::class_names().size());
  const int64_t student_classes = output_classes(*model_, image_shape, "model " + model_name_);
  ATTN_CHECK(student_classes == data_classes, "train: the model ", model_name_, " predicts ", student_classes,
             " classes, but ", data_name, " has ", data_classes);
  mix_opt_.num_classes = student_classes;
  if (!ic_.teacher.empty()) {
    teacher_ = models::load_classifier_checkpoint(ic_.teacher);
    teacher_->eval();
    const int64_t teacher_classes = output_classes(*teacher_, image_shape, "teacher '" + ic_.teacher + "'");
    ATTN_CHECK(teacher_classes == data_classes, "train: the teacher '", ic_.teacher, "' predicts ", teacher_classes,
               " classes, but ", data_name, " has ", data_classes);
  }
}

void ImageClassificationTask::setup_loader() {
  ATTN_CHECK(ic_.batch > 0, "train: expected batch > 0, got ", ic_.batch);
  data::LoaderOptions lo;
  lo.batch_size = ic_.batch * shard_.world;   // the combined batch; this rank builds its part
  lo.shard_rank = shard_.rank;
  lo.shard_count = shard_.world;
  lo.shuffle = true;
  lo.drop_last = true;
  lo.seed = cfg_.seed;
  lo.mean = mean_;
  lo.std = std_;
  if (ic_.augment) {
    lo.augment.crop_padding = 2;
    lo.augment.hflip_p = 0.5;
  }
  lo.augment.rand_augment_ops = ic_.rand_augment;
  lo.augment.rand_augment_magnitude = ic_.rand_augment_magnitude;
  lo.augment.erase_p = ic_.erase_p;
  ATTN_CHECK(ic_.repeated_aug >= 0, "train: expected --repeated-aug >= 0, got ", ic_.repeated_aug);
  lo.repeats = ic_.repeated_aug;
  mixing_ = ic_.mixup > 0 || ic_.cutmix > 0;
  ATTN_CHECK(ic_.mixup >= 0 && ic_.cutmix >= 0, "train: expected --mixup and --cutmix >= 0, got ", ic_.mixup, " and ",
             ic_.cutmix);
  ATTN_CHECK(!mixing_ || ic_.batch % 2 == 0, "train: Mixup/CutMix needs an even batch size, got ", ic_.batch);
  mix_opt_.mixup_alpha = ic_.mixup;
  mix_opt_.cutmix_alpha = ic_.cutmix;
  mix_opt_.label_smoothing = cfg_.label_smoothing;
  loader_ = std::make_unique<data::DataLoader>(train_ds_, lo);
  ATTN_CHECK(loader_->batches_per_epoch() > 0, "train: ", train_ds_->size(), " training examples make no full batch of ",
             ic_.batch);
}

}  // namespace

EvalResult evaluate(models::ImageClassifier& model, const data::Dataset& ds, const std::vector<float>& mean,
                    const std::vector<float>& std, int64_t batch, int64_t limit, const Shard* shard) {
  NoGradGuard ng;
  const bool was_training = model.is_training();
  model.eval();
  std::shared_ptr<const data::Dataset> view(&ds, [](const data::Dataset*) {});
  if (limit > 0 && limit < ds.size()) view = std::make_shared<Prefix>(view, limit);
  if (shard && shard->world > 1) {
    const auto [from, to] = shard->part(view->size());
    view = std::make_shared<Prefix>(view, to - from, from);
  }
  data::LoaderOptions lo;
  lo.batch_size = batch;
  lo.shuffle = false;
  lo.mean = mean;
  lo.std = std;
  data::DataLoader loader(view, lo);
  EvalResult r;
  double loss_sum = 0;
  int64_t correct = 0, correct_cls = 0, correct_dist = 0;
  models::DistilledHeads* deit = models::as_distilled(model);
  for (int64_t b = 0; b < loader.batches_per_epoch(); ++b) {
    data::Batch bt = loader.next();
    Tensor logits;
    if (deit) {
      auto [cls, dist] = deit->forward_heads(bt.images);
      correct_cls += count_correct(cls, bt.labels);
      correct_dist += count_correct(dist, bt.labels);
      logits = models::combine_distilled_heads(cls, dist, deit->distilled_output());
    } else {
      logits = model.forward(bt.images);
    }
    CrossEntropyOptions ce;
    ce.reduction = Reduction::sum;
    loss_sum += cross_entropy(logits, bt.labels, ce).item();
    Tensor pred = argmax(logits, -1);
    const int64_t* p = pred.data<int64_t>();
    const int64_t* y = bt.labels.data<int64_t>();
    for (int64_t i = 0; i < pred.numel(); ++i) {
      correct += p[i] == y[i];
      r.predictions.push_back(p[i]);
      r.labels.push_back(y[i]);
    }
    r.count += pred.numel();
  }
  if (shard && shard->world > 1) {
    std::vector<double> v = {loss_sum, double(correct), double(correct_cls), double(correct_dist), double(r.count)};
    shard->sum(v);
    loss_sum = v[0];
    correct = int64_t(v[1]);
    correct_cls = int64_t(v[2]);
    correct_dist = int64_t(v[3]);
    r.count = int64_t(v[4]);
  }
  r.loss = r.count ? loss_sum / double(r.count) : NAN;
  r.accuracy = r.count ? double(correct) / double(r.count) : NAN;
  if (deit && r.count) {
    r.accuracy_cls = double(correct_cls) / double(r.count);
    r.accuracy_dist = double(correct_dist) / double(r.count);
  }
  model.train(was_training);
  return r;
}

std::unique_ptr<Task> make_image_classification_task(const TrainConfig& cfg) {
  return std::make_unique<ImageClassificationTask>(cfg);
}

}  // namespace attn::train

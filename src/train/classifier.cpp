// The image-classifier training loop (see include/attn/train/classifier.h).
#include "attn/train/classifier.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>

#include "attn/autograd/grad_mode.h"
#include "attn/core/parallel.h"
#include "attn/core/rng.h"
#include "attn/data/augment.h"
#include "attn/data/fashion_mnist.h"
#include "attn/data/image_folder_splits.h"
#include "attn/data/loader.h"
#include "attn/io/checkpoint.h"
#include "attn/train/checkpoint.h"
#include "attn/models/vit.h"
#include "attn/nn/init.h"
#include "attn/nn/linear.h"
#include "attn/ops/loss.h"
#include "attn/ops/reduce.h"
#include "attn/optim/adam.h"
#include "attn/optim/clip.h"
#include "attn/optim/schedule.h"
#include "attn/train/distill.h"
#include "attn/train/ema.h"
#include "attn/viz/plot.h"
#include "attn/train/progress.h"

namespace attn::train {

namespace {

void make_dirs(const std::string& path) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!cur.empty()) ::mkdir(cur.c_str(), 0755);
    }
    if (i < path.size()) cur.push_back(path[i]);
  }
  struct stat st;
  ATTN_CHECK(::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode), "train: cannot create output directory '",
             path, "'");
}

// The datasets of a run: Fashion-MNIST (its fixed validation split held out of the training file), or
// an image folder (data/image_folder_splits.h) read at the model's image size and channel count.
struct RunData {
  std::shared_ptr<data::Dataset> train, val, test;
  std::vector<std::string> classes;   // image folders: the class names (Fashion-MNIST: empty)
};

bool is_folder_data(const std::string& data) { return data != "fashion-mnist"; }

RunData load_data(const TrainConfig& cfg, const nlohmann::json& model_cfg, const char* who) {
  RunData d;
  if (!is_folder_data(cfg.data)) {
    d.train = std::make_shared<data::FashionMnist>(data::FashionMnist::load(cfg.data_dir, data::Split::train));
    d.val = std::make_shared<data::FashionMnist>(data::FashionMnist::load(cfg.data_dir, data::Split::val));
    d.test = std::make_shared<data::FashionMnist>(data::FashionMnist::load(cfg.data_dir, data::Split::test));
    return d;
  }
  ATTN_CHECK(model_cfg.contains("image_size") && model_cfg["image_size"].is_number_integer() &&
                 model_cfg.contains("in_channels") && model_cfg["in_channels"].is_number_integer(),
             who, ": the model ", model_cfg.value("model", std::string("?")),
             " has no integer image_size / in_channels in its config: it cannot read an image folder");
  const int64_t size = model_cfg["image_size"].get<int64_t>(), channels = model_cfg["in_channels"].get<int64_t>();
  data::ImageFolderSplits s = data::load_image_folder_splits(cfg.data, size, channels);
  d.train = s.train;
  d.val = s.val;
  d.test = s.test;
  d.classes = s.classes;
  if (!cfg.quiet)
    std::fprintf(stderr,
                 "data: %s: %zu classes; %lld training images, %lld validation (%s), %lld test (%s); read at "
                 "%lld x %lld, %lld channel%s (the model's image_size / in_channels: --model-config sets them)\n",
                 cfg.data.c_str(), s.classes.size(), (long long)s.train->size(), (long long)s.val->size(),
                 s.val_from.c_str(), (long long)s.test->size(), s.test_from.c_str(),
                 (long long)size, (long long)size, (long long)channels, channels == 1 ? "" : "s");
  return d;
}

// The first n examples of a dataset.
class Prefix : public data::Dataset {
 public:
  Prefix(std::shared_ptr<const data::Dataset> base, int64_t n) : base_(std::move(base)), n_(std::min(n, base_->size())) {}
  int64_t size() const override { return n_; }
  Shape image_shape() const override { return base_->image_shape(); }
  int64_t read(int64_t i, float* out) const override {
    ATTN_CHECK(i >= 0 && i < n_, "dataset: index ", i, " out of range [0, ", n_, ")");
    return base_->read(i, out);
  }
 private:
  std::shared_ptr<const data::Dataset> base_;
  int64_t n_;
};

// A distilled (DeiT) model's VisionTransformer, or null.
models::VisionTransformer* as_distilled(models::ImageClassifier& m) {
  auto* v = dynamic_cast<models::VisionTransformer*>(&m);
  return v && v->cfg().distilled ? v : nullptr;
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

std::string nonfinite_name(double v) { return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"); }

std::string fmt(double v, const char* f = "%.4f") {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// The settings of a run, as (flag, value), stored in every checkpoint. `order`: the data order and
// augmentation depend on it, so --resume refuses a call that changes it (the run would silently not
// continue as it was); the others (schedule, optimizer, loss) a user may change on purpose when
// resuming — lower --lr after a non-finite loss, more --epochs — and is told that the run differs.
struct Setting {
  std::string flag;
  nlohmann::json value;
  bool order;
};

std::vector<Setting> run_settings(const TrainConfig& c) {
  return {{"--data", c.data, true},
          {"--seed", c.seed, true},
          {"--batch", c.batch, true},
          {"--limit-train", c.limit_train, true},
          {"--augment", c.augment, true},
          {"--rand-augment", c.rand_augment, true},
          {"--rand-augment-magnitude", c.rand_augment_magnitude, true},
          {"--erase", c.erase_p, true},
          {"--mixup", c.mixup, true},
          {"--cutmix", c.cutmix, true},
          {"--repeated-aug", c.repeated_aug, true},
          {"--epochs", c.epochs, false},
          {"--max-steps", c.max_steps, false},
          {"--lr", c.lr, false},
          {"--min-lr", c.min_lr, false},
          {"--warmup-epochs", c.warmup_epochs, false},
          {"--wd", c.weight_decay, false},
          {"--label-smoothing", c.label_smoothing, false},
          {"--clip-grad", c.clip_grad, false},
          {"--ema-decay", c.ema_decay, false}};
}

nlohmann::json run_settings_json(const TrainConfig& c) {
  nlohmann::json j = nlohmann::json::object();
  for (const Setting& st : run_settings(c)) j[st.flag] = st.value;
  return j;
}

// An error naming every data-order setting of this call that differs from the checkpoint's; a note
// (stderr, unless quiet) for the others.
void check_resume_settings(const TrainConfig& c, const nlohmann::json& train_state, const std::string& ckpt) {
  if (!train_state.contains("settings") || !train_state["settings"].is_object()) return;   // older checkpoints
  const nlohmann::json& saved = train_state["settings"];
  std::string then, now, changed;
  for (const Setting& st : run_settings(c)) {
    if (!saved.contains(st.flag) || saved[st.flag] == st.value) continue;
    if (st.order) {
      then += (then.empty() ? "" : ", ") + st.flag + " " + saved[st.flag].dump();
      now += (now.empty() ? "" : ", ") + st.flag + " " + st.value.dump();
    } else {
      changed += (changed.empty() ? "" : ", ") + st.flag + " " + st.value.dump() + " (was " + saved[st.flag].dump() + ")";
    }
  }
  if (!then.empty())
    fail("train --resume: '", ckpt, "' was trained with ", then, "; this call has ", now,
         ". The data order and augmentation depend on these: pass the run's own values to continue it");
  if (!changed.empty() && !c.quiet)
    std::fprintf(stderr, "resuming with changed settings: %s; the run no longer equals an uninterrupted one\n",
                 changed.c_str());
}

}  // namespace

std::pair<std::vector<float>, std::vector<float>> dataset_normalization(const std::string& data) {
  if (data == "fashion-mnist") return {{0.2860f}, {0.3530f}};
  return {{0.5f}, {0.5f}};
}

EvalResult evaluate(models::ImageClassifier& model, const data::Dataset& ds, const std::vector<float>& mean,
                    const std::vector<float>& std, int64_t batch, int64_t limit) {
  NoGradGuard ng;
  const bool was_training = model.is_training();
  model.eval();
  std::shared_ptr<const data::Dataset> view(&ds, [](const data::Dataset*) {});
  if (limit > 0 && limit < ds.size()) view = std::make_shared<Prefix>(view, limit);
  data::LoaderOptions lo;
  lo.batch_size = batch;
  lo.shuffle = false;
  lo.mean = mean;
  lo.std = std;
  data::DataLoader loader(view, lo);
  EvalResult r;
  double loss_sum = 0;
  int64_t correct = 0, correct_cls = 0, correct_dist = 0;
  models::VisionTransformer* deit = as_distilled(model);
  auto count_correct = [](const Tensor& logits, const Tensor& labels) {
    Tensor pred = argmax(logits, -1);
    const int64_t* p = pred.data<int64_t>();
    const int64_t* y = labels.data<int64_t>();
    int64_t c = 0;
    for (int64_t i = 0; i < pred.numel(); ++i) c += p[i] == y[i];
    return c;
  };
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
  r.loss = r.count ? loss_sum / double(r.count) : NAN;
  r.accuracy = r.count ? double(correct) / double(r.count) : NAN;
  if (deit && r.count) {
    r.accuracy_cls = double(correct_cls) / double(r.count);
    r.accuracy_dist = double(correct_dist) / double(r.count);
  }
  model.train(was_training);
  return r;
}

std::shared_ptr<models::ImageClassifier> load_classifier(const std::string& checkpoint, DType linear_dtype) {
  // Streamed: the header first (metadata, names, shapes), then one tensor at a time into the model, so
  // the peak is the model (in its final dtypes) plus one tensor. Messages as io::load_checkpoint's.
  ATTN_CHECK(linear_dtype == DType::f32 || linear_dtype == DType::bf16, "load: expected the Linear weights' dtype "
             "f32 or bf16, got ", dtype_name(linear_dtype));
  std::optional<io::SafetensorsReader> file;
  try {
    file.emplace(checkpoint);
  } catch (const Error& e) {
    fail("load_checkpoint: cannot read '", checkpoint, "': ", e.what());
  }
  const nlohmann::json meta = io::checkpoint_metadata(*file);
  const nlohmann::json cfg = meta.contains("config") ? meta["config"] : nlohmann::json();
  ATTN_CHECK(cfg.is_object() && cfg.contains("model"),
             "load: checkpoint '", checkpoint, "' has no model config (expected __metadata__.config with a "
             "\"model\" name)");
  std::shared_ptr<models::ImageClassifier> model;
  {
    nn::init::SkipRandomInit skip(nn::init::SkipRandomInit::Fill::none);   // the strict load below overwrites every parameter
    model = models::create_model(cfg["model"].get<std::string>(), cfg);
  }
  // Before the copy, so that it converts f32 -> bf16 one tensor at a time.
  if (linear_dtype == DType::bf16) nn::make_linear_weights_bf16(*model);
  const std::string optim_prefix = "optim.";
  nn::Module::ShapeList shapes;
  for (const io::SafetensorsEntry& e : file->entries())
    if (!e.name.starts_with(optim_prefix)) shapes.emplace_back(e.name, e.shape);
  const std::string why = model->shape_mismatch(shapes, /*strict=*/true, /*max_listed=*/5);
  if (!why.empty()) fail("load_checkpoint: '", checkpoint, "' is for another model: ", why);
  model->load_state_dict(*file, {.strict = true, .skip_prefix = optim_prefix});   // checked above: cannot fail now
  model->eval();
  return model;
}

std::shared_ptr<models::ImageClassifier> load_classifier(const std::string& checkpoint) {
  return load_classifier(checkpoint, DType::f32);
}

TrainResult train_classifier(const TrainConfig& cfg_in) {
  TrainConfig cfg = cfg_in;
  ATTN_CHECK(cfg.epochs > 0 && cfg.batch > 0, "train: expected epochs > 0 and batch > 0, got epochs ", cfg.epochs,
             ", batch ", cfg.batch);
  make_dirs(cfg.out);
  TrainResult res;
  res.checkpoint = cfg.out + "/checkpoint.safetensors";
  res.log = cfg.out + "/log.jsonl";
  res.plot = cfg.out + "/curve.svg";
  res.metrics = cfg.out + "/metrics.json";

  // (plain variables, not a structured binding: the lambdas below capture them, which clang 14 rejects)
  const auto norm = dataset_normalization(cfg.data);
  const std::vector<float> mean = norm.first, std = norm.second;

  // Model: weights from the seed (init draws from the default generator).
  manual_seed(cfg.seed);
  nlohmann::json train_state;
  std::shared_ptr<models::ImageClassifier> model;
  nlohmann::json model_cfg;
  if (cfg.resume) {
    struct stat st;
    ATTN_CHECK(::stat(res.checkpoint.c_str(), &st) == 0, "train --resume: there is no checkpoint to resume at '",
               res.checkpoint, "' (--out ", cfg.out, "); run without --resume to start training");
    nlohmann::json meta = io::read_checkpoint_metadata(res.checkpoint);
    model_cfg = meta.at("config");
    train_state = meta.at("train_state");
    check_resume_settings(cfg, train_state, res.checkpoint);
    model = models::create_model(model_cfg.at("model").get<std::string>(), model_cfg);
    // Distillation settings: the checkpoint's, unless this call names a teacher of its own.
    if (cfg.teacher.empty() && cfg.distill == "none" && train_state.contains("distill")) {
      const auto& d = train_state["distill"];
      cfg.distill = d.at("type").get<std::string>();
      cfg.teacher = d.at("teacher").get<std::string>();
      cfg.alpha = d.at("alpha").get<double>();
      cfg.tau = d.at("tau").get<double>();
    }
  } else {
    // An image folder sets the class count unless --model-config does (as timm's --num-classes).
    nlohmann::json overrides = cfg.model_config;
    if (is_folder_data(cfg.data) && !overrides.contains("num_classes"))
      overrides["num_classes"] = int64_t(data::image_folder_classes(cfg.data).size());
    model = models::create_model(cfg.model, overrides);
    model_cfg = model->config();
  }
  model->train();

  // Data: after the model, whose image size and channel count an image folder is read at. (Loading
  // draws nothing from the default generator: the weights above are the same either way.)
  RunData run_data = load_data(cfg, model_cfg, "train");
  std::shared_ptr<data::Dataset> train_ds = run_data.train;
  if (cfg.limit_train > 0) train_ds = std::make_shared<Prefix>(train_ds, cfg.limit_train);
  std::shared_ptr<data::Dataset> val_ds = run_data.val;
  const std::string data_name = is_folder_data(cfg.data) ? "'" + cfg.data + "'" : cfg.data;

  // DeiT distillation: the criterion, and the teacher (checked against the data before any step).
  const DistillType distill_type = parse_distill_type(cfg.distill);
  models::VisionTransformer* deit = as_distilled(*model);
  const std::string model_name = model_cfg.at("model").get<std::string>();
  ATTN_CHECK(distill_type == DistillType::none || deit, "train: --distill ", cfg.distill, " needs a model with a ",
             "distillation token (e.g. deit_fmnist_distilled), got ", model_name);
  ATTN_CHECK(distill_type == DistillType::none || !cfg.teacher.empty(), "train: --distill ", cfg.distill,
             " needs a teacher checkpoint (--teacher)");
  ATTN_CHECK(distill_type != DistillType::none || cfg.teacher.empty(), "train: a teacher ('", cfg.teacher,
             "') was given but --distill is none (use soft or hard)");
  const DistillationLoss criterion({.type = distill_type, .alpha = cfg.alpha, .tau = cfg.tau,
                                    .label_smoothing = cfg.label_smoothing});
  std::shared_ptr<models::ImageClassifier> teacher;
  const Shape image_shape = train_ds->image_shape();
  const int64_t data_classes = is_folder_data(cfg.data) ? int64_t(run_data.classes.size())
                                                        : int64_t(data::FashionMnist::class_names().size());
  const int64_t student_classes = output_classes(*model, image_shape, "model " + model_name);
  ATTN_CHECK(student_classes == data_classes, "train: the model ", model_name, " predicts ", student_classes,
             " classes, but ", data_name, " has ", data_classes);
  if (!cfg.teacher.empty()) {
    teacher = load_classifier(cfg.teacher);
    teacher->eval();
    const int64_t teacher_classes = output_classes(*teacher, image_shape, "teacher '" + cfg.teacher + "'");
    ATTN_CHECK(teacher_classes == data_classes, "train: the teacher '", cfg.teacher, "' predicts ", teacher_classes,
               " classes, but ", data_name, " has ", data_classes);
  }
  const nlohmann::json distill_json = {
      {"type", cfg.distill}, {"teacher", cfg.teacher}, {"alpha", cfg.alpha}, {"tau", cfg.tau}};

  data::LoaderOptions lo;
  lo.batch_size = cfg.batch;
  lo.shuffle = true;
  lo.drop_last = true;
  lo.seed = cfg.seed;
  lo.mean = mean;
  lo.std = std;
  if (cfg.augment) {
    lo.augment.crop_padding = 2;
    lo.augment.hflip_p = 0.5;
  }
  lo.augment.rand_augment_ops = cfg.rand_augment;
  lo.augment.rand_augment_magnitude = cfg.rand_augment_magnitude;
  lo.augment.erase_p = cfg.erase_p;
  ATTN_CHECK(cfg.repeated_aug >= 0, "train: expected --repeated-aug >= 0, got ", cfg.repeated_aug);
  lo.repeats = cfg.repeated_aug;
  const bool mixing = cfg.mixup > 0 || cfg.cutmix > 0;
  ATTN_CHECK(cfg.mixup >= 0 && cfg.cutmix >= 0, "train: expected --mixup and --cutmix >= 0, got ", cfg.mixup, " and ",
             cfg.cutmix);
  ATTN_CHECK(!mixing || cfg.batch % 2 == 0, "train: Mixup/CutMix needs an even batch size, got ", cfg.batch);
  ATTN_CHECK(cfg.ema_decay >= 0 && cfg.ema_decay < 1, "train: expected --ema-decay in [0, 1), got ", cfg.ema_decay);
  data::MixupOptions mix_opt;
  mix_opt.mixup_alpha = cfg.mixup;
  mix_opt.cutmix_alpha = cfg.cutmix;
  mix_opt.label_smoothing = cfg.label_smoothing;
  mix_opt.num_classes = student_classes;
  data::DataLoader loader(train_ds, lo);
  const int64_t per_epoch = loader.batches_per_epoch();
  ATTN_CHECK(per_epoch > 0, "train: ", train_ds->size(), " training examples make no full batch of ", cfg.batch);
  int64_t total = cfg.epochs * per_epoch;
  if (cfg.max_steps > 0) total = std::min(total, cfg.max_steps);
  // Where this call stops: the end, or earlier as if killed (the schedule does not change).
  const int64_t stop = cfg.stop_after > 0 ? std::min(total, cfg.stop_after) : total;

  auto groups = optim::param_groups_weight_decay(*model, cfg.weight_decay);
  optim::AdamW opt(groups, {.lr = cfg.lr, .weight_decay = cfg.weight_decay});
  optim::WarmupCosine sched({.base_lr = cfg.lr, .total_steps = total,
                             .warmup_steps = int64_t(cfg.warmup_epochs * double(per_epoch)),
                             .warmup_lr_init = cfg.lr * 1e-3, .min_lr = cfg.min_lr});

  int64_t step = 0;
  nlohmann::json history = nlohmann::json::array();
  if (cfg.resume) {
    load_checkpoint(res.checkpoint, *model, &opt);
    step = train_state.at("step").get<int64_t>();
    default_generator().set_state(train_state.at("rng_seed").get<uint64_t>(), train_state.at("rng_offset").get<uint64_t>());
    history = train_state.value("history", nlohmann::json::array());
    if (!cfg.quiet) std::fprintf(stderr, "resuming %s from step %lld\n", res.checkpoint.c_str(), (long long)step);
  }
  std::unique_ptr<ModelEma> ema;
  const std::string ema_path = cfg.out + "/checkpoint_ema.safetensors";
  if (cfg.ema_decay > 0) {
    ema = std::make_unique<ModelEma>(ModelEma::of(*model, cfg.ema_decay));
    if (cfg.resume && step > 0) load_checkpoint(ema_path, ema->module(), nullptr);
  }
  loader.seek_global(step);
  // The log is rewritten from the checkpoint's history, so records after it (a killed run) go.
  {
    std::string text;
    for (const auto& h : history) text += h.dump() + "\n";
    io::write_file_atomic(res.log, text);
  }

  // Running sums of the current epoch (saved in mid-epoch checkpoints so a resumed epoch's
  // summary equals the uninterrupted one).
  double ep_loss = 0;
  int64_t ep_correct = 0, ep_count = 0, ep_steps = 0;
  bool resumed_mid_epoch = false;
  if (cfg.resume && train_state.contains("epoch_acc") && step % per_epoch != 0) {
    const auto& a = train_state["epoch_acc"];
    ep_loss = a[0].get<double>(); ep_correct = a[1].get<int64_t>(); ep_count = a[2].get<int64_t>();
    ep_steps = a[3].get<int64_t>();
    resumed_mid_epoch = true;
  }
  // Training time of the run so far, across resumes (as seq2seq): the checkpoint carries the time spent
  // on the steps it holds (work lost to a kill is redone and counted once), so a budget can be run in
  // pieces. images_per_second stays this invocation's.
  const double prior_seconds = cfg.resume ? train_state.value("seconds", 0.0) : 0.0;
  const auto t_start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count(); };
  auto run_seconds = [&] { return prior_seconds + elapsed(); };
  auto save = [&](int64_t at_step) {
    nlohmann::json ts = {{"step", at_step}, {"seconds", run_seconds()}, {"epoch", at_step / per_epoch},
                         {"rng_seed", default_generator().seed()}, {"rng_offset", default_generator().offset()},
                         {"history", history},
                         {"data", cfg.data}, {"mean", mean}, {"std", std},
                         {"epoch_acc", {ep_loss, ep_correct, ep_count, ep_steps}},
                         {"settings", run_settings_json(cfg)}};
    if (deit || teacher) ts["distill"] = distill_json;
    if (!run_data.classes.empty()) ts["class_names"] = run_data.classes;
    // The EMA first: a checkpoint never points at an EMA file older than itself.
    if (ema) save_checkpoint(ema_path, ema->module(), nullptr, {{"config", model_cfg}, {"ema_decay", cfg.ema_decay},
                                                             {"step", at_step}});
    save_checkpoint(res.checkpoint, *model, &opt, {{"config", model_cfg}, {"train_state", ts}});
  };
  auto write_plot = [&] {
    Series tl{"train loss", {}, {}}, vl{"val loss", {}, {}}, va{"val accuracy", {}, {}, true};
    for (const auto& h : history) {
      const double ep = h.at("epoch_float").get<double>();
      tl.x.push_back(ep); tl.y.push_back(h.at("train_loss").get<double>());
      vl.x.push_back(ep); vl.y.push_back(h.at("val_loss").get<double>());
      va.x.push_back(ep); va.y.push_back(h.at("val_accuracy").get<double>());
    }
    write_svg_plot(res.plot, cfg.data + ": " + model_name, "epoch", {tl, vl, va});
  };

  int64_t images = 0;
  std::unique_ptr<ProgressBar> bar;
  bool in_epoch_loop = false;
  while (step < stop) {
    const int64_t epoch = step / per_epoch, in_epoch = step % per_epoch;
    if (!in_epoch_loop) {
      in_epoch_loop = true;
      const int64_t epoch_steps = std::min(per_epoch, total - epoch * per_epoch);
      if (cfg.progress)
        bar = std::make_unique<ProgressBar>("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(cfg.epochs),
                                            epoch_steps, "img");
      if (!resumed_mid_epoch) { ep_loss = 0; ep_correct = 0; ep_count = 0; ep_steps = 0; }
      resumed_mid_epoch = false;
    }
    data::Batch b = loader.next();
    sched.apply(opt, step);
    Tensor logits, loss;
    Tensor x = b.images, target = b.labels;
    if (mixing) {
      // One generator position per step: the same step mixes the same way after a resume.
      Generator mg(cfg.seed ^ 0x6d69787570ull);
      mg.set_state(mg.seed(), uint64_t(step) << 16);
      data::MixedBatch mb = data::mixup(b.images, b.labels, mix_opt, mg);
      x = mb.images;
      target = mb.targets;
    }
    if (deit) {
      // DeiT: both heads; the teacher sees the same (augmented) batch, in eval mode, without grad.
      auto [cls, dist] = deit->forward_heads(x);
      Tensor t;
      if (teacher) {
        NoGradGuard ng;
        t = teacher->forward(x);
      }
      loss = criterion(cls, dist, target, t).total;
      NoGradGuard ng;
      logits = models::combine_distilled_heads(cls.detach(), dist.detach(), deit->distilled_output());
    } else {
      logits = model->forward(x);
      // Mixed targets already carry the label smoothing.
      loss = cross_entropy(logits, target, {.label_smoothing = mixing ? 0.0 : cfg.label_smoothing});
    }
    const double lv = loss.item();
    if (!std::isfinite(lv)) {
      if (bar) bar->finish();
      fail("train: the loss became ", nonfinite_name(lv), " at step ", step + 1, " (epoch ", epoch + 1,
           "); stopped. The last good checkpoint is kept at ", res.checkpoint,
           " (resume with --resume after lowering --lr)");
    }
    loss.backward();
    if (cfg.clip_grad > 0) optim::clip_grad_norm_(model->parameters(), cfg.clip_grad);
    opt.step();
    opt.zero_grad();
    if (ema) ema->update(*model);
    res.step_losses.push_back(lv);
    ++step;
    ++ep_steps;
    images += b.labels.numel();
    ep_loss += lv;
    {
      NoGradGuard ng;
      Tensor pred = argmax(logits, -1);
      const int64_t* p = pred.data<int64_t>();
      const int64_t* y = b.labels.data<int64_t>();
      for (int64_t i = 0; i < pred.numel(); ++i) ep_correct += p[i] == y[i];
      ep_count += pred.numel();
    }
    if (bar)
      bar->update(in_epoch + 1, b.labels.numel(), {{"loss", ep_loss / double(ep_steps)},
                                               {"acc", double(ep_correct) / double(std::max<int64_t>(ep_count, 1))}});
    const bool epoch_end = step % per_epoch == 0 || step == total;
    if (epoch_end) {
      if (bar) bar->finish();
      bar.reset();
      in_epoch_loop = false;
      EvalResult v = evaluate(*model, *val_ds, mean, std, 256, cfg.limit_eval);
      const double secs = elapsed();
      nlohmann::json rec = {{"epoch", epoch + 1}, {"epoch_float", double(step) / double(per_epoch)}, {"step", step},
                            {"train_loss", ep_loss / double(ep_steps)},
                            {"train_accuracy", double(ep_correct) / double(std::max<int64_t>(ep_count, 1))},
                            {"val_loss", v.loss}, {"val_accuracy", v.accuracy}, {"lr", sched.lr(step - 1)},
                            {"images_per_second", double(images) / secs}};
      if (deit) {
        rec["val_accuracy_cls"] = v.accuracy_cls;
        rec["val_accuracy_dist"] = v.accuracy_dist;
        rec["val_accuracy_both"] = v.accuracy;
      }
      history.push_back(rec);
      {
        std::ofstream f(res.log, std::ios::app);
        f << rec.dump() << "\n";
      }
      write_plot();
      save(step);
      if (!cfg.quiet) {
        std::string heads;
        if (deit)
          heads = " (class head " + fmt(v.accuracy_cls) + ", distillation head " + fmt(v.accuracy_dist) + ")";
        std::fprintf(stderr, "epoch %lld: train loss %s, train acc %s, val loss %s, val acc %s%s, %.0f img/s\n",
                     (long long)(epoch + 1), fmt(rec["train_loss"]).c_str(), fmt(rec["train_accuracy"]).c_str(),
                     fmt(v.loss).c_str(), fmt(v.accuracy).c_str(), heads.c_str(), double(images) / secs);
      }
    } else if (cfg.checkpoint_every > 0 && step % cfg.checkpoint_every == 0) {
      save(step);
    }
  }
  const double secs = elapsed();
  res.steps = step;
  res.images_per_second = secs > 0 ? double(images) / secs : 0;
  res.final_train_loss = res.step_losses.empty() ? NAN : res.step_losses.back();
  if (!history.empty()) res.val_accuracy = history.back().at("val_accuracy").get<double>();
  if (step < total) return res;   // stopped early (stop_after): as if killed, no final evaluation
  const std::shared_ptr<data::Dataset> test_ds = run_data.test;
  EvalResult t = evaluate(*model, *test_ds, mean, std, 256, cfg.limit_eval);
  res.test_accuracy = t.accuracy;
  res.test_loss = t.loss;
  res.test_accuracy_cls = t.accuracy_cls;
  res.test_accuracy_dist = t.accuracy_dist;
  if (ema) res.test_accuracy_ema = evaluate(*ema->classifier(), *test_ds, mean, std, 256, cfg.limit_eval).accuracy;
  nlohmann::json m = {{"model", model_cfg}, {"steps", step}, {"test_accuracy", t.accuracy}, {"test_loss", t.loss},
                      {"val_accuracy", res.val_accuracy}, {"images_per_second", res.images_per_second},
                      {"threads", get_num_threads()}, {"seconds", run_seconds()}};
  if (deit || teacher) {
    m["distill"] = distill_json;
    m["test_accuracy_cls"] = t.accuracy_cls;
    m["test_accuracy_dist"] = t.accuracy_dist;
  }
  if (ema) {
    m["ema_decay"] = cfg.ema_decay;
    m["test_accuracy_ema"] = res.test_accuracy_ema;
  }
  m["recipe"] = {{"augment", cfg.augment}, {"rand_augment", cfg.rand_augment},
                 {"rand_augment_magnitude", cfg.rand_augment_magnitude}, {"erase_p", cfg.erase_p},
                 {"mixup", cfg.mixup}, {"cutmix", cfg.cutmix}, {"label_smoothing", cfg.label_smoothing},
                 {"repeated_aug", cfg.repeated_aug}};
  io::write_file_atomic(res.metrics, m.dump(2) + "\n");
  return res;
}

}  // namespace attn::train

// attn eval CKPT: accuracy and loss of a checkpoint on a dataset split (BERT text checkpoints of
// attn train --task classify | tag: accuracy, macro-F1 and span F1 on their WordNet data).
// attn eval --weights W --model NAME --data DIR (or a checkpoint made by `attn convert`): top-1 / top-5
// of foreign ImageNet weights on a folder of labelled images (infer/folder_eval.h), with the weights'
// own eval preprocessing, as timm's validate.py reports them. Every classifier comes from
// models::load_pretrained.
#include <cstdio>
#include <filesystem>

#include "attn/attn.h"
#include "attn/core/json_config.h"
#include "attn/data/dataset.h"
#include "attn/data/fashion_mnist.h"
#include "attn/data/image_folder.h"
#include "attn/infer/folder_eval.h"
#include "attn/io/checkpoint.h"
#include "attn/io/safetensors.h"
#include "attn/models/pretrained.h"
#include "attn/train/tasks/image_classification.h"
#include "attn/infer/translate.h"
#include "attn/train/tasks/sequence_classification.h"
#include "attn/train/tasks/translation.h"
#include "attn/viz/plot.h"
#include "../commands.h"
#include "bert_flags.h"
#include "source_flags.h"

namespace attn::cli {

namespace {

// DIR/val or DIR/test (DIR/<split> when --split is given) when there is one, else DIR itself.
std::string eval_folder(const std::string& dir, const std::string& split, bool split_given) {
  namespace fs = std::filesystem;
  ATTN_CHECK(fs::is_directory(dir), "eval: --data '", dir, "' is not a folder (expected a folder of class "
             "subfolders, e.g. ImageNet's val/ in torchvision's ImageFolder layout)");
  const std::vector<std::string> tries = split_given ? std::vector<std::string>{split}
                                                     : std::vector<std::string>{"val", "test"};
  for (const auto& t : tries)
    if (fs::is_directory(fs::path(dir) / t)) return (fs::path(dir) / t).string();
  return dir;
}

// Top-1 / top-5 of an ImageNet-style classifier (foreign weights, or attn convert's checkpoints) on
// a folder, as timm's validate.py.
void eval_on_folder(const models::Pretrained& cl, const std::string& what, const std::string& data,
                    const std::string& split, bool split_given, int64_t batch, int64_t limit, bool json) {
  ATTN_CHECK(!data.empty() && data != "fashion-mnist", "eval: ", what, " is an ImageNet-style classifier (",
             cl.model_name, ", ", cl.source, " preprocessing): expected --data DIR, a folder of class subfolders "
             "(WordNet IDs such as n01440764, the model's class names, or one folder per class in index order)");
  const std::string root = eval_folder(data, split, split_given);
  const int64_t num_classes = cl.model->config().value("num_classes", int64_t(0));
  const infer::FolderLabelMap map =
      infer::map_folder_classes(data::ImageFolder::find_classes(root), num_classes, cl.labels);
  infer::FolderEvalOptions o;
  o.pre = cl.preprocess;
  o.batch = batch;
  o.limit = limit;
  o.progress = true;
  const infer::FolderEvalResult r = infer::evaluate_folder(*cl.model, root, map, o);
  const char* rule = map.rule == "wnid" ? "WordNet IDs -> ImageNet-1k indices"
                     : map.rule == "name" ? "folder names = class names"
                                          : "sorted folder order = class index";
  if (json) {
    nlohmann::json per = nlohmann::json::array();
    for (const auto& c : r.per_class)
      per.push_back({{"folder", c.folder}, {"class", c.model_class}, {"images", c.count},
                     {"top1", c.count ? double(c.top1) / double(c.count) : 0.0},
                     {"top5", c.count ? double(c.top5) / double(c.count) : 0.0}});
    std::printf("%s\n", nlohmann::json({{"model", cl.model_name}, {"weights", what}, {"source", cl.source},
                                        {"data", root}, {"preprocess", cl.preprocess.describe()}, {"labels", map.rule},
                                        {"images", r.count}, {"top1", r.top1}, {"top5", r.top5}, {"loss", r.loss},
                                        {"seconds", r.seconds}, {"errors", r.errors}, {"per_class", per}})
                             .dump()
                             .c_str());
  } else {
    std::printf("%s (%s weights %s) on %s: top-1 %.2f%%, top-5 %.2f%% (%lld images), loss %.4f\n",
                cl.model_name.c_str(), cl.source.c_str(), what.c_str(), root.c_str(), 100 * r.top1, 100 * r.top5,
                (long long)r.count, r.loss);
    std::printf("  preprocessing: %s\n  labels: %zu folders, %s\n  %.2f s, %.1f img/s\n",
                cl.preprocess.describe().c_str(), map.folders.size(), rule, r.seconds, r.seconds > 0 ? double(r.count) / r.seconds : 0.0);
  }
  std::fflush(stdout);
  for (const auto& e : r.errors) std::fprintf(stderr, "attn: error: %s\n", e.c_str());
  ATTN_CHECK(r.errors.empty(), "eval: ", r.errors.size(), " of ", r.errors.size() + size_t(r.count),
             " images could not be read (the others are scored above)");
}

// Corpus BLEU (sacreBLEU's default) of a translation checkpoint on its own data split.
void eval_translation(const std::string& ckpt, io::CheckpointWeights weights, const std::string& split, int64_t limit,
                      int64_t beam, double length_penalty, const std::string& hyps_out, bool json) {
  infer::Translator tr = infer::load_translator(ckpt, weights);
  const train::TranslationDataSpec d = train::translation_data_spec(tr.metadata(), "checkpoint '" + ckpt + "'");
  ATTN_CHECK(split == "test" || split == "dev" || split == "val", "eval: translation splits are dev | "
             "test, got '", split, "'");
  data::PairSplits sp = train::load_translation_data(d.data, d.seed, "/usr/share/sword", d.synthetic_size,
                                                     d.dev_count, d.test_count);
  std::vector<data::TextPair> pairs = split == "test" ? sp.test : sp.dev;
  if (limit > 0 && int64_t(pairs.size()) > limit) pairs.resize(size_t(limit));
  std::vector<std::string> hyps;
  text::BleuScore s = tr.bleu(pairs, beam, length_penalty, &hyps);
  if (!hyps_out.empty()) {
    std::string text;
    for (const auto& h : hyps) text += h + "\n";
    io::write_file_atomic(hyps_out, text);
  }
  if (json) {
    std::printf("%s\n", nlohmann::json({{"checkpoint", ckpt}, {"split", split}, {"bleu", s.score},
                                        {"bleu_line", s.format()}, {"sentences", pairs.size()},
                                        {"beam", beam}}).dump().c_str());
  } else {
    std::printf("%s on %s/%s (%zu sentences, beam %lld): %s\n", ckpt.c_str(), d.data.c_str(),
                split.c_str(), pairs.size(), (long long)beam, s.format().c_str());
  }
}

// Accuracy and macro-F1 (sequence labelling: span F1 too) of a fine-tuned BERT checkpoint on a split
// of the data it was trained on.
void eval_text(const std::string& ckpt, const nlohmann::json& meta, const std::string& split, int64_t limit,
               int64_t batch, bool json, DType linear_dtype) {
  if (meta.contains("quantization") && linear_dtype == DType::f32) linear_dtype = DType::i8;   // attn quantize's
  const infer::TextModel m = infer::load_text_model(ckpt, linear_dtype);
  ConfigReader r = ConfigReader(meta, "checkpoint '" + ckpt + "'").object("text_task");
  const std::string data = r.get<std::string>("data");
  const int64_t n = limit > 0 ? limit : 0;
  train::TextTaskData d = train::load_text_task_data(data, r.get<uint64_t>("seed"), m.pipeline.tokenizer,
                                                     r.get<int64_t>("max_length", Range::positive), n, n);
  ATTN_CHECK(d.labels == m.labels, "eval: '", ckpt, "' predicts ", m.labels.size(), " labels (", m.labels.front(),
             ", ...), but ", data, " has ", d.labels.size(), " (", d.labels.front(), ", ...)");
  ATTN_CHECK(split == "train" || split == "val" || split == "test", "eval: expected --split train | val | test, got '",
             split, "'");
  const std::vector<data::EncodedText>& ex = split == "train" ? d.train : split == "val" ? d.validation : d.test;
  const train::TextEvalResult e = train::evaluate_text_model(*m.pipeline.model, ex, d.labels, m.tagger,
                                                             m.pipeline.tokenizer.pad_id(), batch);
  if (json) {
    nlohmann::json j = {{"checkpoint", ckpt}, {"data", data}, {"split", split}, {"dtype", linear_dtype == DType::i8 ? "int8" : dtype_name(linear_dtype)},
                        {"count", e.count},
                        {"loss", e.loss}, {"accuracy", e.accuracy}, {"macro_f1", e.macro_f1}};
    if (m.tagger) j.update({{"span_f1", e.span.f1}, {"span_precision", e.span.precision}, {"span_recall", e.span.recall},
                            {"gold_spans", e.span.gold}, {"predicted_spans", e.span.predicted}});
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("%s on %s/%s (%lld %s): accuracy %.2f%%, macro-F1 %.4f", ckpt.c_str(), data.c_str(), split.c_str(),
              (long long)e.count, m.tagger ? "sentences; token" : "examples", 100 * e.accuracy, e.macro_f1);
  if (m.tagger)
    std::printf(", span F1 %.4f (precision %.4f, recall %.4f; %lld gold spans)", e.span.f1, e.span.precision,
                e.span.recall, (long long)e.span.gold);
  std::printf(", loss %.4f\n", e.loss);
}

}  // namespace

void add_eval(CLI::App& app) {
  auto* c = app.add_subcommand("eval", "evaluate a checkpoint");
  struct Opts {
    std::string ckpt, data, data_dir = data::FashionMnist::kDefaultDir, split = "test";
    int threads = 0;
    int64_t limit = 0, batch = 256, beam = 4;
    double length_penalty = 0.6;
    bool json = false;
    std::string hyps_out, confusion;
    SourceFlags source;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("checkpoint", o->ckpt, "an attn checkpoint (.safetensors); or --weights W --model NAME instead");
  c->add_option("--data", o->data,
                "fashion-mnist, or a folder holding train/ and test/ (or val/), one subfolder per class "
                "(default: the data the checkpoint was trained on, else fashion-mnist); for foreign / converted "
                "ImageNet weights a folder of class subfolders (DIR/val or DIR/test is used when present)");
  add_source_flags(c, o->source, "f32 | bf16 (Linear weights in bf16) | int8 (Linear weights int8 per channel, "
                   "activations int8 per token): image classifiers and BERT text models");
  c->add_option("--data-dir", o->data_dir, "where the Fashion-MNIST files are")->capture_default_str();
  c->add_option("--split", o->split, "train | val | test")->capture_default_str();
  c->add_option("--limit", o->limit,
                "first N images (translation: sentence pairs) only; on a folder of foreign weights' classes, N "
                "images spread evenly over it");
  c->add_option("--beam", o->beam, "translation models: beam size (1: greedy)")->capture_default_str();
  c->add_option("--length-penalty", o->length_penalty, "translation models: GNMT length penalty alpha")
      ->capture_default_str();
  c->add_option("--hyps", o->hyps_out, "translation models: also write the hypotheses, one per line");
  c->add_option("--batch", o->batch)->capture_default_str();
  c->add_option("--threads", o->threads);
  c->add_option("--confusion", o->confusion,
                 "attn's image classifiers: also write the confusion matrix as an SVG heat map (up to 100 classes)");
  c->add_flag("--json", o->json, "print one JSON object");
  c->callback([o, c] {
    apply_threads(o->threads);
    const bool split_given = c->count("--split") > 0;
    auto no_confusion = [&](const char* what) {
      ATTN_CHECK(o->confusion.empty(), "eval: --confusion is for attn's own image classifiers, not ", what);
    };
    std::vector<std::string> args;
    if (!o->ckpt.empty()) args.push_back(o->ckpt);
    models::PretrainedSource src = o->source.take_source(
        args, {0, 0, "a checkpoint (attn eval CKPT) or foreign weights (attn eval --weights W.safetensors --model NAME "
               "--data DIR)", ""}, "eval");
    const nlohmann::json meta = o->source.foreign() ? nlohmann::json::object() : io::read_checkpoint_metadata(src.path);
    if (o->source.foreign() || meta.contains("source_format")) {
      // Foreign weights, or made by attn convert from them: their source's eval transform, ImageNet-style folders.
      no_confusion(o->source.foreign() ? "foreign weights" : "converted foreign weights");
      eval_on_folder(models::load_pretrained(src), src.path, o->data, o->split, split_given, o->batch, o->limit,
                     o->json);
      return;
    }
    ATTN_CHECK(!o->source.preprocess_given(), "eval: the preprocessing flags go with foreign or converted weights; "
               "attn's own checkpoints are evaluated as they were trained");
    if (meta.contains("text_task") && meta.contains("task")) {
      no_confusion("BERT text models");
      eval_text(o->ckpt, meta, split_given ? o->split : "test", o->limit, std::min<int64_t>(o->batch, 64), o->json,
                src.linear_dtype);
      return;
    }
    if (infer::is_translation_checkpoint(o->ckpt)) {
      no_confusion("translation models");
      ATTN_CHECK(o->source.dtype == "f32", "eval: --dtype is for image classifiers and BERT text models, not "
                 "translation models");
      eval_translation(o->ckpt, src.weights, o->split, o->limit, o->beam, o->length_penalty, o->hyps_out, o->json);
      return;
    }
    // A checkpoint from attn quantize runs int8 whatever --dtype says (f32 or int8; bf16 is an error).
    const bool int8_file = meta.contains("quantization");
    if (int8_file && src.linear_dtype == DType::f32) src.linear_dtype = DType::i8;
    // As trained: normalised with the checkpoint's mean / std at the model's image size, f32 weights
    // unpacked (the training GEMM's own sums); int8 weights packed (their int32 sums are exact either way).
    src.pack_linear_weights = src.linear_dtype == DType::i8;
    const std::shared_ptr<models::ImageClassifier> model = models::load_pretrained(src).model;
    const models::CheckpointInputs in = models::checkpoint_inputs(o->ckpt);
    if (o->data.empty()) o->data = in.data.empty() ? "fashion-mnist" : in.data;
    std::shared_ptr<data::Dataset> ds;
    if (o->data == "fashion-mnist") {
      ATTN_CHECK(in.num_classes == data::FashionMnist::kNumClasses && in.channels == 1 && in.image_size == 28,
                 "eval: fashion-mnist has 10 classes of 1 x 28 x 28 images, but the checkpoint's model predicts ",
                 in.num_classes, " classes of ", in.channels, " x ", in.image_size, " x ", in.image_size,
                 (in.data.empty() ? std::string() : " (it was trained on '" + in.data + "': pass --data)"));
      ds = std::make_shared<data::FashionMnist>(data::FashionMnist::load(o->data_dir, data::parse_split(o->split)));
    } else {
      // An image folder (train/ and test/ or val/; see data/image_folder_splits.h), split as in training.
      const data::Split split = data::parse_split(o->split);
      data::ImageFolderSplits s = data::load_image_folder_splits(o->data, in.image_size, in.channels);
      ATTN_CHECK(int64_t(s.classes.size()) == in.num_classes, "eval: '", o->data, "' has ", s.classes.size(),
                 " classes, but the checkpoint's model predicts ", in.num_classes);
      ATTN_CHECK(s.classes == in.class_names, "eval: the classes of '", o->data,
                 "' are not those the checkpoint was trained on (its train_state class_names)");
      ds = split == data::Split::train ? s.train : split == data::Split::val ? s.val : s.test;
    }
    // (A checkpoint without a training record, e.g. from attn convert: the named dataset's constants.)
    const auto norm = in.data.empty() ? data::dataset_normalization(o->data) : std::make_pair(in.mean, in.std);
    ATTN_CHECK(o->confusion.empty() || in.num_classes <= 100, "eval: --confusion draws up to 100 classes, the "
               "checkpoint's model has ", in.num_classes);
    train::EvalResult r = train::evaluate(*model, *ds, norm.first, norm.second, o->batch, o->limit);
    if (!o->confusion.empty())
      viz::write_confusion_svg(o->confusion, o->data + "/" + o->split, in.class_names, r.labels, r.predictions);
    if (o->json) {
      nlohmann::json j = {{"checkpoint", o->ckpt}, {"split", o->split}, {"dtype", int8_file ? "int8" : o->source.dtype},
                          {"accuracy", r.accuracy}, {"loss", r.loss}, {"count", r.count}};
      if (!o->confusion.empty()) {
        // rows: true class, columns: predicted
        const std::vector<int64_t> m = viz::confusion_matrix(r.labels, r.predictions, in.num_classes);
        nlohmann::json rows = nlohmann::json::array();
        for (int64_t t = 0; t < in.num_classes; ++t)
          rows.push_back(std::vector<int64_t>(m.begin() + t * in.num_classes, m.begin() + (t + 1) * in.num_classes));
        j["confusion"] = rows;
        j["confusion_svg"] = o->confusion;
      }
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("%s on %s/%s: accuracy %.2f%% (%lld images), loss %.4f\n", o->ckpt.c_str(), o->data.c_str(),
                  o->split.c_str(), 100 * r.accuracy, (long long)r.count, r.loss);
      if (!o->confusion.empty()) std::printf("confusion matrix: %s\n", o->confusion.c_str());
    }
  });
}

}  // namespace attn::cli

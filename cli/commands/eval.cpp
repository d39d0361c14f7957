// attn eval CKPT: accuracy and loss of a checkpoint on a dataset split.
#include <cstdio>

#include "attn/attn.h"
#include "attn/data/fashion_mnist.h"
#include "attn/io/checkpoint.h"
#include "attn/io/safetensors.h"
#include "attn/train/classifier.h"
#include "attn/train/explain.h"
#include "attn/train/seq2seq.h"
#include "../commands.h"

namespace attn::cli {

void add_eval(CLI::App& app) {
  auto* c = app.add_subcommand("eval", "evaluate a checkpoint");
  struct Opts {
    std::string ckpt, data, data_dir = data::FashionMnist::kDefaultDir, split = "test";
    int threads = 0;
    int64_t limit = 0, batch = 256, beam = 4;
    double length_penalty = 0.6;
    bool json = false;
    std::string hyps_out;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("checkpoint", o->ckpt, "an attn checkpoint (.safetensors)")->required();
  c->add_option("--data", o->data,
                "fashion-mnist, or a folder holding train/ and test/ (or val/), one subfolder per class "
                "(default: the data the checkpoint was trained on, else fashion-mnist)");
  c->add_option("--data-dir", o->data_dir, "where the Fashion-MNIST files are")->capture_default_str();
  c->add_option("--split", o->split, "train | val | test")->capture_default_str();
  c->add_option("--limit", o->limit, "first N images (translation: sentence pairs) only");
  c->add_option("--beam", o->beam, "translation models: beam size (1: greedy)")->capture_default_str();
  c->add_option("--length-penalty", o->length_penalty, "translation models: GNMT length penalty alpha")
      ->capture_default_str();
  c->add_option("--hyps", o->hyps_out, "translation models: also write the hypotheses, one per line");
  c->add_option("--batch", o->batch)->capture_default_str();
  c->add_option("--threads", o->threads);
  c->add_flag("--json", o->json, "print one JSON object");
  c->callback([o] {
    apply_threads(o->threads);
    if (train::is_translation_checkpoint(o->ckpt)) {
      // Corpus BLEU (sacreBLEU's default) on the checkpoint's own data split.
      train::Translator tr = train::load_translator(o->ckpt);
      const auto& d = tr.metadata().at("data");
      ATTN_CHECK(o->split == "test" || o->split == "dev" || o->split == "val", "eval: translation splits are dev | "
                 "test, got '", o->split, "'");
      data::PairSplits sp = train::load_translation_data(
          d.at("data").get<std::string>(), d.at("seed").get<uint64_t>(), "/usr/share/sword",
          d.at("synthetic_size").get<int64_t>(), d.at("dev_count").get<int64_t>(), d.at("test_count").get<int64_t>());
      std::vector<data::TextPair> pairs = o->split == "test" ? sp.test : sp.dev;
      if (o->limit > 0 && int64_t(pairs.size()) > o->limit) pairs.resize(size_t(o->limit));
      std::vector<std::string> hyps;
      text::BleuScore s = tr.bleu(pairs, o->beam, o->length_penalty, &hyps);
      if (!o->hyps_out.empty()) {
        std::string text;
        for (const auto& h : hyps) text += h + "\n";
        io::write_file_atomic(o->hyps_out, text);
      }
      if (o->json) {
        std::printf("%s\n", nlohmann::json({{"checkpoint", o->ckpt}, {"split", o->split}, {"bleu", s.score},
                                            {"bleu_line", s.format()}, {"sentences", pairs.size()},
                                            {"beam", o->beam}}).dump().c_str());
      } else {
        std::printf("%s on %s/%s (%zu sentences, beam %lld): %s\n", o->ckpt.c_str(), d.at("data").get<std::string>().c_str(),
                    o->split.c_str(), pairs.size(), (long long)o->beam, s.format().c_str());
      }
      return;
    }
    auto model = train::load_classifier(o->ckpt);
    // Normalised as in training (the checkpoint's mean / std), at the model's image size.
    const train::CheckpointInputs in = train::checkpoint_inputs(o->ckpt);
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
    const auto norm = in.data.empty() ? train::dataset_normalization(o->data) : std::make_pair(in.mean, in.std);
    train::EvalResult r = train::evaluate(*model, *ds, norm.first, norm.second, o->batch, o->limit);
    if (o->json) {
      std::printf("%s\n", nlohmann::json({{"checkpoint", o->ckpt}, {"split", o->split}, {"accuracy", r.accuracy},
                                          {"loss", r.loss}, {"count", r.count}}).dump().c_str());
    } else {
      std::printf("%s on %s/%s: accuracy %.2f%% (%lld images), loss %.4f\n", o->ckpt.c_str(), o->data.c_str(),
                  o->split.c_str(), 100 * r.accuracy, (long long)r.count, r.loss);
    }
  });
}

}  // namespace attn::cli

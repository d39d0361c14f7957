// attn eval CKPT: accuracy and loss of a checkpoint on a dataset split.
#include <cstdio>

#include "attn/attn.h"
#include "attn/data/fashion_mnist.h"
#include "attn/io/checkpoint.h"
#include "attn/train/classifier.h"
#include "../commands.h"

namespace attn::cli {

void add_eval(CLI::App& app) {
  auto* c = app.add_subcommand("eval", "evaluate a checkpoint");
  struct Opts {
    std::string ckpt, data = "fashion-mnist", data_dir = data::FashionMnist::kDefaultDir, split = "test";
    int threads = 0;
    int64_t limit = 0, batch = 256;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("checkpoint", o->ckpt, "an attn checkpoint (.safetensors)")->required();
  c->add_option("--data", o->data)->capture_default_str();
  c->add_option("--data-dir", o->data_dir)->capture_default_str();
  c->add_option("--split", o->split, "train | val | test")->capture_default_str();
  c->add_option("--limit", o->limit, "first N images only");
  c->add_option("--batch", o->batch)->capture_default_str();
  c->add_option("--threads", o->threads);
  c->add_flag("--json", o->json, "print one JSON object");
  c->callback([o] {
    apply_threads(o->threads);
    ATTN_CHECK(o->data == "fashion-mnist", "eval: unknown dataset '", o->data, "' (known: fashion-mnist)");
    auto model = train::load_classifier(o->ckpt);
    auto ds = data::FashionMnist::load(o->data_dir, data::parse_split(o->split));
    auto [mean, std] = train::dataset_normalization(o->data);
    train::EvalResult r = train::evaluate(*model, ds, mean, std, o->batch, o->limit);
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

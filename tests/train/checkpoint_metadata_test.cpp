// What a checkpoint's metadata gives back, checked value by value: `train --resume` (the training
// state, the model config, the task's settings), the translator and a translation checkpoint's data
// spec. A value of the wrong type, out of range or missing is an attn::Error naming the file and the
// key, before any data is read (no JSON library exception).
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

#include "attn/attn.h"
#include "attn/infer/translate.h"
#include "attn/io/base64.h"
#include "attn/text/tokenizer.h"
#include "attn/train/checkpoint.h"
#include "attn/train/tasks/translation.h"
#include "attn/train/trainer.h"
#include "errors.h"
#include "files.h"
#include "train_checks.h"

using namespace attn;
using nlohmann::json;
using test::error_of;

namespace {

// A resumable image checkpoint's metadata (a small MLP).
json image_meta(const models::Model& m) {
  return {{"config", m.config()},
          {"train_state", {{"step", 3}, {"rng_seed", 0}, {"rng_offset", 12}, {"seconds", 1.5}, {"items", 192},
                           {"history", json::array()},
                           {"window", {{"loss", 2.0}, {"steps", 3}, {"items", 192}, {"sums", {20.0, 192.0}}}}}}};
}

// A resumable translation checkpoint's metadata (a small Transformer, a character tokenizer).
json translation_meta(const models::Model& m) {
  const auto tok = text::CharTokenizer::build({"abc"});
  return {{"config", m.config()},
          {"kind", infer::kTranslationCheckpoint},
          {"tokenizer", io::base64_encode(tok->serialize())},
          {"data", {{"data", "synthetic:copy"}, {"seed", 5}, {"synthetic_size", 100}, {"dev_count", 10},
                    {"test_count", 10}}},
          {"train_state", {{"step", 2}, {"rng_seed", 0}, {"rng_offset", 0}, {"epoch", 0}, {"batch", 2}}}};
}

// meta with the value at `path` (keys, outermost first) replaced, or removed when `v` is discarded.
json with(json meta, const std::vector<std::string>& path, const json& v) {
  json* at = &meta;
  for (size_t i = 0; i + 1 < path.size(); ++i) at = &(*at)[path[i]];
  if (v.is_discarded()) at->erase(path.back());
  else (*at)[path.back()] = v;
  return meta;
}
const json kRemoved = json(json::value_t::discarded);

// The error of `attn train --resume` on a checkpoint of `model` with metadata `meta`.
struct Resume {
  std::string dir, ckpt;
  std::shared_ptr<models::Model> model;
  Resume(const std::string& name, std::shared_ptr<models::Model> m)
      : dir(test::fresh_tmp_dir("attn_ckpt_meta_test", name)), ckpt(dir + "/checkpoint.safetensors"), model(std::move(m)) {}
  ~Resume() { std::filesystem::remove_all(dir); }
  std::string error(const json& meta) const {
    train::save_checkpoint(ckpt, *model, nullptr, meta);
    auto cfg = test::quiet<train::TrainConfig>(dir);
    cfg.resume = true;
    return error_of([&] { train::train(cfg); });
  }
};

}  // namespace

TEST(CheckpointMetadata, ResumeStateOfAnImageRun) {
  Resume r("image", models::create("mlp", {{"hidden", {8}}}));
  const json meta = image_meta(*r.model);
  const std::string f = "train --resume: '" + r.ckpt + "': ";
  auto err = [&](const std::vector<std::string>& path, const json& v) { return r.error(with(meta, path, v)); };
  EXPECT_EQ(err({"train_state"}, json::object()), f + "key \"train_state.step\": missing (expected an integer >= 0)");
  EXPECT_EQ(err({"train_state", "step"}, "ten"), f + "key \"train_state.step\": expected an integer >= 0, found the string \"ten\"");
  EXPECT_EQ(err({"train_state", "step"}, -1), f + "key \"train_state.step\": expected an integer >= 0, found -1");
  EXPECT_EQ(err({"train_state", "step"}, 2.5), f + "key \"train_state.step\": expected an integer >= 0, found the number 2.5");
  EXPECT_EQ(err({"train_state", "rng_seed"}, -1), f + "key \"train_state.rng_seed\": expected an integer >= 0, found -1");
  EXPECT_EQ(err({"train_state", "rng_offset"}, kRemoved),
            f + "key \"train_state.rng_offset\": missing (expected an integer >= 0)");
  EXPECT_EQ(err({"train_state", "seconds"}, "1.5"), f + "key \"train_state.seconds\": expected a number >= 0, found the string \"1.5\"");
  EXPECT_EQ(err({"train_state", "items"}, -5), f + "key \"train_state.items\": expected an integer >= 0, found -5");
  EXPECT_EQ(err({"train_state", "history"}, "x"), f + "key \"train_state.history\": expected a list of objects, found the string \"x\"");
  EXPECT_EQ(err({"train_state", "history"}, {5}), f + "key \"train_state.history[0]\": expected an object, found the number 5");
  const json rec = {{"epoch_float", 1.0}, {"train_loss", 0.5}, {"val_loss", nullptr}, {"val_accuracy", 0.9}};
  EXPECT_EQ(err({"train_state", "history"}, json::array({rec})),
            f + "train_state: key \"history[0].val_loss\": expected a number, found null");
  EXPECT_EQ(err({"train_state", "window", "sums"}, {1, "x"}),
            f + "key \"train_state.window.sums[1]\": expected a number, found the string \"x\"");
  EXPECT_EQ(err({"train_state", "window", "steps"}, kRemoved),
            f + "key \"train_state.window.steps\": missing (expected an integer >= 0)");
  EXPECT_EQ(err({"train_state", "window"}, 3), f + "key \"train_state.window\": expected an object, found the number 3");
  // The model config: its name, then its values as the model reads them.
  EXPECT_EQ(err({"config", "model"}, kRemoved), f + "key \"config.model\": missing (expected a string)");
  EXPECT_EQ(err({"config", "model"}, 5), f + "key \"config.model\": expected a string, found the number 5");
  EXPECT_EQ(err({"config", "hidden"}, {8, 0}), f + "mlp config: key \"hidden[1]\": expected a positive integer, found 0");
  EXPECT_EQ(err({"config", "act"}, true), f + "mlp config: key \"act\": expected one of \"relu\", \"gelu\", found the boolean true");
  EXPECT_EQ(err({"config", "extra"}, 1), f + "create_model(mlp): unknown config key 'extra'");
  // The distillation settings kept for the run.
  const json distill = {{"type", "soft"}, {"teacher", "t.safetensors"}, {"alpha", 0.5}, {"tau", 1.0}};
  EXPECT_EQ(err({"train_state", "distill"}, with(distill, {"type"}, "medium")),
            f + "key \"train_state.distill.type\": expected one of \"none\", \"soft\", \"hard\", found the string \"medium\"");
  EXPECT_EQ(err({"train_state", "distill"}, with(distill, {"alpha"}, 2)),
            f + "key \"train_state.distill.alpha\": expected a number in [0, 1], found 2");
  EXPECT_EQ(err({"train_state", "distill"}, with(distill, {"tau"}, kRemoved)),
            f + "key \"train_state.distill.tau\": missing (expected a positive number)");
  EXPECT_EQ(err({"train_state", "distill"}, "soft"),
            f + "key \"train_state.distill\": expected an object, found the string \"soft\"");
}

TEST(CheckpointMetadata, ResumeStateOfATranslationRun) {
  Resume r("translation", models::create("transformer", {{"vocab_size", 7}, {"d_model", 8}, {"nhead", 2},
                                                         {"layers", 1}, {"d_ff", 16}, {"max_length", 16}}));
  const json meta = translation_meta(*r.model);
  const std::string f = "train --resume: '" + r.ckpt + "': ";
  auto err = [&](const std::vector<std::string>& path, const json& v) { return r.error(with(meta, path, v)); };
  EXPECT_EQ(err({"data", "seed"}, "5"), f + "key \"data.seed\": expected an integer >= 0, found the string \"5\"");
  EXPECT_EQ(err({"data", "dev_count"}, -1), f + "key \"data.dev_count\": expected an integer >= 0, found -1");
  EXPECT_EQ(err({"data", "data"}, kRemoved), f + "key \"data.data\": missing (expected a string)");
  EXPECT_EQ(err({"data"}, kRemoved), f + "key \"data\": missing (expected an object)");
  EXPECT_EQ(err({"tokenizer"}, kRemoved), f + "key \"tokenizer\": missing (expected a string)");
  EXPECT_EQ(err({"train_state", "batch"}, kRemoved), f + "key \"train_state.batch\": missing (expected an integer >= 0)");
  EXPECT_EQ(err({"train_state", "epoch"}, "0"), f + "key \"train_state.epoch\": expected an integer >= 0, found the string \"0\"");
  EXPECT_EQ(err({"config", "model"}, kRemoved), f + "key \"config.model\": missing (expected a string)");
  EXPECT_EQ(err({"config", "nhead"}, "2"), f + "transformer config: key \"nhead\": expected a positive integer, found the string \"2\"");
  const json rec = {{"step", 1}, {"train_loss", 1.0}, {"dev_loss", 1.0}, {"dev_bleu", "x"}};
  EXPECT_EQ(err({"train_state", "history"}, json::array({rec})),
            f + "train_state: key \"history[0].dev_bleu\": expected a number, found the string \"x\"");
}

// The translator and `attn eval`'s data spec read a translation checkpoint's metadata the same way.
TEST(CheckpointMetadata, TranslationCheckpointForInference) {
  const std::string dir = test::fresh_tmp_dir("attn_ckpt_meta_test", "translator");
  const std::string path = dir + "/ckpt.safetensors";
  auto m = models::create("transformer", {{"vocab_size", 7}, {"d_model", 8}, {"nhead", 2}, {"layers", 1},
                                          {"d_ff", 16}, {"max_length", 16}});
  const json meta = translation_meta(*m);
  const std::string f = "checkpoint '" + path + "': ";
  auto load = [&](const json& md) {
    train::save_checkpoint(path, *m, nullptr, md);
    return error_of([&] { infer::load_translator(path); });
  };
  EXPECT_EQ(load(meta), test::kNoError);
  EXPECT_EQ(load(with(meta, {"config", "model"}, kRemoved)), f + "key \"config.model\": missing (expected a string)");
  EXPECT_EQ(load(with(meta, {"config"}, "transformer")), f + "key \"config\": expected an object, found the string \"transformer\"");
  EXPECT_EQ(load(with(meta, {"tokenizer"}, 5)), f + "key \"tokenizer\": expected a string, found the number 5");
  EXPECT_EQ(load(with(meta, {"config", "dropout"}, -0.5)),
            f + "transformer config: key \"dropout\": expected a number in [0, 1), found -0.5");
  EXPECT_EQ(load(with(meta, {"config", "model"}, "mlp")),
            f + "unknown translation model 'mlp' (known: " + [] {
              std::string k;
              for (const auto& n : models::model_names(models::kTranslation)) k += (k.empty() ? "" : ", ") + n;
              return k;
            }() + ")");
  auto spec = [&](const json& md) { return error_of([&] { train::translation_data_spec(md, "checkpoint 'c'"); }); };
  EXPECT_EQ(spec(meta), test::kNoError);
  EXPECT_EQ(spec(with(meta, {"data", "seed"}, -5)), "checkpoint 'c': key \"data.seed\": expected an integer >= 0, found -5");
  EXPECT_EQ(spec(with(meta, {"data", "test_count"}, 1.5)),
            "checkpoint 'c': key \"data.test_count\": expected an integer >= 0, found the number 1.5");
  EXPECT_EQ(spec(with(meta, {"data"}, json::array())), "checkpoint 'c': key \"data\": expected an object, found an empty list");
  const train::TranslationDataSpec d = train::translation_data_spec(meta, "c");
  EXPECT_EQ(d.data, "synthetic:copy");
  EXPECT_EQ(d.seed, 5u);
  EXPECT_EQ(d.test_count, 10);
  std::filesystem::remove_all(dir);
}

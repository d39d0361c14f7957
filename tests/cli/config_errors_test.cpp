// The attn tool on bad configs: a --model-config value of the wrong type, a wrong list element, an
// unknown key, a config that is not a JSON object, and checkpoints whose stored config or training
// state is wrong or incomplete each end with "attn: error: <what, where>" and exit code 1 (a user
// error), never "internal error" (exit 2).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/attn.h"
#include "attn/infer/translate.h"
#include "attn/io/base64.h"
#include "attn/text/tokenizer.h"
#include "attn/train/checkpoint.h"
#include "attn_cli.h"
#include "files.h"

using namespace attn;
using nlohmann::json;

namespace {

// `attn args...` fails as a user error whose message is `message`.
void expect_user_error(const std::string& dir, const std::vector<std::string>& args, const std::string& message) {
  const test::CliRun r = test::run_attn(dir, args);
  std::string cmd;
  for (const auto& a : args) cmd += " " + a;
  EXPECT_EQ(r.code, 1) << "attn" << cmd << "\n" << r.err;
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << "attn" << cmd << "\n" << r.err;
  EXPECT_NE(r.err.find("attn: error: " + message + "\n"), std::string::npos) << "attn" << cmd << "\n" << r.err;
}

std::vector<std::string> joined(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST(CliConfigErrors, ModelConfigFlag) {
  const std::string dir = test::fresh_tmp_dir("attn_cli_config_test", "flag");
  const std::vector<std::string> train = {"train", "--out", dir + "/run", "--epochs", "1", "--threads", "1"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = train;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  expect_user_error(dir, with({"--model", "vit_fmnist_demo", "--model-config", R"({"depth": "six"})"}),
                    "vit config: key \"depth\": expected a positive integer, found the string \"six\"");
  expect_user_error(dir, with({"--model", "mlp", "--model-config", R"({"hidden": [256, "x"]})"}),
                    "mlp config: key \"hidden[1]\": expected a positive integer, found the string \"x\"");
  expect_user_error(dir, with({"--model", "vit_fmnist_demo", "--model-config", R"({"drop": 1.5})"}),
                    "vit config: key \"drop\": expected a number in [0, 1), found 1.5");
  expect_user_error(dir, with({"--model", "vit_fmnist_demo", "--model-config", R"({"deph": 6})"}),
                    "create_model(vit_fmnist_demo): unknown config key 'deph'");
  expect_user_error(dir, with({"--model", "vit_fmnist_demo", "--model-config", "[6]"}),
                    "--model-config: expected a JSON object, got '[6]'");
  // attn info builds the model from the same overrides.
  expect_user_error(dir, {"info", "transformer", "--model-config", R"({"activation": "tanh"})"},
                    "transformer config: key \"activation\": expected one of \"relu\", \"gelu\", \"gelu_tanh\", "
                    "found the string \"tanh\"");
  expect_user_error(dir, {"info", "mlp", "--model-config", "{bad"}, "--model-config: expected a JSON object, got '{bad'");
  std::filesystem::remove_all(dir);
}

// A flag of another task's group does nothing there, so it is refused; --task pretrain needs a BERT.
TEST(CliConfigErrors, TaskFlags) {
  const std::string dir = test::fresh_tmp_dir("attn_cli_config_test", "task");
  const std::vector<std::string> train = {"train", "--out", dir + "/run", "--epochs", "1", "--threads", "1"};
  const std::string pretrain_group = "BERT pre-training (--task pretrain, --model bert-mini | bert-small | "
                                     "bert-base-uncased ...)";
  expect_user_error(dir, joined(train, {"--model", "mlp", "--masking", "static"}),
                    "train: --masking applies to " + pretrain_group + ", not to mlp");
  expect_user_error(dir, joined(train, {"--model", "bert-mini", "--augment"}),
                    "train: --augment applies to image models, not to bert-mini");
  expect_user_error(dir, joined(train, {"--model", "transformer", "--batch", "8"}),
                    "train: --batch and --limit-eval apply to image and BERT models, not to transformer "
                    "(translation batches are sized with --max-tokens)");
  expect_user_error(dir, joined(train, {"--model", "mlp", "--task", "pretrain"}),
                    "train --task pretrain: expected a BERT model (bert-mini, bert-small, bert-base-uncased, ...), got "
                    "'mlp', a model of the task image-classification");
  std::filesystem::remove_all(dir);
}

TEST(CliConfigErrors, CheckpointConfigAndTrainingState) {
  const std::string dir = test::fresh_tmp_dir("attn_cli_config_test", "ckpt");
  auto m = models::create("mlp", {{"hidden", {8}}});
  // An image checkpoint whose config lacks the model's name, or has a wrong list element: attn eval.
  json cfg = m->config();
  cfg.erase("model");
  const std::string img = dir + "/image.safetensors";
  train::save_checkpoint(img, *m, nullptr, {{"config", cfg}});
  expect_user_error(dir, {"eval", img}, "checkpoint '" + img + "': key \"config.model\": missing (expected a string)");
  cfg = m->config();
  cfg["hidden"] = {8, "x"};
  train::save_checkpoint(img, *m, nullptr, {{"config", cfg}});
  expect_user_error(dir, {"eval", img},
                    "checkpoint '" + img + "': mlp config: key \"hidden[1]\": expected a positive integer, found the "
                    "string \"x\"");
  // A translation checkpoint without its model's name: attn translate.
  auto t = models::create("transformer", {{"vocab_size", 7}, {"d_model", 8}, {"nhead", 2}, {"layers", 1},
                                          {"d_ff", 16}, {"max_length", 16}});
  json tcfg = t->config();
  tcfg.erase("model");
  const std::string tr = dir + "/translation.safetensors";
  train::save_checkpoint(tr, *t, nullptr,
                         {{"config", tcfg}, {"kind", infer::kTranslationCheckpoint},
                          {"tokenizer", io::base64_encode(text::CharTokenizer::build({"abc"})->serialize())}});
  expect_user_error(dir, {"translate", tr, "abc"},
                    "checkpoint '" + tr + "': key \"config.model\": missing (expected a string)");
  // A run to resume whose training state has a wrong type: attn train --resume.
  const std::string run = dir + "/run";
  std::filesystem::create_directories(run);
  train::save_checkpoint(run + "/checkpoint.safetensors", *m, nullptr,
                         {{"config", m->config()},
                          {"train_state", {{"step", "ten"}, {"rng_seed", 0}, {"rng_offset", 0}}}});
  expect_user_error(dir, {"train", "--resume", "--out", run},
                    "train --resume: '" + run + "/checkpoint.safetensors': key \"train_state.step\": expected an "
                    "integer >= 0, found the string \"ten\"");
  std::filesystem::remove_all(dir);
}

// BERT fine-tuning from the command line: `attn train --task classify | tag` of a tiny BERT on the
// WordNet data, then `attn classify-text` (one text and a pair), `attn tag`, and `attn eval` of the
// checkpoints (accuracy, macro-F1, span F1, equal to the training run's own test numbers), and the
// errors of a checkpoint that does not fit the command. Needs wordnet-base and bert-base-uncased's vocab.txt.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "attn_cli.h"
#include "bert_vocab.h"
#include "files.h"

using namespace attn;
using nlohmann::json;

namespace {

const char* kTiny = R"({"hidden_size":32,"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":64,"max_position_embeddings":64})";

// `attn train` of a tiny BERT on `data` for 4 steps: the run's directory.
std::string train_tiny(const std::string& dir, const std::string& task, const std::string& data) {
  const std::string out = dir + "/" + task + "-" + data;
  const test::CliRun r = test::run_attn(dir, {"train", "--task", task, "--model", "bert-mini", "--model-config", kTiny,
                                              "--data", data, "--max-steps", "4", "--batch", "8", "--max-length", "32",
                                              "--limit-eval", "40", "--limit-train", "400", "--threads", "1", "--out", out});
  EXPECT_EQ(r.code, 0) << r.err;
  return out;
}

json metrics_of(const std::string& run) {
  std::ifstream f(run + "/metrics.json");
  return json::parse(f);
}

}  // namespace

TEST(TextTasksCli, ClassifyTextAndEval) {
  ATTN_NEED_BERT_VOCAB(test::bert_vocab_path());
  const std::string dir = test::fresh_tmp_dir("attn_text_cli_test", "classify");
  const std::string run = train_tiny(dir, "classify", "wordnet-lexname");
  const std::string ckpt = run + "/checkpoint.safetensors";
  test::CliRun r = test::run_attn(dir, {"classify-text", ckpt, "a domesticated carnivorous mammal", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json c = json::parse(r.out);
  ASSERT_EQ(c["probs"].size(), 45u);
  double sum = 0, best = 0;
  for (const auto& [label, p] : c["probs"].items()) {
    sum += p.get<double>();
    best = std::max(best, p.get<double>());
  }
  EXPECT_NEAR(sum, 1.0, 1e-4);
  EXPECT_EQ(c["probs"][c["label"].get<std::string>()].get<double>(), best);
  r = test::run_attn(dir, {"classify-text", ckpt, "a domesticated carnivorous mammal"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find(' ')), c["label"].get<std::string>()) << r.out;
  // The test numbers of the run, again from its checkpoint.
  r = test::run_attn(dir, {"eval", ckpt, "--limit", "40", "--json", "--threads", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json e = json::parse(r.out), m = metrics_of(run);
  EXPECT_EQ(e["count"], 40);
  EXPECT_NEAR(e["accuracy"].get<double>(), m["test_accuracy"].get<double>(), 1e-9);
  EXPECT_NEAR(e["macro_f1"].get<double>(), m["test_macro_f1"].get<double>(), 1e-9);
  EXPECT_NEAR(e["loss"].get<double>(), m["test_loss"].get<double>(), 1e-4);
  // A classifier is no tagger.
  r = test::run_attn(dir, {"tag", ckpt, "the dog barked"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("use attn classify-text"), std::string::npos) << r.err;
}

TEST(TextTasksCli, PairsAndTag) {
  ATTN_NEED_BERT_VOCAB(test::bert_vocab_path());
  const std::string dir = test::fresh_tmp_dir("attn_text_cli_test", "tag");
  const std::string pairs = train_tiny(dir, "classify", "wordnet-pairs");
  test::CliRun r = test::run_attn(dir, {"classify-text", pairs + "/checkpoint.safetensors", "a domesticated carnivore",
                                       "dog", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["probs"].size(), 2u);
  r = test::run_attn(dir, {"classify-text", pairs + "/checkpoint.safetensors", "a", "b", "c"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("expected one text or a pair (two), got 3 texts"), std::string::npos) << r.err;

  const std::string run = train_tiny(dir, "tag", "wordnet-supersense");
  const std::string ckpt = run + "/checkpoint.safetensors";
  r = test::run_attn(dir, {"tag", ckpt, "The dogs barked at the mailman's van.", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json t = json::parse(r.out);
  EXPECT_EQ(t["words"], json({"The", "dogs", "barked", "at", "the", "mailman", "'", "s", "van", "."}));
  EXPECT_EQ(t["tags"].size(), t["words"].size());
  EXPECT_EQ(t["tokens"].front(), "[CLS]");
  EXPECT_EQ(t["token_tags"].size(), t["tokens"].size());
  r = test::run_attn(dir, {"tag", ckpt, "The dogs barked", "--tokens"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("token [CLS]"), std::string::npos) << r.out;
  r = test::run_attn(dir, {"eval", ckpt, "--limit", "40", "--json", "--threads", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json e = json::parse(r.out), m = metrics_of(run);
  EXPECT_NEAR(e["span_f1"].get<double>(), m["test_span_f1"].get<double>(), 1e-9);
  EXPECT_NEAR(e["accuracy"].get<double>(), m["test_accuracy"].get<double>(), 1e-9);
  r = test::run_attn(dir, {"classify-text", ckpt, "the dog"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("use attn tag"), std::string::npos) << r.err;
}

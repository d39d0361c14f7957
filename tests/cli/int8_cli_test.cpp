// int8 from the command line: `attn quantize` of a trained ViT and of a fine-tuned BERT classifier;
// `attn eval` / `classify-text` / `tag` with --dtype int8 (quantized at load) and of the quantized file
// (the same results); `attn bench --dtype int8`; and the errors (bf16 of an int8 file, an unknown
// --keep-f32 layer, a bad --dtype).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "attn/attn.h"
#include "attn/io/checkpoint.h"
#include "attn_cli.h"
#include "bert_vocab.h"
#include "files.h"

using namespace attn;
using json = nlohmann::json;
namespace fs = std::filesystem;

TEST(Int8Cli, QuantizeAViTAndEvaluateIt) {
  const std::string dir = test::fresh_tmp_dir("attn_int8_cli_test", "vit");
  test::CliRun r = test::train_small_vit(dir, 2);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string ckpt = dir + "/run/checkpoint.safetensors", q = dir + "/q.safetensors";
  r = test::run_attn(dir, {"quantize", ckpt, "--out", q});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("9 of 9 Linear layers int8"), std::string::npos) << r.out;
  EXPECT_TRUE(io::read_checkpoint_metadata(q).contains("quantization"));
  EXPECT_EQ(io::read_checkpoint_metadata(q).contains("optimizer"), false);

  auto eval = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "eval");
    for (const char* a : {"--limit", "300", "--json", "--threads", "1"}) args.push_back(a);
    const test::CliRun e = test::run_attn(dir, args);
    EXPECT_EQ(e.code, 0) << e.err;
    return e.code == 0 ? json::parse(e.out) : json();
  };
  const json f32 = eval({ckpt}), at_load = eval({ckpt, "--dtype", "int8"}), file = eval({q}),
             file8 = eval({q, "--dtype", "int8"});
  EXPECT_EQ(f32["dtype"], "f32");
  EXPECT_EQ(at_load["dtype"], "int8");
  EXPECT_EQ(file["dtype"], "int8");
  // Quantized at load or read from the file: the same weights, the same numbers.
  EXPECT_EQ(file["accuracy"], at_load["accuracy"]);
  EXPECT_EQ(file["loss"], at_load["loss"]);
  EXPECT_EQ(file8["loss"], at_load["loss"]);
  // A barely trained model (one epoch of 640 images): many narrow margins, so a loose bound.
  EXPECT_NEAR(at_load["accuracy"].get<double>(), f32["accuracy"].get<double>(), 0.05);

  r = test::run_attn(dir, {"eval", q, "--dtype", "bf16"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("holds int8 Linear weights (written by attn quantize): load it as int8, not bf16"),
            std::string::npos) << r.err;
  r = test::run_attn(dir, {"eval", ckpt, "--dtype", "int4"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("expected --dtype f32, bf16 or int8, got 'int4'"), std::string::npos) << r.err;
  r = test::run_attn(dir, {"quantize", ckpt, "--keep-f32", "blocks.0.nope", "--out", dir + "/x.safetensors"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("'blocks.0.nope', which is no Linear layer"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir + "/x.safetensors"));
  r = test::run_attn(dir, {"quantize", ckpt, "--keep-f32", "head", "--out", dir + "/h.safetensors"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("8 of 9 Linear layers int8"), std::string::npos) << r.out;
}

TEST(Int8Cli, BenchReportsInt8WeightsAndPath) {
  const std::string dir = test::fresh_tmp_dir("attn_int8_cli_test", "bench");
  json j[2];
  int i = 0;
  for (const char* dt : {"f32", "int8"}) {
    const test::CliRun r = test::run_attn(dir, {"bench", "--model", "deit_tiny_patch16_224", "--iters", "1", "--warmup",
                                                "0", "--gemm-seconds", "0", "--threads", "1", "--dtype", dt, "--json"});
    ASSERT_EQ(r.code, 0) << r.err;
    std::string last = r.out.substr(0, r.out.find_last_not_of('\n') + 1);
    last = last.substr(last.rfind('\n') + 1);
    j[i++] = json::parse(last);
  }
  EXPECT_EQ(j[1]["dtype"], "int8");
  EXPECT_NE(j[1]["gemm_path"].get<std::string>().find("u8 x s8 -> s32"), std::string::npos) << j[1];
  EXPECT_LT(j[1]["weights_mb"].get<double>(), 0.3 * j[0]["weights_mb"].get<double>());
  EXPECT_GE(j[1]["packed_linear_weights"].get<int64_t>(), 1);
}

TEST(Int8Cli, BertClassifierQuantized) {
  ATTN_NEED_BERT_VOCAB(test::bert_vocab_path());
  const std::string dir = test::fresh_tmp_dir("attn_int8_cli_test", "bert");
  const char* tiny = R"({"hidden_size":32,"num_hidden_layers":2,"num_attention_heads":2,"intermediate_size":64})";
  test::CliRun r = test::run_attn(dir, {"train", "--task", "classify", "--data", "wordnet-lexname", "--model",
                                        "bert-mini", "--model-config", tiny, "--max-steps", "4", "--batch", "8",
                                        "--max-length", "32", "--limit-train", "400", "--limit-eval", "40", "--threads",
                                        "1", "--out", dir + "/run"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string ckpt = dir + "/run/checkpoint.safetensors", q = dir + "/q/q.safetensors";
  fs::create_directories(dir + "/q");
  r = test::run_attn(dir, {"quantize", ckpt, "--out", q});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir + "/q/vocab.txt")) << "the vocabulary goes beside the quantized checkpoint";
  auto eval = [&](const std::vector<std::string>& args) {
    std::vector<std::string> a = {"eval"};
    a.insert(a.end(), args.begin(), args.end());
    for (const char* x : {"--limit", "40", "--json", "--threads", "1"}) a.push_back(x);
    const test::CliRun e = test::run_attn(dir, a);
    EXPECT_EQ(e.code, 0) << e.err;
    return e.code == 0 ? json::parse(e.out) : json();
  };
  const json at_load = eval({ckpt, "--dtype", "int8"}), file = eval({q});
  EXPECT_EQ(at_load["dtype"], "int8");
  EXPECT_EQ(file["dtype"], "int8");
  EXPECT_EQ(file["loss"], at_load["loss"]);
  EXPECT_EQ(file["count"], 40);
  // The same label from the file and from quantizing at load.
  r = test::run_attn(dir, {"classify-text", q, "a domesticated carnivorous mammal", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const test::CliRun r2 = test::run_attn(dir, {"classify-text", ckpt, "a domesticated carnivorous mammal", "--dtype",
                                               "int8", "--json"});
  ASSERT_EQ(r2.code, 0) << r2.err;
  EXPECT_EQ(json::parse(r.out)["probs"], json::parse(r2.out)["probs"]);
}

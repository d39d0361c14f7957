// The attn tool with BERT: `info` prints the base model's and the full model's parameter counts (the
// counts of PyTorch's module tree, tests/golden/gen/bert.py), `convert` turns transformers' weights
// with their config.json into an attn checkpoint that loads back to the same outputs, `bench` runs a
// BERT on random token ids (one batch of mixed --lengths too, and bf16), and `train` pre-trains a BERT
// (here: names the missing vocabulary and how to fetch it).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "attn/attn.h"
#include "attn/autograd/grad_mode.h"
#include "attn/io/checkpoint.h"
#include "attn/models/bert.h"
#include "attn/models/pretrained.h"
#include "attn/nn/init.h"
#include "attn_cli.h"
#include "files.h"
#include "torch_ref.h"

using namespace attn;
using nlohmann::json;

namespace {

std::string with_commas(int64_t n) {
  std::string s = std::to_string(n);
  for (int64_t i = int64_t(s.size()) - 3; i > 0; i -= 3) s.insert(size_t(i), ",");
  return s;
}

std::string bytes_of(const Tensor& t) {
  return std::string(reinterpret_cast<const char*>(t.data<uint8_t>()), size_t(t.numel()));
}

}  // namespace

TEST(CliBert, InfoPrintsBothParameterCounts) {
  const std::string dir = test::fresh_tmp_dir("attn_cli_bert", "info");
  const json mini = {{"vocab_size", 30522}, {"hidden_size", 256}, {"num_hidden_layers", 4},
                     {"num_attention_heads", 4}, {"intermediate_size", 1024}, {"max_position_embeddings", 512},
                     {"type_vocab_size", 2}};
  const auto n = test::torch_ref("bert.count", {}, {{"config", mini}}).at("counts").to_vector<int64_t>();
  const test::CliRun r = test::run_attn(dir, {"info", "bert-mini"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("bert-mini (masked-lm)"), std::string::npos) << r.out;
  const std::string line = "parameters: " + with_commas(n[0]) + " BertModel, " + with_commas(n[1]) + " BertForPreTraining";
  EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  EXPECT_NE(r.out.find("cls.predictions.bias"), std::string::npos);
  EXPECT_EQ(r.out.find("cls.predictions.decoder.weight"), std::string::npos);   // tied: listed once
  std::filesystem::remove_all(dir);
}

TEST(CliBert, ConvertLoadsBackToTorchsOutputs) {
  const std::string dir = test::fresh_tmp_dir("attn_cli_bert", "convert");
  const json config = {{"vocab_size", 50}, {"hidden_size", 16}, {"num_hidden_layers", 2}, {"num_attention_heads", 2},
                       {"intermediate_size", 24}, {"max_position_embeddings", 8}, {"type_vocab_size", 2},
                       {"num_labels", 2}};
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{2, 7, 9, 11, 3, 0, 2, 30, 41, 3, 5, 8}, {2, 6});
  const Tensor types = Tensor::from_vector(std::vector<int64_t>{0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1, 1}, {2, 6});
  const Tensor mask = Tensor::from_vector(std::vector<int64_t>{1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1}, {2, 6});
  const auto ref = test::torch_ref("bert.model", {{"input_ids", ids}, {"token_type_ids", types}, {"attention_mask", mask}},
                                   {{"seed", 3}, {"architecture", "BertForMaskedLM"}, {"config", config},
                                    {"layout", {{"bin", true}, {"decoder_weight", true}}}});
  test::write_bytes(dir + "/hf/model.safetensors", bytes_of(ref.at("file")));
  test::write_bytes(dir + "/hf/config.json", bytes_of(ref.at("config")));
  const test::CliRun r =
      test::run_attn(dir, {"convert", dir + "/hf/model.safetensors", "--model", "bert-mini", "--out", dir + "/b.safetensors"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("model bert-mini"), std::string::npos) << r.out;
  // The tied MLM decoder weight is stored once (the word embeddings), its tie recorded.
  {
    const io::SafetensorsReader file(dir + "/b.safetensors");
    for (const auto& e : file.entries()) EXPECT_NE(e.name, "cls.predictions.decoder.weight");
    EXPECT_EQ(io::read_checkpoint_metadata(dir + "/b.safetensors")["tied"],
              json({{"cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight"}}));
  }
  models::PretrainedSource s = models::PretrainedSource::checkpoint(dir + "/b.safetensors");
  s.image_classifier_only = false;
  auto m = std::dynamic_pointer_cast<models::BertPreTrainedModel>(models::load_pretrained(s).module);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->cfg().architecture, models::BertArchitecture::masked_lm);
  NoGradGuard ng;
  // The padded path: every position (the packed one leaves padded positions 0; tests/models/bert_test.cpp).
  EXPECT_TENSOR_NEAR(m->forward({ids, types, mask}, {.pack_tokens = false}).prediction_logits,
                     ref.at("prediction_logits"), 1e-4, 0);

  // bench on the converted checkpoint and on random weights.
  const test::CliRun b = test::run_attn(dir, {"bench", "--model", "bert-mini", "--weights", dir + "/b.safetensors",
                                              "--seq-len", "8", "--iters", "2", "--warmup", "0", "--gemm-seconds", "0",
                                              "--threads", "1", "--json"});
  ASSERT_EQ(b.code, 0) << b.err;
  const json j = json::parse(b.out);
  EXPECT_EQ(j["seq_len"], 8);
  EXPECT_EQ(j["weights"], "attn checkpoint");
  EXPECT_GT(j["sequences_per_s"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(j["gmacs_per_sequence"].get<double>(), double(m->macs_per_sequence(8)) / 1e9);
  // Random weights of the base model alone (--model-config), as an ONNX export of BertModel would run.
  const json base = {{"architecture", "BertModel"}, {"num_hidden_layers", 1}};
  const test::CliRun rb = test::run_attn(dir, {"bench", "--model", "bert-mini", "--model-config", base.dump(), "--seq-len",
                                               "16", "--iters", "1", "--warmup", "0", "--gemm-seconds", "0", "--threads",
                                               "1", "--json"});
  ASSERT_EQ(rb.code, 0) << rb.err;
  const json jb = json::parse(rb.out);
  EXPECT_EQ(jb["weights"], "random");
  nn::init::SkipRandomInit skip;
  EXPECT_DOUBLE_EQ(jb["gmacs_per_sequence"].get<double>(),
                   double(models::create_bert("bert-mini", base)->macs_per_sequence(16)) / 1e9);
  std::filesystem::remove_all(dir);
}

// bench --lengths: one batch of those lengths (sequences/s, tokens/s of the valid tokens, the MACs at
// each sequence's own length), packed or --padded; --dtype bf16 with a BERT; the errors.
TEST(CliBert, BenchLengthsAndBf16) {
  const std::string dir = test::fresh_tmp_dir("attn_cli_bert", "bench");
  const json small = {{"num_hidden_layers", 1}};
  const std::vector<std::string> common = {"--model", "bert-mini", "--model-config", small.dump(), "--iters", "2",
                                           "--warmup", "0", "--gemm-seconds", "0", "--threads", "1", "--json"};
  const auto bench = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"bench"};
    args.insert(args.end(), common.begin(), common.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return test::run_attn(dir, args);
  };
  int64_t macs = 0;
  {
    nn::init::SkipRandomInit skip;
    auto m = models::create_bert("bert-mini", small);
    for (int64_t n : {4, 16, 9}) macs += m->macs_per_sequence(n);
  }
  for (bool padded : {false, true}) {
    SCOPED_TRACE(padded ? "padded" : "packed");
    std::vector<std::string> extra = {"--lengths", "4,16,9"};
    if (padded) extra.push_back("--padded");
    const test::CliRun r = bench(extra);
    ASSERT_EQ(r.code, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["batch"], 3);
    EXPECT_EQ(j["seq_len"], 16);
    EXPECT_EQ(j["tokens"], 29);
    EXPECT_EQ(j["lengths"], json({4, 16, 9}));
    EXPECT_EQ(j["packed_tokens"], !padded);
    for (const char* k : {"median", "p90", "min", "max"}) EXPECT_GT(j["latency_ms"][k].get<double>(), 0) << k;
    EXPECT_NEAR(j["tokens_per_s"].get<double>() / j["sequences_per_s"].get<double>(), 29.0 / 3.0, 1e-9);
    EXPECT_NEAR(j["gmacs_per_sequence"].get<double>(), double(macs) / 3 / 1e9, 1e-15);
  }
  const test::CliRun b = bench({"--lengths", "3,5", "--seq-len", "8", "--dtype", "bf16"});
  ASSERT_EQ(b.code, 0) << b.err;
  const json jb = json::parse(b.out);
  EXPECT_EQ(jb["dtype"], "bf16");
  EXPECT_EQ(jb["seq_len"], 8);
  const test::CliRun t = test::run_attn(dir, {"bench", "--model", "bert-mini", "--model-config", small.dump(), "--lengths",
                                              "4,16", "--iters", "1", "--warmup", "0", "--gemm-seconds", "0"});
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("tokens/s (20 tokens, lengths 4,16, padded to 16, packed)"), std::string::npos) << t.out;
  EXPECT_NE(bench({"--lengths", "4,x"}).err.find("expected --lengths as positive integers"), std::string::npos);
  EXPECT_NE(bench({"--lengths", "4,9", "--seq-len", "8"}).err.find("--lengths up to 9 do not fit in --seq-len 8"),
            std::string::npos);
  EXPECT_NE(bench({"--lengths", "4,9", "--batch", "3"}).err.find("--batch 3 disagrees with the 2 --lengths"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(CliBert, TrainPreTrainsAndNeedsTheVocabulary) {
  const std::string dir = test::fresh_tmp_dir("attn_cli_bert", "train");
  const test::CliRun r = test::run_attn(dir, {"train", "--model", "bert-mini", "--vocab", dir + "/vocab.txt", "--out",
                                              dir + "/run"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("pretraining: expected bert-base-uncased's vocab.txt at '" + dir +
                       "/vocab.txt', found no such file: run scripts/fetch_bert_vocab.sh"),
            std::string::npos)
      << r.err;
  std::filesystem::remove_all(dir);
}

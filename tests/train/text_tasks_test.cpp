// The BERT fine-tuning tasks of the trainer ("classify", "tag"; train/tasks/sequence_classification.h):
// short runs of a tiny BERT on the WordNet data (sentences, pairs, sequence labelling) with their
// metrics and checkpoints (id2label, the task), exact resume, pre-trained weights (--init: the encoder
// loaded, the head new), and the errors: a model that is no BERT, data of the other task, a checkpoint
// whose labels do not fit. Needs wordnet-base and bert-base-uncased's vocab.txt.
#include <gtest/gtest.h>

#include "attn/attn.h"
#include "attn/io/checkpoint.h"
#include "attn/io/safetensors.h"
#include "attn/models/bert.h"
#include "attn/train/checkpoint.h"
#include "attn/train/tasks/sequence_classification.h"
#include "attn/train/trainer.h"
#include "bert_vocab.h"
#include "errors.h"
#include "files.h"
#include "torch_ref.h"
#include "train_checks.h"

using namespace attn;
using test::error_of;

namespace {

const nlohmann::json kTiny = {{"hidden_size", 32}, {"num_hidden_layers", 1}, {"num_attention_heads", 2},
                              {"intermediate_size", 64}, {"max_position_embeddings", 64}};

train::TrainConfig tiny(const std::string& name, const std::string& task, const std::string& data) {
  auto cfg = test::quiet<train::TrainConfig>(test::fresh_tmp_dir("attn_text_tasks_test", name));
  cfg.task = task;
  cfg.model = "bert-mini";
  cfg.model_config = kTiny;
  cfg.data = data;
  cfg.max_steps = 6;
  cfg.eval_every = 3;
  cfg.text.batch = 8;
  cfg.text.max_length = 32;
  cfg.text.limit_eval = 48;
  cfg.limit_train = 400;
  cfg.seed = 3;
  return cfg;
}

Tensor tensor_of(const std::string& ckpt, const std::string& key) {
  for (auto& [k, t] : io::read_checkpoint(ckpt).model)
    if (k == key) return t;
  ADD_FAILURE() << key << " not in " << ckpt;
  return {};
}

}  // namespace

TEST(TextTasks, ClassifyTrainsAndResumesExactly) {
  ATTN_NEED_BERT_VOCAB(test::bert_vocab_path());
  train::TrainConfig cfg = tiny("lex", "classify", "wordnet-lexname");
  const train::TrainResult full = train::train(cfg);
  ASSERT_TRUE(full.finished);
  EXPECT_EQ(full.steps, 6);
  for (const char* k : {"test_accuracy", "test_macro_f1", "test_loss"}) EXPECT_TRUE(std::isfinite(full.metric(k))) << k;
  const nlohmann::json meta = io::read_checkpoint_metadata(full.checkpoint);
  EXPECT_EQ(meta["task"], "classify");
  EXPECT_EQ(meta["config"]["architecture"], "BertForSequenceClassification");
  EXPECT_EQ(meta["config"]["num_labels"], 45);
  EXPECT_EQ(meta["config"]["id2label"]["5"], "noun.animal");
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(full.checkpoint).parent_path() / "vocab.txt"));
  // Stopped after step 4 (a checkpoint every step), then resumed without --task / --model.
  train::TrainConfig a = tiny("lex_resumed", "classify", "wordnet-lexname");
  a.checkpoint_every = 1;
  a.stop_after = 4;
  const train::TrainResult first = train::train(a);
  EXPECT_FALSE(first.finished);
  train::TrainConfig b = a;
  b.stop_after = 0;
  b.resume = true;
  b.task.reset();
  b.model = "mlp";
  const train::TrainResult second = train::train(b);
  EXPECT_TRUE(test::same_bits(test::concat(first.step_losses, second.step_losses), full.step_losses));
  EXPECT_TRUE(test::same_checkpoint(second.checkpoint, full.checkpoint));
  EXPECT_EQ(second.metric("test_accuracy"), full.metric("test_accuracy"));
}

TEST(TextTasks, TagReportsSpanF1) {
  ATTN_NEED_BERT_VOCAB(test::bert_vocab_path());
  train::TrainConfig cfg = tiny("sst", "tag", "wordnet-supersense");
  cfg.max_steps = 3;
  const train::TrainResult r = train::train(cfg);
  ASSERT_TRUE(r.finished);
  for (const char* k : {"test_span_f1", "test_span_precision", "test_span_recall", "test_accuracy"}) {
    EXPECT_GE(r.metric(k), 0.0) << k;
    EXPECT_LE(r.metric(k), 1.0) << k;
  }
  EXPECT_GT(r.metric("dropped_sentences"), 0);
  const nlohmann::json meta = io::read_checkpoint_metadata(r.checkpoint);
  EXPECT_EQ(meta["task"], "tag");
  EXPECT_EQ(meta["config"]["architecture"], "BertForTokenClassification");
  EXPECT_EQ(meta["config"]["id2label"]["0"], "O");
  EXPECT_EQ(meta["config"]["num_labels"], 91);
}

TEST(TextTasks, PairsFromPretrainedEncoder) {
  ATTN_NEED_BERT_VOCAB(test::bert_vocab_path());
  // A "pre-trained" BertForPreTraining checkpoint (random weights, saved as attn saves models).
  const std::string dir = test::fresh_tmp_dir("attn_text_tasks_test", "pre");
  nlohmann::json c = kTiny;
  c["architecture"] = "BertForPreTraining";
  auto pre = models::create_bert("bert-mini", c);
  train::save_checkpoint(dir + "/checkpoint.safetensors", *pre, nullptr, {{"config", pre->config()}});
  train::TrainConfig cfg = tiny("pairs", "classify", "wordnet-pairs");
  cfg.model_config = nlohmann::json::object();
  cfg.init = dir + "/checkpoint.safetensors";
  cfg.lr = 0.0;   // the weights stay the loaded ones
  cfg.max_steps = 1;
  const train::TrainResult r = train::train(cfg);
  ASSERT_TRUE(r.finished);
  EXPECT_TRUE(std::isfinite(r.metric("test_accuracy")));
  EXPECT_TRUE(std::isfinite(r.metric("val_accuracy"))) << "the last evaluation's, beside the test split's";
  for (const char* k : {"bert.encoder.layer.0.attention.self.qkv.weight", "bert.embeddings.word_embeddings.weight",
                        "bert.pooler.dense.weight"})
    EXPECT_EQ(max(abs(tensor_of(r.checkpoint, k) - tensor_of(cfg.init, k))).item(), 0.0) << k;
  const nlohmann::json meta = io::read_checkpoint_metadata(r.checkpoint);
  EXPECT_EQ(meta["config"]["num_labels"], 2);
  EXPECT_EQ(meta["config"]["hidden_size"], 32);   // the checkpoint's config
  // A sequence classifier of other labels is no starting point for this data: both label sets named.
  train::TrainConfig lex = tiny("pairs_from_lex", "classify", "wordnet-pairs");
  lex.init = r.checkpoint;
  lex.model_config = nlohmann::json::object();
  lex.max_steps = 1;
  EXPECT_EQ(error_of([&] { train::train(lex); }), test::kNoError) << "same labels: loads whole";
  train::TrainConfig other = tiny("lex_from_pairs", "classify", "wordnet-lexname");
  other.init = r.checkpoint;
  other.model_config = nlohmann::json::object();
  const std::string e = error_of([&] { train::train(other); });
  EXPECT_NE(e.find("2 labels (no, yes)"), std::string::npos) << e;
  EXPECT_NE(e.find("wordnet-lexname has 45 labels (adj.all"), std::string::npos) << e;
}

// transformers' weights (model.safetensors and config.json of tests/golden/gen/bert.py's tree) as the
// starting point of a tagger: the encoder as the file has it (q / k / v packed), the head new.
TEST(TextTasks, TagFromTransformersWeights) {
  ATTN_NEED_BERT_VOCAB(test::bert_vocab_path());
  nlohmann::json config = kTiny;
  config.update({{"vocab_size", 30522}, {"type_vocab_size", 2}, {"layer_norm_eps", 1e-12}, {"hidden_dropout_prob", 0.1},
                 {"attention_probs_dropout_prob", 0.1}});
  const std::vector<int64_t> ids = {101, 2000, 102};
  const test::Tensors in = {{"input_ids", Tensor::from_vector(ids, {1, 3})},
                            {"token_type_ids", Tensor::zeros({1, 3}, DType::i64)},
                            {"attention_mask", Tensor::ones({1, 3}, DType::i64)}};
  const auto ref = test::torch_ref("bert.model", in, {{"seed", 4}, {"architecture", "BertForPreTraining"},
                                                      {"config", config}, {"layout", nlohmann::json::object()}});
  const std::string dir = test::fresh_tmp_dir("attn_text_tasks_test", "hf");
  auto write = [&](const char* key, const std::string& name) {
    const Tensor& t = ref.at(key);
    test::write_bytes(dir + "/" + name, std::string(reinterpret_cast<const char*>(t.data<uint8_t>()), size_t(t.numel())));
  };
  write("file", "model.safetensors");
  write("config", "config.json");
  train::TrainConfig cfg = tiny("sst_hf", "tag", "wordnet-supersense");
  cfg.model_config = nlohmann::json::object();
  cfg.init = dir + "/model.safetensors";
  cfg.lr = 0.0;
  cfg.max_steps = 1;
  const train::TrainResult r = train::train(cfg);
  ASSERT_TRUE(r.finished);
  const io::SafetensorsFile hf = io::load_safetensors(cfg.init);
  auto hf_tensor = [&](const std::string& key) {
    for (const auto& [k, t] : hf.tensors)
      if (k == key) return t;
    ADD_FAILURE() << key;
    return Tensor();
  };
  const Tensor qkv = tensor_of(r.checkpoint, "bert.encoder.layer.0.attention.self.qkv.weight");
  EXPECT_EQ(max(abs(qkv.slice(0, 32, 64) - hf_tensor("bert.encoder.layer.0.attention.self.key.weight"))).item(), 0.0);
  EXPECT_EQ(max(abs(tensor_of(r.checkpoint, "bert.embeddings.word_embeddings.weight") -
                    hf_tensor("bert.embeddings.word_embeddings.weight"))).item(), 0.0);
  EXPECT_EQ(io::read_checkpoint_metadata(r.checkpoint)["config"]["architecture"], "BertForTokenClassification");
}

TEST(TextTasks, ErrorsNameExpectedAndFound) {
  train::TrainConfig cfg = tiny("bad", "classify", "wordnet-lexname");
  cfg.model = "mlp";
  std::string e = error_of([&] { train::train(cfg); });
  EXPECT_NE(e.find("expected a BERT model (bert-base-cased, bert-base-uncased"), std::string::npos) << e;
  EXPECT_NE(e.find("got mlp (a image-classification model)"), std::string::npos) << e;
  cfg = tiny("bad_data", "tag", "wordnet-lexname");
  e = error_of([&] { train::train(cfg); });
  EXPECT_NE(e.find("expected sequence-labelling data (wordnet-supersense), got --data wordnet-lexname"),
            std::string::npos) << e;
  cfg = tiny("bad_name", "classify", "glosses");
  EXPECT_NE(error_of([&] { train::train(cfg); }).find("got 'glosses'"), std::string::npos);
  cfg = tiny("bad_task", "summarize", "wordnet-lexname");
  e = error_of([&] { train::train(cfg); });
  EXPECT_NE(e.find("expected --task one of"), std::string::npos) << e;
  EXPECT_NE(e.find("got 'summarize'"), std::string::npos) << e;
}

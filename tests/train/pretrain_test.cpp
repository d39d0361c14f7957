// The Trainer's BERT pre-training task (train/tasks/pretrain.h): a short run on the KJV (its log,
// metrics, curve and checkpoint metadata; BERT's linear warm-up and decay), and the errors: a model
// that is not BERT, a BERT without the pre-training heads, a missing vocabulary, an unknown task.
// The loss and gradients against PyTorch are in tests/models/bert_test.cpp (PretrainingStepEqualsTorch),
// exact resume in tests/cli/kill_resume_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>

#include "attn/io/checkpoint.h"
#include "attn/train/tasks/pretrain.h"
#include "attn/train/trainer.h"
#include "bert_vocab.h"
#include "errors.h"
#include "files.h"

using namespace attn;
using test::error_of;

namespace {

train::TrainConfig tiny(const std::string& out) {
  train::TrainConfig c;
  c.model = "bert-mini";
  c.task = "pretrain";
  c.data = "bible";
  c.model_config = {{"hidden_size", 32}, {"num_hidden_layers", 1}, {"num_attention_heads", 2}, {"intermediate_size", 64}};
  c.pretrain.vocab = test::bert_vocab_path();
  c.pretrain.batch = 8;
  c.pretrain.limit_eval = 16;
  c.limit_train = 32;
  c.epochs = 1;
  c.lr = 1e-3;
  c.warmup_steps = 2;
  c.out = out;
  c.progress = false;
  c.quiet = true;
  return c;
}

}  // namespace

TEST(PretrainTask, ShortRunLogsMetricsAndLinearSchedule) {
  ATTN_NEED_BERT_VOCAB(test::bert_vocab_path());
  const std::string out = test::fresh_tmp_dir("attn_pretrain_test", "run");
  train::Trainer t(tiny(out));
  std::vector<double> lrs;
  t.on_step([&](const train::StepInfo& s) { lrs.push_back(s.lr); });
  const train::TrainResult r = t.run();
  ASSERT_EQ(r.steps, 4);
  // Linear warm-up over 2 steps to 1e-3, then linear decay to 0 at the end (step 4).
  ASSERT_EQ(lrs.size(), 4u);
  EXPECT_DOUBLE_EQ(lrs[0], 0.5e-3);
  EXPECT_DOUBLE_EQ(lrs[1], 1e-3);
  EXPECT_DOUBLE_EQ(lrs[2], 1e-3);
  EXPECT_DOUBLE_EQ(lrs[3], 0.5e-3);
  for (const char* k : {"val_loss", "val_mlm_loss", "val_mlm_accuracy", "val_nsp_loss", "val_nsp_accuracy"})
    EXPECT_TRUE(std::isfinite(r.metric(k))) << k;
  EXPECT_NEAR(r.metric("val_loss"), r.metric("val_mlm_loss") + r.metric("val_nsp_loss"), 1e-9);
  EXPECT_GT(r.metric("val_mlm_loss"), 5.0);   // barely trained: near ln(30522) = 10.3
  EXPECT_EQ(r.metrics.at("train_instances"), 32);
  EXPECT_TRUE(std::filesystem::exists(r.plot));
  const std::string log = test::slurp(r.log);
  for (const char* k : {"\"train_mlm_accuracy\"", "\"val_nsp_accuracy\"", "\"sequences_per_second\""})
    EXPECT_NE(log.find(k), std::string::npos) << k;
  const nlohmann::json meta = io::read_checkpoint_metadata(r.checkpoint);
  EXPECT_EQ(meta.at("task"), "pretrain");
  EXPECT_EQ(meta.at("data").at("data"), "bible");
  EXPECT_EQ(meta.at("config").at("architecture"), "BertForPreTraining");
}

TEST(PretrainTask, Errors) {
  const std::string out = test::fresh_tmp_dir("attn_pretrain_test", "errors");
  train::TrainConfig c = tiny(out);
  c.model = "mlp";
  c.model_config = nlohmann::json::object();
  EXPECT_EQ(error_of([&] { train::train(c); }),
            "train --task pretrain: expected a BERT model (bert-mini, bert-small, bert-base-uncased, ...), got 'mlp', "
            "a model of the task image-classification");
  c = tiny(out);
  c.model_config["architecture"] = "BertForSequenceClassification";
  EXPECT_EQ(error_of([&] { train::train(c); }),
            "train --task pretrain: expected the architecture BertForPreTraining (MLM and NSP heads), got "
            "BertForSequenceClassification");
  c = tiny(out);
  c.pretrain.vocab = out + "/no/vocab.txt";
  EXPECT_EQ(error_of([&] { train::train(c); }),
            "pretraining: expected bert-base-uncased's vocab.txt at '" + out +
                "/no/vocab.txt', found no such file: run scripts/fetch_bert_vocab.sh (or pass --vocab FILE)");
  c = tiny(out);
  c.task = "pretraining";
  const std::string e = error_of([&] { train::train(c); });
  EXPECT_EQ(e.rfind("train: expected --task one of ", 0), 0u) << e;
  EXPECT_NE(e.find("pretrain, "), std::string::npos) << e;
  EXPECT_NE(e.find("got 'pretraining'"), std::string::npos) << e;
}

// Resuming takes the data settings from the checkpoint; a --data naming other data is refused, not ignored.
TEST(PretrainTask, ResumeRefusesOtherData) {
  ATTN_NEED_BERT_VOCAB(test::bert_vocab_path());
  const std::string out = test::fresh_tmp_dir("attn_pretrain_test", "resume_data");
  train::TrainConfig c = tiny(out);
  c.stop_after = 2;
  c.checkpoint_every = 1;
  train::train(c);
  c.stop_after = 0;
  c.resume = true;
  c.data = "wordnet";
  EXPECT_EQ(error_of([&] { train::train(c); }),
            "train --resume: the checkpoint was pre-trained on --data 'bible'; this call has --data 'wordnet'. Pass "
            "the run's own --data (or none) to continue it, or start a new run with --init");
  c.data.reset();   // no --data: the checkpoint's
  const train::TrainResult r = train::train(c);
  EXPECT_EQ(r.step_losses.size(), 2u);   // steps 3 and 4 of 4
  EXPECT_TRUE(r.finished);
}

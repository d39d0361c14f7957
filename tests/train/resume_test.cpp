// Exact resume of the classifier trainer: a short fixed-seed run (a tiny ViT with drop-path on a
// 2,048-image subset) stopped at a random step (as if killed) and resumed reproduces the
// uninterrupted run's per-step losses and final weights bit for bit — also when the kill came
// during a checkpoint write (a truncated temporary beside the good file), after a write failed
// (a full disk), and with an EMA, which is part of the one checkpoint file. A non-finite loss stops
// training with an error naming the step, the last checkpoint kept. And a short run on a subset
// reaches >= 70% on 1,000 test images within seconds.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "attn/attn.h"
#include "attn/io/checkpoint.h"
#include "attn/io/safetensors.h"
#include "attn/train/tasks/image_classification.h"
#include "attn/train/trainer.h"
#include "errors.h"
#include "resources.h"
#include "torch_ref.h"
#include "train_checks.h"

using namespace attn;
using test::error_of;

namespace {

std::string tmp_dir(const std::string& name) { return test::fresh_tmp_dir("attn_resume_test", name); }

train::TrainConfig tiny_vit(const std::string& out) {
  auto cfg = test::quiet<train::TrainConfig>(out);
  cfg.model = "vit";
  cfg.model_config = {{"dim", 32}, {"depth", 2}, {"heads", 2}, {"patch_size", 7}, {"drop_path", 0.1}, {"drop", 0.05}};
  cfg.epochs = 2;
  cfg.image.batch = 64;
  cfg.limit_train = 2048;   // 32 steps per epoch
  cfg.image.limit_eval = 200;
  cfg.image.augment = true;
  cfg.seed = 7;
  return cfg;
}

// The MLP on a subset: 64 images a step.
train::TrainConfig mlp(const std::string& out, int64_t epochs, int64_t limit_train, int64_t limit_eval) {
  auto cfg = test::quiet<train::TrainConfig>(out);
  cfg.model = "mlp";
  cfg.epochs = epochs;
  cfg.image.batch = 64;
  cfg.limit_train = limit_train;
  cfg.image.limit_eval = limit_eval;
  return cfg;
}

// tiny_vit(out) stopped after step k with a checkpoint every `every` steps: its result, and the
// config that resumes it.
std::pair<train::TrainResult, train::TrainConfig> stopped_after(const std::string& out, int64_t k, int64_t every) {
  train::TrainConfig cfg = tiny_vit(out);
  cfg.checkpoint_every = every;
  cfg.stop_after = k;
  train::TrainResult first = train::train(cfg);
  cfg.stop_after = 0;
  cfg.resume = true;
  return {first, cfg};
}

using test::killed_and_resumed;
using test::resumed_exactly;

}  // namespace

class Resume : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = tmp_dir("ref");
    reference_ = train::train(tiny_vit(dir_ + "/full"));
    ASSERT_EQ(reference_.steps, 64);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static inline std::string dir_;
  static inline train::TrainResult reference_;
};

TEST_F(Resume, KilledAtARandomStepResumesBitForBit) {
  const int64_t k = std::random_device{}() % 63 + 1;   // any step must do; printed to reproduce
  std::printf("  killed after step %lld of 64\n", (long long)k);
  const std::string out = tmp_dir("kill");
  const auto seconds = [](const std::string& ckpt) {
    return io::read_checkpoint_metadata(ckpt).at("train_state").at("seconds").get<double>();
  };
  double first_piece = 0;
  const auto read_first_piece = [&](const train::TrainResult& first) { first_piece = seconds(first.checkpoint); };
  const auto [a, b] = killed_and_resumed(tiny_vit(out), k, train::train, read_first_piece);
  ASSERT_EQ(a.steps, k);
  EXPECT_GT(first_piece, 0.0);
  EXPECT_EQ(b.steps, 64);
  // The training time carries over a resume: the total includes the first piece's.
  EXPECT_GT(seconds(b.checkpoint), first_piece);
  EXPECT_TRUE(resumed_exactly(a, b, reference_)) << "killed after step " << k;
  EXPECT_EQ(b.metric("test_accuracy"), reference_.metric("test_accuracy"));
  std::filesystem::remove_all(out);
}

TEST_F(Resume, KilledDuringACheckpointWriteResumesFromTheLastGoodOne) {
  const std::string out = tmp_dir("torn");
  // The kill (after step 37, mid-epoch 2) came while the next checkpoint was being written: a torn
  // temporary beside the good file.
  const auto tear = [](const train::TrainResult& first) {
    test::write_bytes(first.checkpoint + ".tmp.a1B2c3", test::slurp(first.checkpoint).substr(0, 200));
    auto m = models::load_classifier_checkpoint(first.checkpoint);   // the good one still loads
    EXPECT_EQ(io::read_checkpoint_metadata(first.checkpoint).at("train_state").at("step"), 37);
    EXPECT_EQ(io::unfinished_writes(first.checkpoint).size(), 1u);
  };
  const auto [a, b] = killed_and_resumed(tiny_vit(out), 37, train::train, tear);
  EXPECT_TRUE(resumed_exactly(a, b, reference_));
  EXPECT_TRUE(io::unfinished_writes(b.checkpoint).empty()) << "the resumed run removes what the kill left";
  std::filesystem::remove_all(out);
}

TEST_F(Resume, UnwritableCheckpointStopsTrainingAndKeepsTheLastGoodOne) {
  const std::string out = tmp_dir("unwritable");
  const auto stopped = stopped_after(out, 20, 1);
  const train::TrainResult& a = stopped.first;
  const train::TrainConfig& cfg = stopped.second;
  // The disk fills up: writes beyond 64 KiB fail (the checkpoint is ~340 KiB; the log rewritten at
  // the start is smaller).
  std::string error;
  {
    test::FileSizeLimit full(64 << 10);
    error = error_of([&] { train::train(cfg); });
  }
  EXPECT_EQ(error, "write '" + a.checkpoint + "': write failed after 65536 bytes: File too large");
  EXPECT_EQ(io::read_checkpoint_metadata(a.checkpoint).at("train_state").at("step"), 20);
  models::load_classifier_checkpoint(a.checkpoint);
  EXPECT_TRUE(io::unfinished_writes(a.checkpoint).empty());
  train::TrainResult b = train::train(cfg);
  EXPECT_TRUE(resumed_exactly(a, b, reference_));
  std::filesystem::remove_all(out);
}

TEST_F(Resume, RefusesSettingsThatChangeTheDataOrder) {
  const std::string out = tmp_dir("settings");
  const train::TrainConfig cfg = stopped_after(out, 5, 5).second;
  train::TrainConfig other = cfg;
  other.seed = 8;
  other.image.batch = 32;
  const std::string ckpt = out + "/checkpoint.safetensors";
  EXPECT_EQ(error_of([&] { train::train(other); }),
            "train --resume: '" + ckpt + "' was trained with --seed 7, --batch 64; this call has --seed 8, --batch "
            "32. The data order and augmentation depend on these: pass the run's own values to continue it");
  EXPECT_EQ(io::read_checkpoint_metadata(ckpt).at("train_state").at("step"), 5);   // untouched
  // Nothing to resume: said plainly.
  train::TrainConfig none = cfg;
  none.out = out + "/empty";
  EXPECT_EQ(error_of([&] { train::train(none); }),
            "train --resume: there is no checkpoint to resume at '" + out +
            "/empty/checkpoint.safetensors' (--out " + out +
            "/empty); run without --resume to start training");
  // Schedule settings may change (e.g. a lower --lr after a non-finite loss): accepted.
  other = cfg;
  other.lr = 1e-3 / 2;   // half the default
  other.max_steps = 8;
  EXPECT_EQ(train::train(other).steps, 8);
  std::filesystem::remove_all(out);
}

TEST(Train, NonFiniteLossStopsWithTheStepAndKeepsTheCheckpoint) {
  const std::string out = tmp_dir("nan");
  train::TrainConfig cfg = mlp(out, 1, 512, 100);
  cfg.lr = 1e30;
  cfg.warmup_epochs = 0;
  cfg.checkpoint_every = 1;
  const std::string ckpt = out + "/checkpoint.safetensors";
  auto msg = [&](const char* v) {
    return std::string("train: the loss became ") + v + " at step 2 (epoch 1); stopped. The last good checkpoint "
           "is kept at " + ckpt + " (resume with --resume after lowering --lr)";
  };
  const std::string got = error_of([&] { train::train(cfg); });
  EXPECT_TRUE(got == msg("nan") || got == msg("inf")) << got;
  EXPECT_EQ(io::read_checkpoint_metadata(ckpt).at("train_state").at("step"), 1);
  EXPECT_NO_THROW(models::load_classifier_checkpoint(ckpt));
  std::filesystem::remove_all(out);
}

TEST(Train, ShortRunReaches70PercentInSeconds) {
  const std::string out = tmp_dir("fast");
  train::TrainConfig cfg = mlp(out, 2, 4096, 1000);
  cfg.warmup_epochs = 0.2;
  cfg.seed = 3;
  const auto t0 = std::chrono::steady_clock::now();
  train::TrainResult r = train::train(cfg);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("  mlp, 4,096 images x 2 epochs: %.1f%% on 1,000 test images in %.1f s\n", 100 * r.metric("test_accuracy"), secs);
  EXPECT_GE(r.metric("test_accuracy"), 0.70);
  EXPECT_LT(secs, 60.0);
  std::filesystem::remove_all(out);
}

// The DeiT recipe's extras (RandAugment, random erasing, Mixup/CutMix, EMA) keep the resume exact:
// the mixing of a step is drawn from a generator positioned by the step, and the EMA weights are
// in the checkpoint with the model's.
TEST(Train, DeitRecipeResumesBitForBitWithTheEma) {
  const std::string dir = tmp_dir("recipe");
  auto recipe = [&](const std::string& out) {
    train::TrainConfig cfg = tiny_vit(out);
    cfg.epochs = 1;
    cfg.limit_train = 1024;   // 16 steps
    cfg.image.rand_augment = 2;
    cfg.image.erase_p = 0.25;
    cfg.image.mixup = 0.8;
    cfg.image.cutmix = 1.0;
    cfg.ema_decay = 0.9;
    return cfg;
  };
  train::TrainResult ref = train::train(recipe(dir + "/full"));
  ASSERT_EQ(ref.steps, 16);
  EXPECT_FALSE(std::isnan(ref.metric("test_accuracy_ema")));
  EXPECT_TRUE(io::checkpoint_has_ema(io::open_checkpoint(ref.checkpoint)));
  EXPECT_FALSE(std::filesystem::exists(dir + "/full/checkpoint_ema.safetensors")) << "one file";
  // The recipe changes what is trained on: the losses differ from a plain run's.
  train::TrainConfig plain = tiny_vit(dir + "/plain");
  plain.epochs = 1;
  plain.limit_train = 1024;
  train::TrainResult p = train::train(plain);
  EXPECT_FALSE(test::same_bits(p.step_losses, ref.step_losses));

  const auto [a, b] = killed_and_resumed(recipe(dir + "/kill"), 7, train::train);
  EXPECT_TRUE(resumed_exactly(a, b, ref));   // the EMA's tensors included
  EXPECT_EQ(b.metric("test_accuracy_ema"), ref.metric("test_accuracy_ema"));
  std::filesystem::remove_all(dir);
}

// The EMA used to be written to a second file (checkpoint_ema.safetensors) before the checkpoint; a
// kill between the two renames left it a step ahead of the checkpoint, and the resumed run applied
// that step's EMA update twice. Now the EMA is in the checkpoint: such a file (as that kill left it:
// the EMA of step 5 beside the checkpoint of step 4) is not read, and the resumed run's EMA is the
// uninterrupted run's bit for bit.
TEST(Train, AnEmaFileAStepAheadOfTheCheckpointDoesNotChangeTheResumedRun) {
  const std::string dir = tmp_dir("ema_ahead");
  auto with_ema = [](const std::string& out) {
    train::TrainConfig cfg = tiny_vit(out);
    cfg.epochs = 1;
    cfg.limit_train = 512;   // 8 steps
    cfg.ema_decay = 0.5;     // each update moves the EMA far: a replayed one shows
    return cfg;
  };
  const train::TrainResult ref = train::train(with_ema(dir + "/full"));
  ASSERT_EQ(ref.steps, 8);
  train::TrainConfig ahead = with_ema(dir + "/ahead");
  ahead.stop_after = 5;
  ahead.checkpoint_every = 1;
  const train::TrainResult five = train::train(ahead);
  const auto leave_the_ema_of_step_5 = [&](const train::TrainResult& four) {
    const io::CheckpointFile f = io::read_checkpoint(five.checkpoint);
    io::write_checkpoint(dir + "/kill/checkpoint_ema.safetensors", f.ema, std::nullopt,
                         {{"config", f.metadata.at("config")}, {"ema_decay", 0.5}, {"step", 5}});
    EXPECT_EQ(io::read_checkpoint_metadata(four.checkpoint).at("train_state").at("step"), 4);
  };
  const auto [a, b] = killed_and_resumed(with_ema(dir + "/kill"), 4, train::train, leave_the_ema_of_step_5);
  EXPECT_TRUE(resumed_exactly(a, b, ref));
  // The EMA weights load from the checkpoint for inference.
  const io::CheckpointFile f = io::read_checkpoint(b.checkpoint);
  auto ema = models::load_classifier_checkpoint(b.checkpoint, DType::f32, io::CheckpointWeights::ema);
  const io::TensorList sd = ema->state_dict();
  ASSERT_EQ(sd.size(), f.ema.size());
  for (size_t i = 0; i < sd.size(); ++i) EXPECT_TENSOR_NEAR(sd[i].second, f.ema[i].second, 0, 0) << sd[i].first;
  std::filesystem::remove_all(dir);
}

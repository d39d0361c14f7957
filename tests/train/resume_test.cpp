// Exact resume of the classifier trainer: a short fixed-seed run (a tiny ViT with drop-path on a
// 2,048-image subset) stopped at a random step (as if killed) and resumed reproduces the
// uninterrupted run's per-step losses and final weights bit for bit — also when the kill came
// during a checkpoint write (a truncated .tmp beside the good file, or a .tmp that cannot be
// written). A non-finite loss stops training with an error naming the step, the last checkpoint
// kept. And a short run on a subset reaches >= 70% on 1,000 test images within seconds.
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
#include "train_checks.h"

using namespace attn;

namespace {

std::string tmp_dir(const std::string& name) { return test::fresh_tmp_dir("attn_resume_test", name); }

train::TrainConfig tiny_vit(const std::string& out) {
  train::TrainConfig cfg;
  cfg.model = "vit";
  cfg.model_config = {{"dim", 32}, {"depth", 2}, {"heads", 2}, {"patch_size", 7}, {"drop_path", 0.1}, {"drop", 0.05}};
  cfg.epochs = 2;
  cfg.image.batch = 64;
  cfg.limit_train = 2048;   // 32 steps per epoch
  cfg.image.limit_eval = 200;
  cfg.image.augment = true;
  cfg.seed = 7;
  cfg.out = out;
  cfg.progress = false;
  cfg.quiet = true;
  return cfg;
}

using test::concat;
using test::same_bits;
using test::same_checkpoint;

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
  train::TrainConfig cfg = tiny_vit(out);
  cfg.checkpoint_every = 1;
  cfg.stop_after = k;
  train::TrainResult a = train::train(cfg);
  ASSERT_EQ(a.steps, k);
  const auto seconds = [](const std::string& ckpt) {
    return io::read_checkpoint_metadata(ckpt).at("train_state").at("seconds").get<double>();
  };
  const double first_piece = seconds(a.checkpoint);
  EXPECT_GT(first_piece, 0.0);
  cfg.stop_after = 0;
  cfg.resume = true;
  train::TrainResult b = train::train(cfg);
  EXPECT_EQ(b.steps, 64);
  // The training time carries over a resume: the total includes the first piece's.
  EXPECT_GT(seconds(b.checkpoint), first_piece);
  EXPECT_TRUE(same_bits(concat(a.step_losses, b.step_losses), reference_.step_losses)) << "killed after step " << k;
  EXPECT_TRUE(same_checkpoint(b.checkpoint, reference_.checkpoint)) << "killed after step " << k;
  EXPECT_EQ(b.metric("test_accuracy"), reference_.metric("test_accuracy"));
  std::filesystem::remove_all(out);
}

TEST_F(Resume, KilledDuringACheckpointWriteResumesFromTheLastGoodOne) {
  const std::string out = tmp_dir("torn");
  train::TrainConfig cfg = tiny_vit(out);
  cfg.checkpoint_every = 1;
  cfg.stop_after = 37;   // mid-epoch 2
  train::TrainResult a = train::train(cfg);
  // The kill came while the next checkpoint was being written: a torn .tmp beside the good file.
  {
    std::ifstream f(a.checkpoint, std::ios::binary);
    std::string head(200, '\0');
    f.read(head.data(), std::streamsize(head.size()));
    std::ofstream(a.checkpoint + ".tmp", std::ios::binary) << head;
  }
  auto m = train::load_classifier(a.checkpoint);   // the good one still loads
  EXPECT_EQ(io::read_checkpoint_metadata(a.checkpoint).at("train_state").at("step"), 37);
  cfg.stop_after = 0;
  cfg.resume = true;
  train::TrainResult b = train::train(cfg);
  EXPECT_TRUE(same_bits(concat(a.step_losses, b.step_losses), reference_.step_losses));
  EXPECT_TRUE(same_checkpoint(b.checkpoint, reference_.checkpoint));
  std::filesystem::remove_all(out);
}

TEST_F(Resume, UnwritableCheckpointStopsTrainingAndKeepsTheLastGoodOne) {
  const std::string out = tmp_dir("unwritable");
  train::TrainConfig cfg = tiny_vit(out);
  cfg.checkpoint_every = 1;
  cfg.stop_after = 20;
  train::TrainResult a = train::train(cfg);
  const std::string tmp = a.checkpoint + ".tmp";
  std::filesystem::create_directory(tmp);   // the next write cannot create its .tmp
  cfg.stop_after = 0;
  cfg.resume = true;
  try {
    train::train(cfg);
    FAIL() << "expected the checkpoint write to fail";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "write '" + a.checkpoint + "': cannot create '" + tmp + "': Is a directory");
  }
  EXPECT_EQ(io::read_checkpoint_metadata(a.checkpoint).at("train_state").at("step"), 20);
  train::load_classifier(a.checkpoint);
  std::filesystem::remove(tmp);
  train::TrainResult b = train::train(cfg);
  EXPECT_TRUE(same_bits(concat(a.step_losses, b.step_losses), reference_.step_losses));
  EXPECT_TRUE(same_checkpoint(b.checkpoint, reference_.checkpoint));
  std::filesystem::remove_all(out);
}

TEST_F(Resume, RefusesSettingsThatChangeTheDataOrder) {
  const std::string out = tmp_dir("settings");
  train::TrainConfig cfg = tiny_vit(out);
  cfg.checkpoint_every = 5;
  cfg.stop_after = 5;
  train::train(cfg);
  cfg.stop_after = 0;
  cfg.resume = true;
  train::TrainConfig other = cfg;
  other.seed = 8;
  other.image.batch = 32;
  const std::string ckpt = out + "/checkpoint.safetensors";
  try {
    train::train(other);
    FAIL() << "expected the resume to be refused";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "train --resume: '" + ckpt + "' was trained with --seed 7, --batch 64; this call has --seed 8, --batch "
              "32. The data order and augmentation depend on these: pass the run's own values to continue it");
  }
  EXPECT_EQ(io::read_checkpoint_metadata(ckpt).at("train_state").at("step"), 5);   // untouched
  // Nothing to resume: said plainly.
  train::TrainConfig none = cfg;
  none.out = out + "/empty";
  try {
    train::train(none);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "train --resume: there is no checkpoint to resume at '" + out +
                                         "/empty/checkpoint.safetensors' (--out " + out +
                                         "/empty); run without --resume to start training");
  }
  // Schedule settings may change (e.g. a lower --lr after a non-finite loss): accepted.
  other = cfg;
  other.lr = 1e-3 / 2;   // half the default
  other.max_steps = 8;
  EXPECT_EQ(train::train(other).steps, 8);
  std::filesystem::remove_all(out);
}

TEST(Train, NonFiniteLossStopsWithTheStepAndKeepsTheCheckpoint) {
  const std::string out = tmp_dir("nan");
  train::TrainConfig cfg;
  cfg.model = "mlp";
  cfg.lr = 1e30;
  cfg.warmup_epochs = 0;
  cfg.epochs = 1;
  cfg.image.batch = 64;
  cfg.limit_train = 512;
  cfg.image.limit_eval = 100;
  cfg.checkpoint_every = 1;
  cfg.out = out;
  cfg.progress = false;
  cfg.quiet = true;
  const std::string ckpt = out + "/checkpoint.safetensors";
  auto msg = [&](const char* v) {
    return std::string("train: the loss became ") + v + " at step 2 (epoch 1); stopped. The last good checkpoint "
           "is kept at " + ckpt + " (resume with --resume after lowering --lr)";
  };
  try {
    train::train(cfg);
    FAIL() << "expected a non-finite loss";
  } catch (const Error& e) {
    const std::string got = e.what();
    EXPECT_TRUE(got == msg("nan") || got == msg("inf")) << got;
  }
  EXPECT_EQ(io::read_checkpoint_metadata(ckpt).at("train_state").at("step"), 1);
  EXPECT_NO_THROW(train::load_classifier(ckpt));
  std::filesystem::remove_all(out);
}

TEST(Train, ShortRunReaches70PercentInSeconds) {
  const std::string out = tmp_dir("fast");
  train::TrainConfig cfg;
  cfg.model = "mlp";
  cfg.epochs = 2;
  cfg.image.batch = 64;
  cfg.limit_train = 4096;
  cfg.image.limit_eval = 1000;
  cfg.warmup_epochs = 0.2;
  cfg.seed = 3;
  cfg.out = out;
  cfg.progress = false;
  cfg.quiet = true;
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
// checkpointed beside the model.
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
  EXPECT_TRUE(std::filesystem::exists(dir + "/full/checkpoint_ema.safetensors"));
  // The recipe changes what is trained on: the losses differ from a plain run's.
  train::TrainConfig plain = tiny_vit(dir + "/plain");
  plain.epochs = 1;
  plain.limit_train = 1024;
  train::TrainResult p = train::train(plain);
  EXPECT_FALSE(same_bits(p.step_losses, ref.step_losses));

  train::TrainConfig cfg = recipe(dir + "/kill");
  cfg.checkpoint_every = 1;
  cfg.stop_after = 7;
  train::TrainResult a = train::train(cfg);
  cfg.stop_after = 0;
  cfg.resume = true;
  train::TrainResult b = train::train(cfg);
  EXPECT_TRUE(same_bits(concat(a.step_losses, b.step_losses), ref.step_losses));
  EXPECT_TRUE(same_checkpoint(b.checkpoint, ref.checkpoint));
  EXPECT_TRUE(same_checkpoint(dir + "/kill/checkpoint_ema.safetensors", dir + "/full/checkpoint_ema.safetensors"));
  EXPECT_EQ(b.metric("test_accuracy_ema"), ref.metric("test_accuracy_ema"));
  std::filesystem::remove_all(dir);
}

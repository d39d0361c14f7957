// DeiT distillation: the loss wrapper against DeiT's DistillationLoss written in torch
// (tests/golden/gen/distill.py) — value and both heads' gradients for soft / hard / none, label
// smoothing and soft (Mixup) targets — and the trainer's distillation path: teacher checks,
// checkpoint metadata, per-head validation accuracies, and 'none' training the class head only.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "attn/attn.h"
#include "attn/io/checkpoint.h"
#include "attn/models/vit.h"
#include "attn/ops/softmax.h"
#include "attn/train/tasks/image_classification.h"
#include "attn/train/trainer.h"
#include "attn/train/checkpoint.h"
#include "attn/train/distill.h"
#include "errors.h"
#include "torch_ref.h"
#include "train_checks.h"

using namespace attn;
using test::error_of;

namespace {

struct Case {
  const char* type;
  double alpha, tau, smoothing;
  bool soft_targets;
};

std::string tmp_dir(const std::string& name) { return test::fresh_tmp_dir("attn_distill_test", name); }

// A saved (untrained) classifier checkpoint, to act as a teacher.
std::string save_teacher(const std::string& dir, const std::string& model, const nlohmann::json& overrides) {
  manual_seed(99);
  auto m = models::create_model(model, overrides);
  const std::string path = dir + "/teacher.safetensors";
  train::save_checkpoint(path, *m, nullptr, {{"config", m->config()}});
  return path;
}

train::TrainConfig tiny_deit(const std::string& out) {
  auto cfg = test::quiet<train::TrainConfig>(out);
  cfg.model = "deit_fmnist_distilled";
  cfg.model_config = {{"dim", 32}, {"depth", 1}, {"heads", 2}, {"patch_size", 7}};
  cfg.epochs = 1;
  cfg.image.batch = 64;
  cfg.limit_train = 256;
  cfg.image.limit_eval = 256;
  return cfg;
}

}  // namespace

TEST(DistillationLoss, MatchesDeitFormulas) {
  const std::vector<Case> cases = {
      {"soft", 0.5, 1.0, 0.0, false}, {"soft", 0.3, 3.0, 0.1, false}, {"hard", 0.5, 1.0, 0.1, false},
      {"hard", 0.7, 1.0, 0.0, true},  {"none", 0.5, 1.0, 0.1, false}, {"soft", 0.5, 2.0, 0.0, true},
  };
  Generator g(5);
  for (const Case& c : cases) {
    const int64_t B = 7, C = 11;   // primes
    Tensor cls = randn({B, C}, g) * 2.0, dist = randn({B, C}, g) * 2.0, teacher = randn({B, C}, g) * 3.0;
    Tensor y;
    if (c.soft_targets) {
      y = softmax(randn({B, C}, g) * 2.0, -1);
    } else {
      std::vector<int64_t> v(B);
      for (auto& e : v) e = g.randint(C);
      y = Tensor::from_vector(v, {B});
    }
    auto ref = test::torch_ref("distill.loss", {{"cls", cls}, {"dist", dist}, {"teacher", teacher}, {"y", y}},
                               {{"type", c.type}, {"alpha", c.alpha}, {"tau", c.tau}, {"label_smoothing", c.smoothing}});
    train::DistillationLoss crit({.type = train::parse_distill_type(c.type), .alpha = c.alpha, .tau = c.tau,
                                  .label_smoothing = c.smoothing});
    Tensor a = cls.clone(), b = dist.clone();
    a.requires_grad_();
    b.requires_grad_();
    train::DistillLossParts l = crit(a, b, y, teacher);
    const std::string ctx = std::string(c.type) + " alpha " + std::to_string(c.alpha) + " tau " + std::to_string(c.tau) +
                            (c.soft_targets ? " soft targets" : "");
    EXPECT_TENSOR_NEAR(l.total, ref.at("total"), 1e-6, 1e-5) << ctx;
    EXPECT_TENSOR_NEAR(l.base, ref.at("base"), 1e-6, 1e-5) << ctx;
    if (std::string(c.type) != "none") EXPECT_TENSOR_NEAR(l.distill, ref.at("distill"), 1e-6, 1e-5) << ctx;
    else EXPECT_FALSE(l.distill.defined()) << ctx;
    l.total.backward();
    EXPECT_TENSOR_NEAR(a.grad(), ref.at("dcls"), 1e-7, 1e-4) << ctx << " d cls";
    if (std::string(c.type) != "none") EXPECT_TENSOR_NEAR(b.grad(), ref.at("ddist"), 1e-7, 1e-4) << ctx << " d dist";
    else EXPECT_FALSE(b.grad().defined()) << ctx << ": none must not train the distillation head";
  }
}

TEST(DistillationLoss, SoftTermGradcheck) {
  Generator g(6);
  Tensor t = randn({3, 5}, g, DType::f64);
  EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return train::soft_distillation(in[0], t, 2.0); },
                              {randn({3, 5}, g, DType::f64)}));
}

TEST(DistillationLoss, Errors) {
  EXPECT_EQ(error_of([] { train::parse_distill_type("medium"); }),
            "distill: expected none, soft or hard, got 'medium'");
  EXPECT_EQ(error_of([] { train::DistillationLoss({.type = train::DistillType::soft, .alpha = 1.5}); }),
            "distill: expected alpha in [0, 1], got 1.5");
  EXPECT_EQ(error_of([] {
    train::DistillationLoss l({.type = train::DistillType::hard});
    l(Tensor::zeros({2, 3}), Tensor(), Tensor::zeros({2}, DType::i64), Tensor::zeros({2, 3}));
  }), "distill: hard distillation needs the distillation head's logits (a model with a distillation token)");
  EXPECT_EQ(error_of([] { train::soft_distillation(Tensor::zeros({2, 3}), Tensor::zeros({2, 4}), 1.0); }),
            "soft_distillation: expected teacher logits of shape [2, 3], got [2, 4]");
}

TEST(DistillTrainer, TeacherWithOtherClassCountIsRejectedBeforeTraining) {
  const std::string dir = tmp_dir("classes");
  train::TrainConfig cfg = tiny_deit(dir + "/run");
  cfg.image.teacher = save_teacher(dir, "mlp", {{"num_classes", 5}});
  cfg.image.distill = "soft";
  EXPECT_EQ(error_of([&] { train::train(cfg); }),
            "train: the teacher '" + cfg.image.teacher +
            "' predicts 5 classes, but fashion-mnist has 10");
  EXPECT_FALSE(std::filesystem::exists(*cfg.out + "/checkpoint.safetensors"));
  std::filesystem::remove_all(dir);
}

TEST(DistillTrainer, SettingsAreChecked) {
  const std::string dir = tmp_dir("settings");
  const std::string teacher = save_teacher(dir, "mlp", nlohmann::json::object());
  train::TrainConfig cfg = tiny_deit(dir + "/run");
  cfg.image.distill = "hard";
  EXPECT_EQ(error_of([&] { train::train(cfg); }),
            "train: --distill hard needs a teacher checkpoint (--teacher)");
  cfg.image.teacher = teacher;
  cfg.image.distill = "none";
  EXPECT_EQ(error_of([&] { train::train(cfg); }),
            "train: a teacher ('" + teacher + "') was given but --distill is none (use soft "
            "or hard)");
  std::filesystem::remove_all(dir);
}

TEST(DistillTrainer, HardDistillationRunRecordsSettingsAndPerHeadAccuracy) {
  const std::string dir = tmp_dir("hard");
  train::TrainConfig cfg = tiny_deit(dir + "/run");
  cfg.image.teacher = save_teacher(dir, "resnet_fmnist_tiny", nlohmann::json::object());
  cfg.image.distill = "hard";
  cfg.image.alpha = 0.5;
  cfg.image.tau = 1.0;
  train::TrainResult r = train::train(cfg);
  EXPECT_EQ(r.steps, 4);
  EXPECT_FALSE(std::isnan(r.metric("test_accuracy_cls")));
  EXPECT_FALSE(std::isnan(r.metric("test_accuracy_dist")));
  nlohmann::json meta = io::read_checkpoint_metadata(r.checkpoint);
  const auto& d = meta.at("train_state").at("distill");
  EXPECT_EQ(d.at("type"), "hard");
  EXPECT_EQ(d.at("teacher"), cfg.image.teacher);
  EXPECT_EQ(d.at("alpha").get<double>(), 0.5);
  EXPECT_EQ(d.at("tau").get<double>(), 1.0);
  std::ifstream log(r.log);
  std::string line;
  ASSERT_TRUE(std::getline(log, line));
  nlohmann::json rec = nlohmann::json::parse(line);
  for (const char* k : {"val_accuracy_cls", "val_accuracy_dist", "val_accuracy_both"})
    EXPECT_TRUE(rec.contains(k) && rec[k].is_number()) << k << " in " << line;
  EXPECT_EQ(rec["val_accuracy_both"], rec["val_accuracy"]);
  std::filesystem::remove_all(dir);
}

// DeiT's 'none': a distilled model trains its class head only — the distillation head keeps its
// initial weights (no gradient reaches it, and AdamW skips parameters without one).
TEST(DistillTrainer, NoneTrainsTheClassHeadOnly) {
  const std::string dir = tmp_dir("none");
  train::TrainConfig cfg = tiny_deit(dir + "/run");
  train::TrainResult r = train::train(cfg);
  auto trained = models::load_classifier_checkpoint(r.checkpoint);
  manual_seed(cfg.seed);
  auto init = models::create_model(cfg.model, cfg.model_config);
  auto sd0 = init->state_dict(), sd1 = trained->state_dict();
  std::map<std::string, Tensor> a(sd0.begin(), sd0.end()), b(sd1.begin(), sd1.end());
  for (const char* k : {"head_dist.weight", "head_dist.bias"}) EXPECT_TENSOR_NEAR(b.at(k), a.at(k), 0, 0) << k;
  EXPECT_FALSE(test::near(b.at("head.weight"), a.at("head.weight"), 0, 0)) << "the class head trains";
  std::filesystem::remove_all(dir);
}

// A model without a distillation token distils into its class head: with the student's own initial
// weights as the teacher, soft distillation at alpha 1 starts from a loss of 0 (KL of identical
// logits), and at alpha 0 it trains exactly as without a teacher.
TEST(DistillTrainer, ModelWithoutDistillationTokenDistilsIntoItsClassHead) {
  const std::string dir = tmp_dir("class_head");
  train::TrainConfig cfg = tiny_deit(dir + "/run");
  cfg.model = "vit";
  cfg.model_config["drop_path"] = 0.0;   // training-mode logits equal the teacher's eval-mode ones
  cfg.max_steps = 2;
  manual_seed(cfg.seed);
  auto init = models::create_model(cfg.model, cfg.model_config);
  cfg.image.teacher = dir + "/self.safetensors";
  train::save_checkpoint(cfg.image.teacher, *init, nullptr, {{"config", init->config()}});
  cfg.image.distill = "soft";
  cfg.image.alpha = 1.0;
  const train::TrainResult self = train::train(cfg);
  ASSERT_EQ(self.step_losses.size(), 2u);
  EXPECT_NEAR(self.step_losses[0], 0.0, 1e-5);
  EXPECT_EQ(io::read_checkpoint_metadata(self.checkpoint).at("train_state").at("distill").at("type"), "soft");

  train::TrainConfig plain = tiny_deit(dir + "/plain");
  plain.model = cfg.model;
  plain.model_config = cfg.model_config;
  plain.max_steps = 2;
  const train::TrainResult p = train::train(plain);
  ASSERT_EQ(p.step_losses.size(), 2u);
  cfg.image.alpha = 0.5;   // (1 - alpha) CE + alpha * 0 at the first step
  cfg.out = dir + "/alpha05";
  EXPECT_NEAR(train::train(cfg).step_losses.at(0), 0.5 * p.step_losses[0], 1e-5);
  cfg.image.alpha = 0.0;
  cfg.out = dir + "/alpha0";
  EXPECT_EQ(train::train(cfg).step_losses, p.step_losses);
  std::filesystem::remove_all(dir);
}

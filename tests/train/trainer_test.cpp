// The Trainer on its own: a new task and a new model kind plug in from outside the library (a toy
// regression registered here) and get exact resume, the log, the curve and the metrics without any
// change to the Trainer; gradient accumulation equals the large batch; the gradient hook and the
// step callbacks run where data-parallel training and monitoring need them; the registry names
// every model's task; unsupported precisions are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "attn/attn.h"
#include "attn/io/checkpoint.h"
#include "attn/nn/linear.h"
#include "attn/ops/loss.h"
#include "attn/viz/plot.h"
#include "attn/train/trainer.h"
#include "errors.h"
#include "train_checks.h"

using namespace attn;
using test::error_of;

namespace {

// ---- a model kind and a task the library does not know: y = x . w + noise ----

class ToyLinear : public models::Model {
 public:
  explicit ToyLinear(const nlohmann::json& cfg) : cfg_(cfg) {
    lin = register_module("lin", std::make_shared<nn::Linear>(cfg.at("in").get<int64_t>(), 1));
  }
  nlohmann::json config() const override { return cfg_; }
  Tensor forward(const Tensor& x) const { return lin->forward(x); }
  std::shared_ptr<nn::Linear> lin;

 private:
  nlohmann::json cfg_;
};

class ToyRegression : public train::Task {
 public:
  explicit ToyRegression(const train::TrainConfig& cfg) : cfg_(cfg) {}
  train::OptimDefaults defaults() const override {
    train::OptimDefaults d;
    d.lr = 0.3;
    d.weight_decay = 0.0;
    d.warmup_epochs = 0.0;
    d.epochs = 3;
    d.out = "runs/toy";
    return d;
  }
  void setup(const nlohmann::json* resume) override {
    const nlohmann::json cfg = resume ? resume->at("config") : nlohmann::json(cfg_.model_config);
    model_ = std::dynamic_pointer_cast<ToyLinear>(models::create(resume ? cfg.at("model").get<std::string>() : cfg_.model, cfg));
    Generator g(cfg_.seed + 100);
    x_ = randn({kBatches * kBatch, 4}, g);
    Tensor w = Tensor::from_vector<float>({0.5f, -1.0f, 2.0f, 0.25f}, {4, 1});
    y_ = add(matmul(x_, w), mul(randn({kBatches * kBatch, 1}, g), 0.1));
  }
  std::shared_ptr<models::Model> model() const override { return model_; }
  int64_t batches_per_epoch() const override { return kBatches; }
  void seek(int64_t micro, const nlohmann::json&) override { next_ = micro; }
  nlohmann::json position() const override { return {{"next_batch", next_}}; }
  train::StepOutput step(int64_t micro) override {
    EXPECT_EQ(micro, next_);
    const int64_t b = next_++ % kBatches;
    train::StepOutput out;
    // Dropout-like randomness from the global generator: resume must restore it.
    Tensor noise = mul(Tensor::randn({kBatch, 1}), 1e-3);
    Tensor pred = add(model_->forward(x_.narrow(0, b * kBatch, kBatch)), noise);
    out.loss = mse_loss(pred, y_.narrow(0, b * kBatch, kBatch));
    out.items = kBatch;
    out.sums = {double(kBatch)};
    return out;
  }
  nlohmann::json evaluate() override {
    NoGradGuard ng;
    return {{"val_mse", mse_loss(model_->forward(x_), y_).item()}};
  }
  nlohmann::json window_record(const train::Window& w) const override {
    return {{"train_loss", w.loss / double(w.steps)}, {"seen", w.sums.empty() ? 0.0 : w.sums[0]}};
  }
  std::vector<std::pair<std::string, double>> progress_fields(const train::Window& w, double) const override {
    return {{"loss", w.loss / double(std::max<int64_t>(w.steps, 1))}};
  }
  std::string unit() const override { return "ex"; }
  std::string summary(const nlohmann::json& r) const override { return "toy " + r.dump(); }
  std::string plot_x() const override { return "step"; }
  std::vector<viz::Series> plot_series(const nlohmann::json& history) const override {
    viz::Series s{"val mse", {}, {}};
    for (const auto& h : history) {
      s.x.push_back(h.at("step").get<double>());
      s.y.push_back(h.at("val_mse").get<double>());
    }
    return {s};
  }
  std::vector<Setting> settings() const override { return {{"--seed", cfg_.seed, true}}; }
  nlohmann::json finish(const train::TrainResult&, const nlohmann::json& history,
                        const std::shared_ptr<models::Model>&) override {
    return {{"final_val_mse", history.back().at("val_mse")}};
  }

  static constexpr int64_t kBatches = 8, kBatch = 16;

 private:
  train::TrainConfig cfg_;
  std::shared_ptr<ToyLinear> model_;
  Tensor x_, y_;
  int64_t next_ = 0;
};

void register_toy() {
  static bool done = false;
  if (done) return;
  done = true;
  models::register_model({"toy_linear", "4 -> 1 linear regression", {{"in", 4}},
                          [](const nlohmann::json& c) { return std::make_shared<ToyLinear>(c); }, "toy-regression"});
  train::register_task("toy-regression", [](const train::TrainConfig& c) { return std::make_unique<ToyRegression>(c); });
}

train::TrainConfig toy_config(const std::string& out) {
  register_toy();
  train::TrainConfig cfg;
  cfg.model = "toy_linear";
  cfg.out = out;
  cfg.progress = false;
  cfg.quiet = true;
  cfg.seed = 3;
  return cfg;
}

std::string tmp_dir(const std::string& name) { return test::fresh_tmp_dir("attn_trainer_test", name); }

}  // namespace

TEST(Trainer, ANewTaskTrainsAndResumesBitForBitWithoutTouchingTheTrainer) {
  const std::string dir = tmp_dir("toy");
  train::TrainResult ref = train::train(toy_config(dir + "/full"));
  ASSERT_TRUE(ref.finished);
  EXPECT_EQ(ref.steps, 3 * ToyRegression::kBatches);   // the task's default epochs
  EXPECT_LT(ref.step_losses.back(), 0.2 * ref.step_losses.front());
  EXPECT_FALSE(std::isnan(ref.metric("final_val_mse")));
  EXPECT_EQ(ref.metrics.at("model").at("model"), "toy_linear");
  EXPECT_EQ(ref.metrics.at("isa"), isa_name(active_isa()));
  // One log record per epoch, with the window's sums and the task's evaluation.
  std::ifstream log(ref.log);
  std::string line;
  int records = 0;
  while (std::getline(log, line)) {
    const auto rec = nlohmann::json::parse(line);
    EXPECT_EQ(rec.at("seen").get<double>(), double(ToyRegression::kBatches * ToyRegression::kBatch));
    EXPECT_TRUE(rec.contains("val_mse") && rec.contains("lr") && rec.contains("epoch_float"));
    ++records;
  }
  EXPECT_EQ(records, 3);
  EXPECT_TRUE(std::filesystem::exists(ref.plot));

  for (int64_t k : {int64_t(5), int64_t(8), int64_t(13)}) {   // mid-epoch, at an epoch's end, mid-epoch
    train::TrainConfig cfg = toy_config(dir + "/kill" + std::to_string(k));
    cfg.checkpoint_every = 1;
    cfg.stop_after = k;
    train::TrainResult a = train::train(cfg);
    EXPECT_FALSE(a.finished);
    ASSERT_EQ(a.steps, k);
    cfg.stop_after = 0;
    cfg.resume = true;
    cfg.model = "";   // a resumed run takes its model from the checkpoint
    train::TrainResult b = train::train(cfg);
    EXPECT_TRUE(test::same_bits(test::concat(a.step_losses, b.step_losses), ref.step_losses)) << "killed after " << k;
    EXPECT_TRUE(test::same_checkpoint(b.checkpoint, ref.checkpoint)) << "killed after " << k;
    std::ifstream l1(ref.log), l2(b.log);
    std::string r1, r2;
    while (std::getline(l1, r1) && std::getline(l2, r2)) {
      auto j1 = nlohmann::json::parse(r1), j2 = nlohmann::json::parse(r2);
      EXPECT_EQ(j1.at("train_loss"), j2.at("train_loss")) << "the resumed window reports what the whole one did";
      EXPECT_EQ(j1.at("seen"), j2.at("seen"));
    }
  }
  // A data-order setting that differs is refused.
  train::TrainConfig other = toy_config(dir + "/kill5");
  other.resume = true;
  other.seed = 4;
  EXPECT_NE(error_of([&] { train::train(other); }).find("was trained with --seed 3"), std::string::npos);
  std::filesystem::remove_all(dir);
}

// --precision bf16: the GEMMs under bf16 autocast where the CPU has a native bf16 matmul (trains, close to
// f32 but not equal to it, resumes bit for bit), refused with the reason where it has none.
TEST(Trainer, Bf16MixedPrecisionTrainsAndResumesExactlyOrIsRefused) {
  const std::string dir = tmp_dir("bf16");
  train::TrainConfig cfg = toy_config(dir + "/full");
  cfg.precision = train::Precision::bf16;
  if (!bf16_gemm_native_available()) {
    EXPECT_NE(error_of([&] { train::train(cfg); }).find("--precision bf16 needs a CPU with a native bf16 matmul"),
              std::string::npos);
    std::filesystem::remove_all(dir);
    return;
  }
  const train::TrainResult f32 = train::train(toy_config(dir + "/f32"));
  const train::TrainResult ref = train::train(cfg);
  ASSERT_TRUE(ref.finished);
  EXPECT_EQ(ref.metrics.at("precision"), "bf16");
  ASSERT_EQ(ref.step_losses.size(), f32.step_losses.size());
  EXPECT_LT(ref.step_losses.back(), 0.2 * ref.step_losses.front());
  EXPECT_FALSE(test::same_bits(ref.step_losses, f32.step_losses)) << "bf16 rounding leaves no trace";
  EXPECT_NEAR(ref.metric("final_val_mse"), f32.metric("final_val_mse"), 0.05 * f32.metric("final_val_mse") + 1e-3);

  cfg.out = dir + "/kill";
  cfg.checkpoint_every = 1;
  cfg.stop_after = 5;
  const train::TrainResult a = train::train(cfg);
  ASSERT_EQ(a.steps, 5);
  cfg.stop_after = 0;
  cfg.resume = true;
  cfg.model = "";
  const train::TrainResult b = train::train(cfg);
  EXPECT_TRUE(test::same_bits(test::concat(a.step_losses, b.step_losses), ref.step_losses));
  EXPECT_TRUE(test::same_checkpoint(b.checkpoint, ref.checkpoint));
  std::filesystem::remove_all(dir);
}

TEST(Trainer, GradientAccumulationEqualsTheLargeBatch) {
  const std::string dir = tmp_dir("accum");
  train::TrainConfig big;
  big.model = "mlp";
  big.model_config = {{"hidden", {32}}};
  big.epochs = 1;
  big.image.batch = 64;
  big.limit_train = 512;   // 8 steps of 64
  big.image.limit_eval = 100;
  big.warmup_epochs = 0;
  big.progress = false;
  big.quiet = true;
  big.out = dir + "/big";
  train::TrainConfig small = big;
  small.image.batch = 32;
  small.grad_accum = 2;
  small.out = dir + "/small";
  train::TrainResult a = train::train(big), b = train::train(small);
  ASSERT_EQ(a.steps, 8);
  ASSERT_EQ(b.steps, 8);
  for (size_t i = 0; i < a.step_losses.size(); ++i)
    EXPECT_NEAR(b.step_losses[i], a.step_losses[i], 1e-5 * std::abs(a.step_losses[i])) << "step " << i + 1;
  auto wa = io::load_safetensors(a.checkpoint), wb = io::load_safetensors(b.checkpoint);
  for (size_t i = 0; i < wa.tensors.size(); ++i) {
    if (wa.tensors[i].first.rfind("optim.", 0) == 0) continue;
    const auto x = wa.tensors[i].second.to_vector<float>(), y = wb.tensors[i].second.to_vector<float>();
    ASSERT_EQ(x.size(), y.size());
    for (size_t j = 0; j < x.size(); ++j) ASSERT_NEAR(x[j], y[j], 1e-4) << wa.tensors[i].first << "[" << j << "]";
  }
  // Without accumulation the half batch trains differently: the check above can fail.
  train::TrainConfig half = small;
  half.grad_accum = 1;
  half.out = dir + "/half";
  half.max_steps = 8;
  EXPECT_GT(std::abs(train::train(half).step_losses[1] - a.step_losses[1]), 1e-4);
  std::filesystem::remove_all(dir);
}

TEST(Trainer, GradientHookAndStepCallbacksRunInOrder) {
  const std::string dir = tmp_dir("hooks");
  train::TrainConfig cfg = toy_config(dir);
  cfg.epochs = 1;
  train::Trainer t(cfg);
  int hooks = 0;
  std::vector<int64_t> steps;
  std::vector<double> losses;
  t.on_gradients([&](nn::Module& m) {
    ++hooks;
    for (const Tensor& p : m.parameters()) ASSERT_TRUE(p.grad().defined()) << "the hook runs after backward";
    EXPECT_EQ(int64_t(steps.size()), hooks - 1) << "and before the step's callback";
  });
  t.on_step([&](const train::StepInfo& s) {
    steps.push_back(s.step);
    losses.push_back(s.loss);
    EXPECT_EQ(s.total, ToyRegression::kBatches);
    EXPECT_EQ(s.items, ToyRegression::kBatch);
  });
  train::TrainResult r = t.run();
  EXPECT_EQ(hooks, ToyRegression::kBatches);
  ASSERT_EQ(int64_t(steps.size()), ToyRegression::kBatches);
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i], int64_t(i) + 1);
  EXPECT_TRUE(test::same_bits(losses, r.step_losses));
  // A hook that zeroes the gradients freezes the weights (no weight decay here): it runs before the update.
  train::Trainer frozen([&] {
    train::TrainConfig c = cfg;
    c.out = dir + "/frozen";
    return c;
  }());
  frozen.on_gradients([](nn::Module& m) {
    for (const Tensor& p : m.parameters()) p.grad().zero_();
  });
  train::TrainResult f = frozen.run();
  manual_seed(cfg.seed);   // the weights the run started from
  auto fresh = models::create("toy_linear", {{"in", 4}});
  auto saved = io::load_safetensors(f.checkpoint);
  for (const auto& [name, p] : fresh->named_parameters()) {
    bool found = false;
    for (const auto& [n, t] : saved.tensors)
      if (n == name) {
        found = true;
        EXPECT_EQ(t.to_vector<float>(), p.to_vector<float>()) << name << " changed although its gradient was zeroed";
      }
    EXPECT_TRUE(found) << name;
  }
  std::filesystem::remove_all(dir);
}

TEST(Trainer, RegistryNamesEachModelsTaskAndRefusesWhatItCannotTrain) {
  EXPECT_EQ(models::model_names(models::kTranslation), (std::vector<std::string>{"rnn-attention", "transformer"}));
  EXPECT_EQ(models::model_entry("vit_base_patch16_224").task, models::kImageClassification);
  EXPECT_EQ(models::model_entry("transformer").task, models::kTranslation);
  const auto all = models::model_names();
  EXPECT_NE(std::find(all.begin(), all.end(), "transformer"), all.end());
  EXPECT_NE(std::find(all.begin(), all.end(), "mlp"), all.end());
  // Any model by name, with its own config rules (the Transformer's "layers" alias).
  auto t = models::create("transformer", {{"vocab_size", 12}, {"d_model", 16}, {"nhead", 2}, {"layers", 1},
                                          {"d_ff", 32}});
  EXPECT_EQ(t->config().at("encoder_layers"), 1);
  EXPECT_NE(error_of([] { models::create_model("transformer"); }).find("is a translation model, not an image classifier"),
            std::string::npos);
  EXPECT_NE(error_of([] { models::create_seq2seq("mlp"); }).find("unknown translation model 'mlp'"), std::string::npos);
  EXPECT_NE(error_of([] { models::create("nope"); }).find("unknown model 'nope'"), std::string::npos);
  const auto kinds = train::task_kinds();
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), models::kImageClassification), kinds.end());
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), models::kTranslation), kinds.end());

  train::TrainConfig cfg = toy_config(tmp_dir("refuse"));
  cfg.grad_accum = 0;
  EXPECT_NE(error_of([&] { train::train(cfg); }).find("expected --grad-accum >= 1, got 0"), std::string::npos);
  EXPECT_NE(error_of([] { train::parse_precision("fp8"); }).find("expected precision f32 or bf16, got 'fp8'"),
            std::string::npos);
  std::filesystem::remove_all(*cfg.out);
}

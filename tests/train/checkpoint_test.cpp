// Checkpoints: model + optimizer + metadata round trip (resumed training == uninterrupted training,
// bit for bit), the EMA weights in the same file (skipped by every model loader), and the errors
// for foreign, mismatched and truncated files.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "attn/attn.h"
#include "attn/io/checkpoint.h"
#include "attn/nn/layer_norm.h"
#include "attn/nn/mlp.h"
#include "attn/optim/adam.h"
#include "attn/optim/clip.h"
#include "attn/optim/schedule.h"
#include "attn/optim/sgd.h"
#include "errors.h"
#include "files.h"
#include "attn/train/checkpoint.h"
#include "torch_ref.h"

using namespace attn;
using test::write_bytes;
using test::error_of;
using nlohmann::json;

namespace {

struct Net : nn::Module {
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::MLP> mlp;
  Tensor& pos_embed;
  Net(int64_t c, Generator& g, Generator* drop_gen)
      : pos_embed(register_parameter("pos_embed", Tensor::zeros({1, c}))) {
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(c));
    mlp = register_module("mlp", std::make_shared<nn::MLP>(
                                     nn::MLPOptions{.in_features = c, .hidden_features = 2 * c, .out_features = 3,
                                                    .drop = 0.2},
                                     g, drop_gen));
    register_buffer("num_batches", Tensor::zeros({}, DType::i64));
  }
  Tensor forward(const Tensor& x) { return mlp->forward(norm->forward(x + pos_embed)); }
};

std::string tmp_path(const std::string& name) {
  return "/tmp/attn_ckpt_test_" + std::to_string(::getpid()) + "_" + name;
}

// One training step on a batch drawn from `data` (dropout draws from `drop`).
void train_step(Net& net, optim::Optimizer& opt, const optim::Schedule& sched, int64_t step, Generator& data) {
  Tensor x = randn({8, 6}, data), y = randn({8, 3}, data);
  sched.apply(opt, step);
  opt.zero_grad();
  Tensor d = net.forward(x) - y;
  mean(d * d).backward();
  optim::clip_grad_norm_(net.parameters(), 1.0);
  opt.step();
}


}  // namespace

TEST(Checkpoint, ResumedTrainingEqualsUninterruptedBitForBit) {
  const int64_t total = 12, save_at = 5;
  const optim::WarmupCosine sched({.base_lr = 1e-2, .total_steps = total, .warmup_steps = 3});
  auto make = [](Generator& init, Generator* drop) {
    auto net = std::make_shared<Net>(6, init, drop);
    auto opt = std::make_shared<optim::AdamW>(optim::param_groups_weight_decay(*net, 0.05),
                                              optim::AdamWOptions{.lr = 1e-2, .weight_decay = 0.05});
    return std::make_pair(net, opt);
  };
  // Uninterrupted.
  Generator init_a(1), drop_a(2), data_a(3);
  auto [net_a, opt_a] = make(init_a, &drop_a);
  for (int64_t s = 0; s < total; ++s) train_step(*net_a, *opt_a, sched, s, data_a);

  // Interrupted at save_at: checkpoint, then a fresh process-like state resumes from it.
  const std::string path = tmp_path("resume.safetensors");
  {
    Generator init_b(1), drop_b(2), data_b(3);
    auto [net_b, opt_b] = make(init_b, &drop_b);
    for (int64_t s = 0; s < save_at; ++s) train_step(*net_b, *opt_b, sched, s, data_b);
    json ts = {{"step", save_at}, {"epoch", 0}, {"drop_seed", drop_b.seed()}, {"drop_offset", drop_b.offset()},
               {"data_seed", data_b.seed()}, {"data_offset", data_b.offset()}};
    train::save_checkpoint(path, *net_b, opt_b.get(), {{"config", {{"dim", 6}, {"name", "net"}}}, {"train_state", ts}});
  }
  Generator init_c(99), drop_c(0), data_c(0);   // different init: everything must come from the file
  auto [net_c, opt_c] = make(init_c, &drop_c);
  json meta = train::load_checkpoint(path, *net_c, opt_c.get());
  EXPECT_EQ(meta["format"], "attn-checkpoint-v1");
  EXPECT_EQ(meta["optimizer"], "AdamW");
  EXPECT_EQ(meta["config"]["dim"], 6);
  EXPECT_EQ(meta["config"]["name"], "net");
  const json& ts = meta["train_state"];
  drop_c.set_state(ts["drop_seed"], ts["drop_offset"]);
  data_c.set_state(ts["data_seed"], ts["data_offset"]);
  for (int64_t s = ts["step"].get<int64_t>(); s < total; ++s) train_step(*net_c, *opt_c, sched, s, data_c);

  auto sa = net_a->state_dict(), sc = net_c->state_dict();
  ASSERT_EQ(sa.size(), sc.size());
  for (size_t i = 0; i < sa.size(); ++i) EXPECT_TENSOR_NEAR(sc[i].second, sa[i].second, 0, 0) << sa[i].first;
  auto oa = opt_a->state_dict(), oc = opt_c->state_dict();
  ASSERT_EQ(oa.size(), oc.size());
  for (size_t i = 0; i < oa.size(); ++i) {
    EXPECT_EQ(oa[i].first, oc[i].first);
    EXPECT_TENSOR_NEAR(oc[i].second, oa[i].second, 0, 0) << oa[i].first;
  }
  // The file: model keys under their names, optimizer keys under "optim.", metadata as specified.
  auto file = io::load_safetensors(path);
  EXPECT_NE(file.find("mlp.fc1.weight"), nullptr);
  EXPECT_NE(file.find("optim.state.0.exp_avg"), nullptr);
  EXPECT_NE(file.find("optim.param_groups.1.weight_decay"), nullptr);
  EXPECT_EQ(file.metadata.at("format"), "attn-checkpoint-v1");
  EXPECT_EQ(json::parse(file.metadata.at("config")), meta["config"]);
  EXPECT_EQ(json::parse(file.metadata.at("train_state"))["step"], save_at);
  EXPECT_EQ(io::read_checkpoint_metadata(path), meta);
  std::remove(path.c_str());
}

TEST(Checkpoint, ModelOnlyAndOptimizerMismatches) {
  Generator g(4);
  Net net(6, g, nullptr);
  const std::string path = tmp_path("model_only.safetensors");
  train::save_checkpoint(path, net, nullptr);
  json meta = train::load_checkpoint(path, net, nullptr);
  EXPECT_EQ(meta["config"], json::object());
  EXPECT_EQ(meta["train_state"], json::object());
  optim::AdamW opt(net.parameters());
  EXPECT_EQ(error_of([&] { train::load_checkpoint(path, net, &opt); }),
            "load_checkpoint: '" + path + "' has no optimizer state (saved without an optimizer)");
  optim::SGD sgd(net.parameters(), {.lr = 0.1, .momentum = 0.9});
  train::save_checkpoint(path, net, &sgd);
  EXPECT_EQ(error_of([&] { train::load_checkpoint(path, net, &opt); }),
            "load_checkpoint: '" + path + "' holds SGD state, but the optimizer is AdamW");
  EXPECT_EQ(error_of([&] { train::save_checkpoint(path, net, nullptr, {{"format", "mine"}}); }),
            "save_checkpoint: metadata key 'format' is reserved");
  std::remove(path.c_str());
}

TEST(Checkpoint, ForeignAndOtherModelFiles) {
  Generator g(5);
  Net net(6, g, nullptr);
  const std::string path = tmp_path("foreign.safetensors");
  io::save_safetensors(path, net.state_dict());   // a plain safetensors file: no format
  EXPECT_EQ(error_of([&] { train::load_checkpoint(path, net, nullptr); }),
            "load_checkpoint: '" + path + "' is not an attn checkpoint (its metadata has no \"format\")");
  io::save_safetensors(path, net.state_dict(), {{"format", "pt"}});
  EXPECT_EQ(error_of([&] { train::load_checkpoint(path, net, nullptr); }),
            "load_checkpoint: '" + path +
            "' is not an attn checkpoint (format \"pt\", expected \"attn-checkpoint-v1\")");
  // A checkpoint of a wider model: every parameter is mis-shaped; the first five are named.
  Generator g2(6);
  Net wide(8, g2, nullptr);
  train::save_checkpoint(path, wide, nullptr);
  const Tensor before = net.mlp->fc1->weight.clone();
  EXPECT_EQ(error_of([&] { train::load_checkpoint(path, net, nullptr); }),
            "load_checkpoint: '" + path + "' is for another model: the state dict does not match the model\n"
            "  mis-shaped keys (6): pos_embed (model [1, 6], state dict [1, 8]), norm.weight (model [6], state dict "
            "[8]), norm.bias (model [6], state dict [8]), mlp.fc1.weight (model [12, 6], state dict [16, 8]), "
            "mlp.fc1.bias (model [12], state dict [16]), ... (1 more)");
  EXPECT_TENSOR_NEAR(net.mlp->fc1->weight, before, 0, 0);   // unchanged
  std::remove(path.c_str());
}

TEST(Checkpoint, TruncatedFileGivesAClearError) {
  Generator g(7);
  Net net(6, g, nullptr);
  optim::AdamW opt(net.parameters());
  const std::string path = tmp_path("truncated.safetensors");
  train::save_checkpoint(path, net, &opt, {{"train_state", {{"step", 3}}}});
  const std::string bytes = test::slurp(path);
  write_bytes(path, bytes.substr(0, bytes.size() - 100));
  const Tensor before = net.mlp->fc2->weight.clone();
  const auto load_error = [&] { return error_of([&] { train::load_checkpoint(path, net, &opt); }); };
  const std::string truncated = load_error();
  EXPECT_EQ(truncated.rfind("load_checkpoint: cannot read '" + path + "': ", 0), 0u) << truncated;
  EXPECT_NE(truncated.find("lie outside the data block of"), std::string::npos) << truncated;
  write_bytes(path, bytes.substr(0, 5));
  const std::string header_cut = load_error();
  EXPECT_NE(header_cut.find("too short for the 8-byte header length"), std::string::npos) << header_cut;
  EXPECT_TENSOR_NEAR(net.mlp->fc2->weight, before, 0, 0);
  std::remove(path.c_str());
  const std::string missing = load_error();
  EXPECT_EQ(missing.rfind("load_checkpoint: cannot read '" + path + "': safetensors: cannot open", 0), 0u) << missing;
}

// The EMA weights travel in the checkpoint itself ("ema."): one file, one rename. Every reader of the
// model's weights skips them (and the optimizer state); asked for, they load instead.
TEST(Checkpoint, EmaWeightsTravelInTheOneFileAndModelLoadersSkipThem) {
  manual_seed(11);
  auto model = models::create_model("mlp", json::object());
  auto ema = models::create_model("mlp", json::object());   // other weights than model's
  optim::AdamW opt(model->parameters());
  const std::string path = tmp_path("ema.safetensors");
  train::save_checkpoint(path, *model, &opt, {{"config", model->config()}, {"train_state", {{"step", 3}}}}, ema.get());
  const auto same = [](const nn::Module& a, const nn::Module& b) {
    const io::TensorList x = a.state_dict(), y = b.state_dict();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i].first != y[i].first || !test::near(x[i].second, y[i].second, 0, 0)) return false;
    return true;
  };
  ASSERT_FALSE(same(*model, *ema));

  io::CheckpointFile f = io::read_checkpoint(path);
  EXPECT_EQ(f.model.size(), model->state_dict().size());
  ASSERT_EQ(f.ema.size(), ema->state_dict().size());
  EXPECT_EQ(f.ema[0].first, ema->state_dict()[0].first);   // "ema." dropped
  ASSERT_TRUE(f.optimizer.has_value());
  EXPECT_TRUE(io::checkpoint_has_ema(io::open_checkpoint(path)));
  EXPECT_EQ(io::checkpoint_weight_key("ema.fc.weight", io::CheckpointWeights::ema), "fc.weight");
  EXPECT_EQ(io::checkpoint_weight_key("ema.fc.weight", io::CheckpointWeights::model), std::nullopt);
  EXPECT_EQ(io::checkpoint_weight_key("fc.weight", io::CheckpointWeights::model), "fc.weight");
  EXPECT_EQ(io::checkpoint_weight_key("optim.state.0.exp_avg", io::CheckpointWeights::model), std::nullopt);

  // The model alone, through every loader: train::load_checkpoint, load_classifier_checkpoint,
  // load_pretrained.
  manual_seed(12);
  auto into = models::create_model("mlp", json::object());
  EXPECT_EQ(train::load_checkpoint(path, *into, nullptr).at("train_state").at("step"), 3);
  EXPECT_TRUE(same(*into, *model));
  EXPECT_TRUE(same(*models::load_classifier_checkpoint(path), *model));
  models::PretrainedSource src = models::PretrainedSource::checkpoint(path);
  src.pack_linear_weights = false;   // to compare the weights
  EXPECT_TRUE(same(*models::load_pretrained(src).model, *model));
  // The EMA weights, asked for.
  optim::AdamW opt2(into->parameters());
  auto ema_into = models::create_model("mlp", json::object());
  train::load_checkpoint(path, *into, &opt2, ema_into.get());
  EXPECT_TRUE(same(*ema_into, *ema));
  EXPECT_TRUE(same(*models::load_classifier_checkpoint(path, DType::f32, io::CheckpointWeights::ema), *ema));
  src.weights = io::CheckpointWeights::ema;
  EXPECT_TRUE(same(*models::load_pretrained(src).model, *ema));

  // A checkpoint without an EMA: asking for one is an error, before anything changes.
  train::save_checkpoint(path, *model, nullptr, {{"config", model->config()}});
  EXPECT_FALSE(io::checkpoint_has_ema(io::open_checkpoint(path)));
  EXPECT_EQ(error_of([&] { train::load_checkpoint(path, *into, nullptr, ema_into.get()); }),
            "load_checkpoint: '" + path + "' has no EMA weights (saved without an EMA)");
  EXPECT_EQ(error_of([&] { models::load_classifier_checkpoint(path, DType::f32, io::CheckpointWeights::ema); }),
            "load: checkpoint '" + path + "' has no EMA weights (its run was trained without --ema-decay)");
  // An EMA of another model: named, nothing loaded.
  auto wide = models::create_model("mlp", {{"hidden", {32}}});
  train::save_checkpoint(path, *model, nullptr, {{"config", model->config()}}, wide.get());
  const std::string mismatch = error_of([&] { train::load_checkpoint(path, *into, nullptr, ema_into.get()); });
  EXPECT_EQ(mismatch.rfind("load_checkpoint: '" + path + "': the EMA weights do not match: ", 0), 0u) << mismatch;
  EXPECT_TRUE(same(*ema_into, *ema));
  // "ema." is reserved for the EMA's keys.
  EXPECT_EQ(error_of([&] { io::write_checkpoint(path, {{"ema.w", Tensor::zeros({1})}}, std::nullopt); }),
            "save_checkpoint: model key 'ema.w' starts with the reserved prefix 'ema.'");
  std::remove(path.c_str());
}

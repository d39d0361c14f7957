// models::load_pretrained: an attn training checkpoint, foreign (timm-layout) weights, and the
// checkpoint `attn convert` makes of them each give the model (its logits bit for bit), the eval
// preprocessing and the class names the inference commands use; checkpoint_inputs; the errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "attn/attn.h"
#include "attn/autograd/grad_mode.h"
#include "attn/data/fashion_mnist.h"
#include "attn/data/image.h"
#include "attn/data/preprocess.h"
#include "attn/io/checkpoint.h"
#include "attn/models/pretrained.h"
#include "attn/nn/linear.h"
#include "attn/train/checkpoint.h"
#include "attn/viz/explain.h"
#include "train_checks.h"

using namespace attn;
using nlohmann::json;

namespace {

const json kForeign = {{"image_size", 32}, {"patch_size", 8}, {"in_channels", 3}, {"num_classes", 10},
                       {"dim", 32},        {"depth", 2},      {"heads", 2},       {"mlp_ratio", 2.0}};

std::shared_ptr<models::ImageClassifier> random_model(const std::string& name, const json& cfg) {
  manual_seed(21);
  auto m = models::create_model(name, cfg);
  NoGradGuard ng;
  for (auto& [k, t] : m->state_dict()) t.copy_(Tensor::randn(t.shape()) * 0.1 + (k.ends_with("weight") ? 1.0 : 0.0));
  m->eval();
  return m;
}

std::vector<float> logits(models::ImageClassifier& m, const Shape& input) {
  manual_seed(3);
  const Tensor x = Tensor::randn(input);
  NoGradGuard ng;
  m.eval();
  return m.forward(x).to_vector<float>();
}

void expect_same_preprocess(const data::Preprocess& a, const data::Preprocess& b) {
  EXPECT_EQ(a.describe(), b.describe());
  EXPECT_EQ(a.resize_size, b.resize_size);
  EXPECT_EQ(a.crop_size, b.crop_size);
  EXPECT_EQ(a.squash, b.squash);
  EXPECT_EQ(a.interpolation, b.interpolation);
  EXPECT_EQ(a.mean, b.mean);
  EXPECT_EQ(a.std, b.std);
  EXPECT_EQ(a.channels, b.channels);
}

std::string error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(Pretrained, CheckpointInputs) {
  const std::string dir = test::fresh_tmp_dir("attn_pretrained_test", "inputs");
  manual_seed(6);
  auto m = models::create_model("vit_fmnist", {{"dim", 24}, {"depth", 1}, {"heads", 2}, {"patch_size", 7}});
  const std::string ckpt = dir + "/vit.safetensors";
  train::save_checkpoint(ckpt, *m, nullptr,
                         {{"config", m->config()},
                          {"train_state", {{"data", "fashion-mnist"}, {"mean", {0.25}}, {"std", {0.5}}}}});
  models::CheckpointInputs in = models::checkpoint_inputs(ckpt);
  EXPECT_EQ(in.image_size, 28);
  EXPECT_EQ(in.channels, 1);
  EXPECT_EQ(in.num_classes, 10);
  EXPECT_EQ(in.mean, std::vector<float>{0.25f});
  EXPECT_EQ(in.std, std::vector<float>{0.5f});
  EXPECT_EQ(in.class_names, data::FashionMnist::class_names());
  // Without train_state: the dataset's constants are unknown -> 0.5 / 0.5, numbered classes.
  train::save_checkpoint(ckpt, *m, nullptr, {{"config", m->config()}});
  in = models::checkpoint_inputs(ckpt);
  EXPECT_EQ(in.mean, std::vector<float>{0.5f});
  EXPECT_EQ(in.class_names[3], "class 3");
  std::filesystem::remove_all(dir);
}

// attn's own checkpoint: the model from its config, attn's training transform (squash to the model's
// size, PIL bilinear, the checkpoint's mean / std), the training data's class names.
TEST(Pretrained, AttnTrainingCheckpoint) {
  const std::string dir = test::fresh_tmp_dir("attn_pretrained_test", "attn");
  const json cfg = {{"dim", 24}, {"depth", 1}, {"heads", 2}, {"patch_size", 7}};
  auto src = random_model("vit_fmnist", cfg);
  const std::string ckpt = dir + "/ckpt.safetensors";
  train::save_checkpoint(ckpt, *src, nullptr,
                         {{"config", src->config()},
                          {"train_state", {{"data", "fashion-mnist"}, {"mean", {0.25}}, {"std", {0.5}}}}});
  models::PretrainedSource s = models::PretrainedSource::checkpoint(ckpt);
  s.pack_linear_weights = false;
  const models::Pretrained p = models::load_pretrained(s);
  EXPECT_FALSE(p.model->is_training());
  EXPECT_EQ(logits(*p.model, {2, 1, 28, 28}), logits(*src, {2, 1, 28, 28}));
  EXPECT_EQ(p.model_name, "vit_fmnist");
  EXPECT_EQ(p.source, "attn");
  EXPECT_EQ(p.data, "fashion-mnist");
  EXPECT_EQ(p.labels, data::FashionMnist::class_names());
  EXPECT_EQ(p.metadata, io::read_checkpoint_metadata(ckpt));
  data::Preprocess want;
  want.resize_size = want.crop_size = 28;
  want.squash = true;
  want.interpolation = data::Resample::bilinear;
  want.mean = {0.25f};
  want.std = {0.5f};
  want.channels = 1;
  expect_same_preprocess(p.preprocess, want);
  // That transform is attn's training one: a 40 x 30 image squashed to 28 x 28, as viz::prepare_image does.
  Generator g(4);
  Tensor px = Tensor::empty({30, 40, 3}, DType::u8);
  for (int64_t i = 0; i < px.numel(); ++i) px.data<uint8_t>()[i] = uint8_t(g.randint(256));
  const std::string img = dir + "/img.png";
  data::write_png(img, px);
  EXPECT_EQ(data::preprocess_file(img, p.preprocess).to_vector<float>(),
            viz::prepare_image(img, 28, 1, {0.25f}, {0.5f}).input.to_vector<float>());
  // Packed by default (the Linear weights are then inference-only), the same logits within rounding.
  const models::Pretrained packed = models::load_pretrained(models::PretrainedSource::checkpoint(ckpt));
  const std::vector<float> a = logits(*packed.model, {2, 1, 28, 28}), b = logits(*src, {2, 1, 28, 28});
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4) << i;
  std::filesystem::remove_all(dir);
}

// Foreign weights (timm's layout is attn's names): the registry model with the overrides, timm's eval
// transform, no class names for 10 classes; the checkpoint `attn convert` writes from the result loads
// back to the same model, preprocessing and (id2label) class names.
TEST(Pretrained, ForeignWeightsAndTheirConvertedCheckpoint) {
  const std::string dir = test::fresh_tmp_dir("attn_pretrained_test", "foreign");
  auto src = random_model("vit", kForeign);
  const std::string weights = dir + "/vit.safetensors";
  io::save_safetensors(weights, src->state_dict());
  models::PretrainedSource s = models::PretrainedSource::foreign(weights, "vit");
  s.model_config = kForeign;
  s.pack_linear_weights = false;
  const models::Pretrained p = models::load_pretrained(s);
  const Shape input{2, 3, 32, 32};
  EXPECT_EQ(logits(*p.model, input), logits(*src, input));
  EXPECT_EQ(p.source, "timm");
  EXPECT_EQ(p.model_name, "vit");
  EXPECT_TRUE(p.labels.empty());
  EXPECT_FALSE(p.pos_embed_resampled);
  expect_same_preprocess(p.preprocess, data::preset_for("vit", data::WeightSource::timm, 32));
  EXPECT_EQ(p.metadata, json({{"source_format", "timm"}, {"source", weights}}));

  // As attn convert: the metadata plus the model's config, with an id2label.
  json extra = p.metadata;
  extra["config"] = p.model->config();
  json id2label = json::object();
  for (int k = 0; k < 10; ++k) id2label[std::to_string(k)] = "thing " + std::to_string(k);
  extra["id2label"] = id2label;
  const std::string ckpt = dir + "/converted.safetensors";
  train::save_checkpoint(ckpt, *p.model, nullptr, extra);
  models::PretrainedSource cs = models::PretrainedSource::checkpoint(ckpt);
  cs.pack_linear_weights = false;
  const models::Pretrained c = models::load_pretrained(cs);
  EXPECT_EQ(logits(*c.model, input), logits(*src, input));
  EXPECT_EQ(c.source, "timm");
  EXPECT_EQ(c.model_name, "vit");
  EXPECT_EQ(c.data, "");
  expect_same_preprocess(c.preprocess, p.preprocess);
  ASSERT_EQ(c.labels.size(), 10u);
  EXPECT_EQ(c.labels[7], "thing 7");

  // detect (attn bench --weights): each file for what it is.
  models::PretrainedSource d = s;
  d.kind = models::WeightsKind::detect;
  EXPECT_EQ(models::load_pretrained(d).source, "timm");
  d.path = ckpt;
  EXPECT_EQ(models::load_pretrained(d).metadata, io::read_checkpoint_metadata(ckpt));
  EXPECT_TRUE(models::is_attn_checkpoint(ckpt));
  EXPECT_FALSE(models::is_attn_checkpoint(weights));

  // bf16 Linear weights, the preprocessing overrides.
  models::PretrainedSource o = s;
  o.linear_dtype = DType::bf16;
  o.preprocess.crop_pct = 0.5;
  o.preprocess.interpolation = "bilinear";
  const models::Pretrained q = models::load_pretrained(o);
  EXPECT_EQ(q.preprocess.resize_size, 64);
  EXPECT_EQ(q.preprocess.crop_size, 32);
  EXPECT_EQ(q.preprocess.interpolation, data::Resample::bilinear);
  int64_t bf16 = 0;
  for (const auto& [name, mod] : q.model->named_modules())
    if (auto* l = dynamic_cast<const nn::Linear*>(mod.get())) bf16 += l->weight.dtype() == DType::bf16;
  EXPECT_EQ(bf16, 2 * 4 + 1);   // qkv, proj, fc1, fc2 per block, and the head
  std::filesystem::remove_all(dir);
}

TEST(Pretrained, Errors) {
  const std::string dir = test::fresh_tmp_dir("attn_pretrained_test", "errors");
  auto src = random_model("vit", kForeign);
  const std::string weights = dir + "/vit.safetensors";
  io::save_safetensors(weights, src->state_dict());
  const std::string ckpt = dir + "/ckpt.safetensors";
  train::save_checkpoint(ckpt, *src, nullptr, {{"config", src->config()}});

  models::PretrainedSource s = models::PretrainedSource::checkpoint(ckpt);
  s.model = "vit";
  EXPECT_EQ(error_message([&] { models::load_pretrained(s); }),
            "load_pretrained: '" + ckpt + "' is an attn checkpoint, which describes its own model: model, format, "
            "hf_config, model_config, image_size and pos_embed_antialias are for foreign weights");
  EXPECT_EQ(error_message([&] { models::load_pretrained(models::PretrainedSource::foreign(weights, "")); }),
            "load_pretrained: the foreign weights '" + weights +
                "' need the registry name of their model (e.g. vit_base_patch16_224)");
  EXPECT_EQ(error_message([&] { models::load_pretrained(models::PretrainedSource::checkpoint(weights)); }),
            "load_checkpoint: '" + weights + "' is not an attn checkpoint (its metadata has no \"format\")");
  s = models::PretrainedSource::checkpoint(ckpt);
  s.preprocess.crop_size = 48;
  EXPECT_EQ(error_message([&] { models::load_pretrained(s); }),
            "load_pretrained: the crop (48) must equal the model's image size (32)");
  models::PretrainedSource f = models::PretrainedSource::foreign(weights, "vit");
  f.model_config = kForeign;
  f.model_config["dim"] = 48;
  EXPECT_NE(error_message([&] { models::load_pretrained(f); }).find("do not match model 'vit'"), std::string::npos);
  std::filesystem::remove_all(dir);
}

// Model configs, every family: a value of the wrong type, out of range, a bad list element, an enum
// outside its values, an unknown key, a missing key and a config that is not an object each give an
// attn::ConfigError naming the config, the key, what was expected and what was found (no JSON
// library exception). Also a Hugging Face config.json, and the configs and metadata an attn
// checkpoint carries, where the message names the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "attn/attn.h"
#include "attn/core/json_config.h"
#include "attn/models/name_maps.h"
#include "attn/models/pretrained.h"
#include "attn/train/checkpoint.h"
#include "errors.h"
#include "files.h"

using namespace attn;
using nlohmann::json;
using test::error_of;

namespace {

struct Case {
  std::string model;
  json overrides;
  std::string message;
};

// Each case's error when its model is created with its overrides: (model, config, message) in every
// failure, so that one test reports every mismatch.
void expect_errors(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    std::string got;
    try {
      models::create(c.model, c.overrides);
      got = test::kNoError;
    } catch (const ConfigError& e) {
      got = e.what();
    } catch (const Error& e) {
      got = std::string("(not a ConfigError) ") + e.what();
    }
    EXPECT_EQ(got, c.message) << c.model << " " << c.overrides.dump();
  }
}

}  // namespace

TEST(ConfigErrors, Mlp) {
  expect_errors({
      {"mlp", {{"hidden", {256, "x"}}}, "mlp config: key \"hidden[1]\": expected a positive integer, found the string \"x\""},
      {"mlp", {{"hidden", {256, 6.5}}}, "mlp config: key \"hidden[1]\": expected a positive integer, found the number 6.5"},
      {"mlp", {{"hidden", {0}}}, "mlp config: key \"hidden[0]\": expected a positive integer, found 0"},
      {"mlp", {{"hidden", 256}}, "mlp config: key \"hidden\": expected a list of positive integers, found the number 256"},
      {"mlp", {{"dropout", 1.0}}, "mlp config: key \"dropout\": expected a number in [0, 1), found 1.0"},
      {"mlp", {{"dropout", "0.1"}}, "mlp config: key \"dropout\": expected a number in [0, 1), found the string \"0.1\""},
      {"mlp", {{"act", "tanh"}}, "mlp config: key \"act\": expected one of \"relu\", \"gelu\", found the string \"tanh\""},
      {"mlp", {{"num_classes", 0}}, "mlp config: key \"num_classes\": expected a positive integer, found 0"},
      {"mlp", {{"image_size", 28.5}}, "mlp config: key \"image_size\": expected a positive integer, found the number 28.5"},
      {"mlp", {{"in_channels", true}}, "mlp config: key \"in_channels\": expected a positive integer, found the boolean true"},
      {"mlp", {{"in_channels", nullptr}}, "mlp config: key \"in_channels\": expected a positive integer, found null"},
      {"mlp", {{"hiden", {256}}}, "create_model(mlp): unknown config key 'hiden'"},
      {"mlp", json("hidden"), "create_model(mlp): config overrides must be a JSON object, got the string \"hidden\""},
      {"mlp", json::array({1}), "create_model(mlp): config overrides must be a JSON object, got the list [1]"},
      {"mlp", {{"model", "vit"}}, "create_model(mlp): the config names model \"vit\" but 'mlp' was asked for"},
  });
  // From JSON directly: every key is required, an unknown one is named with the known ones.
  EXPECT_EQ(error_of([] { models::mlp_config_from_json({{"in_channels", 1}}); }),
            "mlp config: key \"image_size\": missing (expected a positive integer)");
  json full = models::create_model("mlp", {{"hidden", {8}}})->config();
  full["hiden"] = 1;
  EXPECT_EQ(error_of([&] { models::mlp_config_from_json(full); }),
            "mlp config: unknown key \"hiden\" (known: in_channels, image_size, hidden, num_classes, dropout, act, model)");
  EXPECT_EQ(error_of([] { models::mlp_config_from_json(json()); }), "mlp config: expected a JSON object, found null");
}

TEST(ConfigErrors, Vit) {
  const std::string v = "vit_fmnist_demo";
  expect_errors({
      {v, {{"depth", "six"}}, "vit config: key \"depth\": expected a positive integer, found the string \"six\""},
      {v, {{"depth", 6.5}}, "vit config: key \"depth\": expected a positive integer, found the number 6.5"},
      {v, {{"depth", true}}, "vit config: key \"depth\": expected a positive integer, found the boolean true"},
      {v, {{"depth", 0}}, "vit config: key \"depth\": expected a positive integer, found 0"},
      {v, {{"heads", -4}}, "vit config: key \"heads\": expected a positive integer, found -4"},
      {v, {{"dim", {128}}}, "vit config: key \"dim\": expected a positive integer, found the list [128]"},
      {v, {{"patch_size", "7"}}, "vit config: key \"patch_size\": expected a positive integer, found the string \"7\""},
      {v, {{"mlp_ratio", "4"}}, "vit config: key \"mlp_ratio\": expected a positive number, found the string \"4\""},
      {v, {{"mlp_ratio", 0}}, "vit config: key \"mlp_ratio\": expected a positive number, found 0"},
      {v, {{"qkv_bias", 1}}, "vit config: key \"qkv_bias\": expected a boolean (true or false), found the number 1"},
      {v, {{"distilled", "false"}}, "vit config: key \"distilled\": expected a boolean (true or false), found the string \"false\""},
      {v, {{"drop", 1.5}}, "vit config: key \"drop\": expected a number in [0, 1), found 1.5"},
      {v, {{"attn_drop", -0.1}}, "vit config: key \"attn_drop\": expected a number in [0, 1), found -0.1"},
      {v, {{"drop_path", 1}}, "vit config: key \"drop_path\": expected a number in [0, 1), found 1"},
      {v, {{"pos_embed", "rope"}}, "vit config: key \"pos_embed\": expected one of \"learned\", \"learned2d\", "
                                   "\"sincos2d\", \"relative\", \"none\", found the string \"rope\""},
      {v, {{"global_pool", "max"}}, "vit config: key \"global_pool\": expected one of \"token\", \"avg\", found the string \"max\""},
      {v, {{"global_pool", 0}}, "vit config: key \"global_pool\": expected one of \"token\", \"avg\", found the number 0"},
      {v, {{"representation_size", -1}}, "vit config: key \"representation_size\": expected an integer >= 0, found -1"},
      {v, {{"eps", 0}}, "vit config: key \"eps\": expected a positive number, found 0"},
      {v, {{"hybrid_channels", {32, -1}}}, "vit config: key \"hybrid_channels[1]\": expected a positive integer, found -1"},
      {v, {{"hybrid_channels", "32"}}, "vit config: key \"hybrid_channels\": expected a list of positive integers, found the string \"32\""},
      {v, {{"head_dim", -1}}, "vit config: key \"head_dim\": expected an integer >= 0, found -1"},
      {v, {{"share_qk", 1}}, "vit config: key \"share_qk\": expected a boolean (true or false), found the number 1"},
      {v, {{"attn_scale", "sqrt"}}, "vit config: key \"attn_scale\": expected one of \"inv_sqrt_head_dim\", \"none\", "
                                    "found the string \"sqrt\""},
      {v, {{"norm", "group"}}, "vit config: key \"norm\": expected one of \"layer\", \"batch\", found the string \"group\""},
      {v, {{"norm_first", "yes"}}, "vit config: key \"norm_first\": expected a boolean (true or false), found the string \"yes\""},
      {v, {{"deph", 6}}, "create_model(vit_fmnist_demo): unknown config key 'deph'"},
  });
  json full = models::vit_config_to_json(models::VitConfig{});
  full.erase("depth");
  EXPECT_EQ(error_of([&] { models::vit_config_from_json(full); }),
            "vit config: key \"depth\": missing (expected a positive integer)");
  full["depth"] = 2;
  // The ablation keys are optional: a config written before them reads as timm's ViT.
  json older = full;
  for (const char* k : {"head_dim", "share_qk", "attn_scale", "norm", "norm_first"}) older.erase(k);
  const models::VitConfig oc = models::vit_config_from_json(older);
  EXPECT_EQ(oc.head_dim, 0);
  EXPECT_FALSE(oc.share_qk);
  EXPECT_EQ(oc.attn_scale, "inv_sqrt_head_dim");
  full["extra"] = 1;
  EXPECT_EQ(error_of([&] { models::vit_config_from_json(full); }).rfind("vit config: unknown key \"extra\" (known: ", 0), 0u);
  EXPECT_EQ(error_of([] { models::vit_config_from_json(json::array()); }), "vit config: expected a JSON object, found an empty list");
  // The model's own checks stay (a relation between keys).
  EXPECT_EQ(error_of([&] { models::create(v, {{"heads", 3}}); }), "vit: dim 128 is not divisible by heads 3 (set head_dim for heads of another width)");
}

TEST(ConfigErrors, ResNet) {
  const std::string r = "resnet_fmnist_tiny";
  expect_errors({
      {r, {{"widths", {16, "32", 64}}}, "resnet config: key \"widths[1]\": expected a positive integer, found the string \"32\""},
      {r, {{"blocks", 2}}, "resnet config: key \"blocks\": expected a list of positive integers, found the number 2"},
      {r, {{"blocks", {1, 0, 1}}}, "resnet config: key \"blocks[1]\": expected a positive integer, found 0"},
      {r, {{"stem", "deep"}}, "resnet config: key \"stem\": expected one of \"cifar\", \"imagenet\", found the string \"deep\""},
      {r, {{"stem_channels", 0}}, "resnet config: key \"stem_channels\": expected a positive integer, found 0"},
      {r, {{"num_classes", -3}}, "resnet config: key \"num_classes\": expected a positive integer, found -3"},
      {r, {{"image_size", "28"}}, "resnet config: key \"image_size\": expected a positive integer, found the string \"28\""},
      {r, {{"width", {8}}}, "create_model(resnet_fmnist_tiny): unknown config key 'width'"},
  });
  json full = models::resnet_config_to_json(models::ResNetConfig{});
  full.erase("stem");
  EXPECT_EQ(error_of([&] { models::resnet_config_from_json(full); }),
            "resnet config: key \"stem\": missing (expected one of \"cifar\", \"imagenet\")");
}

TEST(ConfigErrors, Transformer) {
  const std::string t = "transformer";
  expect_errors({
      {t, {{"d_model", "512"}}, "transformer config: key \"d_model\": expected a positive integer, found the string \"512\""},
      {t, {{"nhead", 0}}, "transformer config: key \"nhead\": expected a positive integer, found 0"},
      {t, {{"layers", -1}}, "transformer config: key \"layers\": expected an integer >= 0, found -1"},
      {t, {{"decoder_layers", 2.5}}, "transformer config: key \"decoder_layers\": expected an integer >= 0, found the number 2.5"},
      {t, {{"d_ff", nullptr}}, "transformer config: key \"d_ff\": expected a positive integer, found null"},
      {t, {{"dropout", 1.0}}, "transformer config: key \"dropout\": expected a number in [0, 1), found 1.0"},
      {t, {{"activation", "tanh"}}, "transformer config: key \"activation\": expected one of \"relu\", \"gelu\", "
                                    "\"gelu_tanh\", found the string \"tanh\""},
      {t, {{"norm_first", "yes"}}, "transformer config: key \"norm_first\": expected a boolean (true or false), found the string \"yes\""},
      {t, {{"tie_output", 0}}, "transformer config: key \"tie_output\": expected a boolean (true or false), found the number 0"},
      {t, {{"layer_norm_eps", "1e-5"}}, "transformer config: key \"layer_norm_eps\": expected a positive number, found the string \"1e-5\""},
      {t, {{"max_length", 0}}, "transformer config: key \"max_length\": expected a positive integer, found 0"},
      {t, {{"vocab_size", 3}}, "transformer config: key \"vocab_size\": expected an integer > 4 (pad, unk, bos, eos), found 3"},
      {t, json(5), "create_model(transformer): config overrides must be a JSON object, got the number 5"},
  });
  EXPECT_EQ(error_of([] { models::TransformerSeq2SeqConfig::from_json({{"model", "rnn"}}); }),
            "transformer config: key \"model\": expected one of \"transformer\", found the string \"rnn\"");
  EXPECT_EQ(error_of([] { models::TransformerSeq2SeqConfig::from_json(json("x")); }),
            "transformer config: expected a JSON object, found the string \"x\"");
}

TEST(ConfigErrors, RnnWithAttention) {
  const std::string r = "rnn-attention";
  expect_errors({
      {r, {{"hidden", "256"}}, "rnn-attention config: key \"hidden\": expected a positive integer, found the string \"256\""},
      {r, {{"layers", 0}}, "rnn-attention config: key \"layers\": expected a positive integer, found 0"},
      {r, {{"cell", "rnn"}}, "rnn-attention config: key \"cell\": expected one of \"gru\", \"lstm\", found the string \"rnn\""},
      {r, {{"attention", "additive"}}, "rnn-attention config: key \"attention\": expected one of \"bahdanau\", \"luong\", "
                                       "found the string \"additive\""},
      {r, {{"local", true}}, "rnn-attention config: key \"local\": expected one of \"none\", \"m\", \"p\", found the boolean true"},
      {r, {{"bidirectional", 1}}, "rnn-attention config: key \"bidirectional\": expected a boolean (true or false), found the number 1"},
      {r, {{"window", -1}}, "rnn-attention config: key \"window\": expected an integer >= 0, found -1"},
      {r, {{"dropout", -0.1}}, "rnn-attention config: key \"dropout\": expected a number in [0, 1), found -0.1"},
      {r, {{"emb_dim", {64}}}, "rnn-attention config: key \"emb_dim\": expected a positive integer, found the list [64]"},
  });
  EXPECT_EQ(error_of([] { models::create("rnn-attention", {{"hiden", 4}}); })
                .rfind("rnn-attention config: unknown key \"hiden\" (known: model, vocab_size, emb_dim, hidden, ", 0),
            0u);
  EXPECT_EQ(error_of([] { models::RnnSeq2SeqConfig::from_json(json(5)); }),
            "rnn-attention config: expected a JSON object, found the number 5");
}

// A Hugging Face config.json: other keys are allowed and null means "not set", but a value attn
// reads must have its type.
TEST(ConfigErrors, HuggingFaceConfigJson) {
  auto msg = [](const json& j) { return error_of([&] { models::vit_config_from_hf(j, false); }); };
  const std::string c = "foreign weights: config.json: key ";
  EXPECT_EQ(msg({{"hidden_size", "768"}}), c + "\"hidden_size\": expected a positive integer, found the string \"768\"");
  EXPECT_EQ(msg({{"num_hidden_layers", 12.5}}), c + "\"num_hidden_layers\": expected a positive integer, found the number 12.5");
  EXPECT_EQ(msg({{"qkv_bias", "true"}}), c + "\"qkv_bias\": expected a boolean (true or false), found the string \"true\"");
  EXPECT_EQ(msg({{"layer_norm_eps", -1}}), c + "\"layer_norm_eps\": expected a positive number, found -1");
  EXPECT_EQ(msg({{"num_labels", 0}}), c + "\"num_labels\": expected a positive integer, found 0");
  EXPECT_EQ(msg({{"id2label", {"a", "b"}}}), c + "\"id2label\": expected an object, found the list [\"a\",\"b\"]");
  EXPECT_EQ(msg({{"hidden_act", 5}}), c + "\"hidden_act\": expected a string, found the number 5");
  EXPECT_EQ(msg(json("vit")), "foreign weights: expected a Hugging Face config.json object, got the string \"vit\"");
  const models::VitConfig d = models::vit_config_from_hf({{"hidden_size", nullptr}, {"architectures", {"ViT"}}}, false);
  EXPECT_EQ(d.dim, 768);
}

// An attn checkpoint's model config and metadata, as the inference commands read them: the file is named.
TEST(ConfigErrors, CheckpointConfigAndMetadata) {
  const std::string dir = test::fresh_tmp_dir("attn_config_errors_test", "ckpt");
  const std::string path = dir + "/ckpt.safetensors";
  auto m = models::create_model("mlp", {{"hidden", {8}}});
  const json good = m->config();
  auto load = [&](json extra) {
    train::save_checkpoint(path, *m, nullptr, extra);
    return error_of([&] { models::load_pretrained(models::PretrainedSource::checkpoint(path)); });
  };
  auto with = [&](const std::string& k, const json& v) {
    json c = good;
    c[k] = v;
    return c;
  };
  const std::string f = "checkpoint '" + path + "': ";
  EXPECT_EQ(load({{"config", good}}), test::kNoError);
  EXPECT_EQ(load(json::object()), f + "key \"config.model\": missing (expected a string)");
  EXPECT_EQ(load({{"config", "mlp"}}), f + "key \"config\": expected an object, found the string \"mlp\"");
  json no_model = good;
  no_model.erase("model");
  EXPECT_EQ(load({{"config", no_model}}), f + "key \"config.model\": missing (expected a string)");
  EXPECT_EQ(load({{"config", with("model", 5)}}), f + "key \"config.model\": expected a string, found the number 5");
  EXPECT_EQ(load({{"config", with("image_size", "28")}}),
            f + "key \"config.image_size\": expected a positive integer, found the string \"28\"");
  EXPECT_EQ(load({{"config", with("num_classes", 10.0)}}),
            f + "key \"config.num_classes\": expected a positive integer, found the number 10.0");
  EXPECT_EQ(load({{"config", with("hidden", {8, "x"})}}),
            f + "mlp config: key \"hidden[1]\": expected a positive integer, found the string \"x\"");
  EXPECT_EQ(load({{"config", with("act", "swish")}}),
            f + "mlp config: key \"act\": expected one of \"relu\", \"gelu\", found the string \"swish\"");
  EXPECT_EQ(load({{"config", with("extra", 1)}}), f + "create_model(mlp): unknown config key 'extra'");
  EXPECT_EQ(load({{"config", good}, {"train_state", {1, 2}}}), f + "key \"train_state\": expected an object, found the list [1,2]");
  EXPECT_EQ(load({{"config", good}, {"train_state", {{"mean", "0.5"}, {"std", {0.5}}}}}),
            f + "key \"train_state.mean\": expected a list of numbers, found the string \"0.5\"");
  EXPECT_EQ(load({{"config", good}, {"train_state", {{"mean", {0.5}}}}}),
            f + "key \"train_state.std\": missing (expected a list of positive numbers)");
  EXPECT_EQ(load({{"config", good}, {"train_state", {{"mean", {0.5}}, {"std", {0}}}}}),
            f + "key \"train_state.std[0]\": expected a positive number, found 0");
  EXPECT_EQ(load({{"config", good}, {"train_state", {{"data", 5}}}}),
            f + "key \"train_state.data\": expected a string, found the number 5");
  EXPECT_EQ(load({{"config", good}, {"train_state", {{"class_names", {1, 2}}}}}),
            f + "key \"train_state.class_names[0]\": expected a string, found the number 1");
  EXPECT_EQ(load({{"config", good}, {"source_format", 5}}), f + "key \"source_format\": expected a string, found the number 5");
  // The classifier loader (a distillation teacher) reads the same config.
  train::save_checkpoint(path, *m, nullptr, {{"config", with("dropout", 2)}});
  EXPECT_EQ(error_of([&] { models::load_classifier_checkpoint(path); }),
            f + "mlp config: key \"dropout\": expected a number in [0, 1), found 2");
  std::filesystem::remove_all(dir);
}

// The Hugging Face name map against the key names Hugging Face itself publishes, not only against
// this project's own renaming (tests/golden/gen/pretrained.py's _to_hf): the (timm name, HF name)
// pairs below are those of transformers' conversion scripts
// (src/transformers/models/deit/convert_deit_timm_to_pytorch.py, create_rename_keys and
// read_in_q_k_v; models/vit/convert_vit_timm_to_pytorch.py is the same with the "vit." prefix and
// one "classifier" head), for DeiTForImageClassificationWithTeacher, ViTForImageClassification and
// the headless base models (no prefix, "pooler.dense" = timm's pre_logits.fc). The timm names are
// attn's own. Every HF key must land on its timm name, and q / k / v pack into qkv in that order.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "attn/attn.h"
#include "attn/models/name_maps.h"

using namespace attn;

namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;   // (timm, hf)

// The published pairs for `layers` encoder layers, with `prefix` ("deit.", "vit." or "" for the base
// model) on the embeddings, the encoder and the final layernorm.
Pairs published(int layers, const std::string& prefix, const std::string& head) {
  Pairs p;
  for (int i = 0; i < layers; ++i) {
    const std::string t = "blocks." + std::to_string(i) + ".", h = prefix + "encoder.layer." + std::to_string(i) + ".";
    for (const char* w : {"weight", "bias"}) {
      const std::string s = std::string(".") + w;
      p.emplace_back(t + "norm1" + s, h + "layernorm_before" + s);
      p.emplace_back(t + "attn.proj" + s, h + "attention.output.dense" + s);
      p.emplace_back(t + "norm2" + s, h + "layernorm_after" + s);
      p.emplace_back(t + "mlp.fc1" + s, h + "intermediate.dense" + s);
      p.emplace_back(t + "mlp.fc2" + s, h + "output.dense" + s);
    }
  }
  p.emplace_back("cls_token", prefix + "embeddings.cls_token");
  p.emplace_back("patch_embed.proj.weight", prefix + "embeddings.patch_embeddings.projection.weight");
  p.emplace_back("patch_embed.proj.bias", prefix + "embeddings.patch_embeddings.projection.bias");
  p.emplace_back("pos_embed", prefix + "embeddings.position_embeddings");
  p.emplace_back("norm.weight", prefix + "layernorm.weight");
  p.emplace_back("norm.bias", prefix + "layernorm.bias");
  if (head == "teacher") {
    p.emplace_back("dist_token", prefix + "embeddings.distillation_token");
    p.emplace_back("head.weight", "cls_classifier.weight");
    p.emplace_back("head.bias", "cls_classifier.bias");
    p.emplace_back("head_dist.weight", "distillation_classifier.weight");
    p.emplace_back("head_dist.bias", "distillation_classifier.bias");
  } else if (head == "classifier") {
    p.emplace_back("head.weight", "classifier.weight");
    p.emplace_back("head.bias", "classifier.bias");
  } else {   // base model
    p.emplace_back("pre_logits.fc.weight", "pooler.dense.weight");
    p.emplace_back("pre_logits.fc.bias", "pooler.dense.bias");
  }
  return p;
}

// read_in_q_k_v: query = qkv rows [0, D), key = [D, 2D), value = [2D, 3D).
std::vector<std::string> qkv_keys(int layers, const std::string& prefix) {
  std::vector<std::string> k;
  for (int i = 0; i < layers; ++i)
    for (const char* part : {"query", "key", "value"})
      for (const char* w : {"weight", "bias"})
        k.push_back(prefix + "encoder.layer." + std::to_string(i) + ".attention.attention." + part + "." + w);
  return k;
}

void check(const std::string& prefix, const std::string& head) {
  SCOPED_TRACE("prefix '" + prefix + "', head " + head);
  const int layers = 2;
  const int64_t D = 4;
  io::TensorList hf;
  float tag = 1;
  std::map<std::string, float> tag_of;   // each tensor filled with its own value, to follow it
  for (const auto& [t, h] : published(layers, prefix, head)) {
    hf.emplace_back(h, Tensor::full({3}, tag));
    tag_of[t] = tag++;
  }
  for (const std::string& k : qkv_keys(layers, prefix)) {
    const bool w = k.ends_with(".weight");
    const float part = k.find(".query.") != std::string::npos ? 100 : k.find(".key.") != std::string::npos ? 200 : 300;
    hf.emplace_back(k, w ? Tensor::full({D, D}, part) : Tensor::full({D}, part));
  }
  EXPECT_EQ(models::detect_weight_format(hf), models::WeightFormat::hf);
  const io::TensorList ours = models::to_attn_names(hf, models::WeightFormat::hf);
  std::map<std::string, Tensor> got(ours.begin(), ours.end());
  EXPECT_EQ(got.size(), ours.size()) << "a name was produced twice";
  for (const auto& [t, value] : tag_of) {
    auto it = got.find(t);
    ASSERT_NE(it, got.end()) << "published timm name '" << t << "' not produced";
    EXPECT_EQ(it->second.to_vector<float>()[0], value) << t;
    got.erase(it);
  }
  for (int i = 0; i < layers; ++i)
    for (const char* w : {"weight", "bias"}) {
      const std::string k = "blocks." + std::to_string(i) + ".attn.qkv." + w;
      auto it = got.find(k);
      ASSERT_NE(it, got.end()) << k;
      EXPECT_EQ(it->second.size(0), 3 * D) << k;
      const std::vector<float> v = it->second.contiguous().to_vector<float>();
      const size_t rows = size_t(D) * (std::string(w) == "weight" ? size_t(D) : 1);
      EXPECT_EQ(v[0], 100) << k;
      EXPECT_EQ(v[rows], 200) << k;
      EXPECT_EQ(v[2 * rows], 300) << k;
      got.erase(it);
    }
  for (const auto& [k, v] : got) ADD_FAILURE() << "unexpected name '" << k << "'";
}

}  // namespace

TEST(PublishedKeys, DeitWithTeacher) { check("deit.", "teacher"); }
TEST(PublishedKeys, VitForImageClassification) { check("vit.", "classifier"); }
TEST(PublishedKeys, BaseModelsWithoutPrefix) {
  check("", "pooler");   // ViTModel / DeiTModel: no prefix, pooler.dense
}

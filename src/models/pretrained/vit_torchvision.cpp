// torchvision's VisionTransformer layout -> attn's (timm) names. in_proj_{weight,bias} already pack
// q, k, v row-wise in timm's qkv order; MLP "mlp.0"/"mlp.3" (0.13+) or "mlp.linear_1"/"linear_2" (0.12).
#include <utility>
#include <vector>

#include "attn/models/name_maps.h"

namespace attn::models {

namespace {


std::string map_key(const std::string& k) {
  static const std::vector<std::pair<std::string, std::string>> top = {
      {"conv_proj.", "patch_embed.proj."}, {"encoder.ln.", "norm."}, {"heads.head.", "head."},
      {"heads.pre_logits.", "pre_logits.fc."}};
  if (k == "class_token") return "cls_token";
  if (k == "encoder.pos_embedding") return "pos_embed";
  for (const auto& [a, b] : top)
    if (k.starts_with(a)) return b + k.substr(a.size());
  const std::string layers = "encoder.layers.encoder_layer_";
  if (!k.starts_with(layers)) return k;
  const size_t dot = k.find('.', layers.size());
  if (dot == std::string::npos) return k;
  const std::string n = k.substr(layers.size(), dot - layers.size());
  const std::string rest = k.substr(dot + 1);
  const std::string blk = "blocks." + n + ".";
  static const std::vector<std::pair<std::string, std::string>> inner = {
      {"ln_1.", "norm1."}, {"ln_2.", "norm2."}, {"self_attention.out_proj.", "attn.proj."},
      {"mlp.0.", "mlp.fc1."}, {"mlp.3.", "mlp.fc2."}, {"mlp.linear_1.", "mlp.fc1."}, {"mlp.linear_2.", "mlp.fc2."}};
  if (rest == "self_attention.in_proj_weight") return blk + "attn.qkv.weight";
  if (rest == "self_attention.in_proj_bias") return blk + "attn.qkv.bias";
  for (const auto& [a, b] : inner)
    if (rest.starts_with(a)) return blk + b + rest.substr(a.size());
  return k;
}

}  // namespace

io::TensorList map_torchvision(const io::TensorList& sd) {
  io::TensorList out;
  out.reserve(sd.size());
  for (const auto& [k, v] : sd) out.emplace_back(map_key(k), v);
  return out;
}

}  // namespace attn::models

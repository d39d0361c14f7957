// timm's ViT / DeiT layout -> attn's names: the identity, with timm's own quirks (see name_maps.h).
#include "attn/core/error.h"
#include "attn/models/name_maps.h"

namespace attn::models {

namespace {

bool contains(const std::string& s, const std::string& p) { return s.find(p) != std::string::npos; }

}  // namespace

io::TensorList map_timm(const io::TensorList& sd) {
  io::TensorList out;
  out.reserve(sd.size());
  for (const auto& [k, v] : sd) {
    ATTN_CHECK(!k.starts_with("fc_norm."),
               "foreign weights: timm key '", k, "' (global_pool='avg' with a LayerNorm after pooling) has no "
               "counterpart in attn's ViT, which normalises before pooling");
    ATTN_CHECK(!(contains(k, ".ls1.") || contains(k, ".ls2.") || contains(k, ".gamma_1") || contains(k, ".gamma_2")),
               "foreign weights: timm key '", k,
               "' (layer scale, as in DeiT III / CaiT) has no counterpart in attn's ViT");
    out.emplace_back(k, v);
  }
  return out;
}

}  // namespace attn::models

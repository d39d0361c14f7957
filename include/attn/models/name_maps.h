// Foreign ViT / DeiT weights (timm, Hugging Face transformers, torchvision) -> attn's names, which
// are timm's: patch_embed.proj, cls_token, dist_token, pos_embed, blocks.N.{norm1, attn.qkv,
// attn.proj, norm2, mlp.fc1, mlp.fc2}, norm, pre_logits.fc, head, head_dist.
//
//   io::SafetensorsFile f = io::load_safetensors("deit_tiny.safetensors");
//   models::WeightFormat fmt = models::detect_weight_format(f.tensors);      // from the keys
//   io::TensorList ours = models::to_attn_names(f.tensors, fmt);          // renamed, HF q/k/v packed
//
//   // Everything at once: build the model, resample pos_embed, strict load.
//   models::ForeignVitOptions o;  o.model = "deit_tiny_distilled_patch16_224";  o.image_size = 384;
//   auto vit = models::load_foreign_vit(io::load_safetensors("deit.safetensors"), o).model;
//
//   // Streamed from the file, one layer at a time, into bf16 Linear weights:
//   o.linear_dtype = DType::bf16;
//   auto vit16 = models::load_foreign_vit(io::SafetensorsReader("deit.safetensors"), o).model;
//
// Layouts:
//   timm         identity ("module." prefixes dropped; a 2-d patch_embed.proj.weight reshaped to the
//                conv; pre_logits.* dropped when the model has no representation layer, as timm's
//                checkpoint_filter_fn does). fc_norm (global_pool='avg' with a norm after pooling)
//                and layer scale (ls1/ls2, gamma_1/gamma_2) have no attn counterpart: an error.
//   hf           transformers' ViTForImageClassification / DeiTForImageClassificationWithTeacher /
//                ViTModel: [vit.|deit.]embeddings.*, encoder.layer.N.attention.attention.{query,key,
//                value} (concatenated into attn.qkv), ...attention.output.dense, layernorm_before,
//                layernorm_after, intermediate.dense, output.dense, layernorm, pooler.dense,
//                classifier | cls_classifier + distillation_classifier. Its config.json gives the
//                VitConfig (vit_config_from_hf; note layer_norm_eps = 1e-12).
//   torchvision  conv_proj, class_token, encoder.pos_embedding, encoder.layers.encoder_layer_N.{ln_1,
//                self_attention.in_proj_{weight,bias} (packed q, k, v = attn.qkv), self_attention.
//                out_proj, ln_2, mlp.0, mlp.3}, encoder.ln, heads.head, heads.pre_logits.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>
#include <string>

#include <nlohmann/json.hpp>

#include "attn/io/safetensors.h"
#include "attn/models/swin.h"
#include "attn/models/vit.h"

namespace attn::models {

enum class WeightFormat { timm, hf, torchvision };

const char* weight_format_name(WeightFormat f);   // "timm" | "hf" | "torchvision"
// "timm" | "hf" | "torchvision"; anything else throws naming the known layouts.
WeightFormat parse_weight_format(const std::string& s);
// From the keys (after dropping "module." prefixes); throws listing the first keys when no
// layout matches.
WeightFormat detect_weight_format(const io::TensorList& sd);
// The same from a file's header (its keys and the "aliases" metadata), reading no tensor.
WeightFormat detect_weight_format(const io::SafetensorsReader& file);

// One map per layout (src/models/pretrained/vit_<layout>.cpp; another model family adds its own
// <family>_<layout>.cpp). Unknown keys pass through unchanged, so a strict
// load reports them as unexpected.
io::TensorList map_timm(const io::TensorList& sd);
io::TensorList map_hf(const io::TensorList& sd);
io::TensorList map_torchvision(const io::TensorList& sd);
io::TensorList to_attn_names(const io::TensorList& sd, WeightFormat f);

// Drops a leading "module." (DataParallel) from every key.
io::TensorList strip_module_prefix(const io::TensorList& sd);
// The tensors of a file plus the aliases tools/pth_to_safetensors.py recorded in __metadata__
// ("aliases": {"dropped key": "kept key"}) for tensors that shared storage.
io::TensorList with_aliases(const io::SafetensorsFile& f);
// The (dropped key, kept key) pairs of a file's "aliases" metadata, checked: each kept key is one
// `has(key)` knows (with_aliases' checks and messages).
std::vector<std::pair<std::string, std::string>> alias_pairs(const io::Metadata& metadata,
                                                             const std::function<bool(const std::string&)>& has);

// A Hugging Face ViTConfig / DeiTConfig (config.json) as a VitConfig: hidden_size, num_hidden_layers,
// num_attention_heads, intermediate_size, image_size, patch_size, num_channels, layer_norm_eps,
// qkv_bias, num_labels (or the size of id2label); distilled when model_type is "deit" and
// `distilled` (the weights have a distillation token).
VitConfig vit_config_from_hf(const nlohmann::json& cfg, bool distilled);

struct ForeignVitOptions {
  std::string model = "vit";                              // registry name: the base config
  nlohmann::json overrides = nlohmann::json::object();    // on the registry defaults
  std::optional<WeightFormat> format;                     // empty: detected from the keys
  nlohmann::json hf_config;                               // config.json (null: none)
  int64_t image_size = 0;                                 // > 0: the model's image size
  // How pos_embed is resampled when the patch grid differs: DeiT's plain bicubic (false) or timm's
  // antialiased bicubic (true; resample_abs_pos_embed's default). See nn::resample_pos_embed (attn/nn/pos_embed.h).
  bool pos_embed_antialias = false;
  bool strict = true;
  // bf16: every Linear weight is made bf16 before the weights are copied in (nn::make_linear_weights_bf16),
  // so they are converted tensor by tensor (predict/bench --dtype bf16).
  DType linear_dtype = DType::f32;
};

struct ForeignVit {
  std::shared_ptr<VisionTransformer> model;
  WeightFormat format;
  bool pos_embed_resampled = false;
};

// Builds the model (registry defaults + overrides, or the HF config when given, then image_size),
// renames the weights, resamples pos_embed (square checkpoint grid) when the patch grid differs, and
// loads strictly: one attn::Error naming the layout and listing every missing, unexpected and
// mis-shaped key.
ForeignVit load_foreign_vit(const io::TensorList& sd, const ForeignVitOptions& o);
// The same, streamed from a file (with its aliases): the tensors are read one layer at a time (the
// keys sharing their first numbered component, e.g. "encoder.layer.3", so HF's q/k/v pack), renamed,
// copied into the model and dropped; the keys outside any layer (embeddings, norm, head) form one more
// group. Peak memory: the model (in its final dtypes) plus one layer's source tensors. The checks and
// messages are those of the io::TensorList version (the strict report comes once every group is read; the
// model is then discarded).
ForeignVit load_foreign_vit(const io::SafetensorsReader& file, const ForeignVitOptions& o);

// Swin Transformer weights in torchvision's layout, which is attn's own (src/models/pretrained/
// swin_torchvision.cpp): the registry model `model` (defaults + overrides, image_size when > 0) built,
// its Linear weights in linear_dtype, and the file streamed in strictly, one tensor at a time. An
// attn::Error names the model and every missing, unexpected and mis-shaped key (the first few of each
// when most keys are off). timm's and Hugging Face's layouts (V1 and V2) are renamed first (below).
struct ForeignSwinOptions {
  std::string model = "swin_t";
  nlohmann::json overrides = nlohmann::json::object();
  WeightFormat format = WeightFormat::torchvision;   // timm / hf: see below
  nlohmann::json hf_config;                          // hf: config.json (null: none), before overrides
  int64_t image_size = 0;
  DType linear_dtype = DType::f32;
};
std::shared_ptr<SwinTransformer> load_foreign_swin(const io::SafetensorsReader& file, const ForeignSwinOptions& o);

// Swin in timm's (>= 0.9) and Hugging Face's layouts (src/models/pretrained/swin_foreign.cpp):
//   timm  patch_embed.{proj, norm}, layers.i.downsample (the merging at the START of stage i >= 1),
//         layers.i.blocks.j.{norm1, attn.qkv, attn.proj, attn.relative_position_bias_table, norm2,
//         mlp.fc1, mlp.fc2}, norm, head.fc; relative_position_index and attn_mask not stored. Files of
//         timm < 0.9 / the original Microsoft release (layers.i.downsample at the END of stage i,
//         the index and masks stored, the classifier "head") are recognised by layers.0.downsample
//         and head.weight and renamed as timm's checkpoint_filter_fn does.
//         V2 (SwinTransformerV2): attn.{qkv (weight only), q_bias, v_bias, logit_scale, cpb_mlp.{0, 2}}
//         instead of the table; relative_coords_table / relative_position_index not stored (or stored,
//         by older files: then a coordinates table of the model's shape must hold its values).
//   hf    swin.embeddings.{patch_embeddings.projection, norm}, swin.encoder.layers.i.blocks.j.
//         {layernorm_before, attention.self.{query, key, value (packed into attn.qkv),
//         relative_position_bias_table, relative_position_index}, attention.output.dense,
//         layernorm_after, intermediate.dense, output.dense}, swin.encoder.layers.i.downsample (the
//         merging at the END of stage i), swin.layernorm, classifier.
//         V2 (Swinv2ForImageClassification): the root "swinv2."; attention.self.{query, key (no
//         bias), value, logit_scale, continuous_position_bias_mlp.{0, 2}} (relative_coords_table and
//         relative_position_index, when stored, as timm's); layernorm_before / _after are V2's
//         post-norms (norm1 / norm2).
// V2's q and v biases load into attn.qkv.bias with the key's zeros between them.
// swin_source_keys: attn's key -> the layout's key(s) (three for HF's q / k / v; two for V2's biases).
std::vector<std::string> swin_source_keys(const std::string& ours, WeightFormat f, int64_t version = 1);
struct SwinSourceTensors {
  io::TensorList tensors;                                  // attn's names, loadable by m
  std::vector<std::string> missing, unexpected, misshaped;  // in the layout's names
  int64_t tables_resized = 0;                               // bias tables of another window, resized
};
// The file's tensors for m: renamed, HF's q / k / v packed, relative_position_index (and attn_mask)
// taken from m, position-bias tables of another window resized bicubic as timm's
// resize_rel_pos_bias_table.
SwinSourceTensors swin_tensors_from(const io::SafetensorsReader& file, const SwinTransformer& m, WeightFormat f);
// A Hugging Face SwinConfig / Swinv2Config (config.json, model_type "swin" or "swinv2") as the
// SwinConfig of attn's model: image_size, patch_size, num_channels, embed_dim, depths, num_heads,
// window_size, mlp_ratio, num_labels (or the size of id2label), drop_path_rate, hidden_dropout_prob,
// attention_probs_dropout_prob; V2 also pretrained_window_sizes (all zeros: none). Absolute position
// embeddings, a layer_norm_eps other than 1e-5, an activation other than gelu or qkv_bias false are
// errors.
SwinConfig swin_config_from_hf(const nlohmann::json& cfg);

}  // namespace attn::models

#include "attn/models/vit.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "attn/autograd/grad_mode.h"
#include "attn/core/env.h"
#include "attn/core/json_config.h"
#include "attn/core/parallel.h"
#include "attn/nn/conv.h"
#include "attn/nn/init.h"
#include "attn/nn/pos_embed.h"
#include "attn/ops/combine.h"
#include "attn/ops/conv.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/fused.h"
#include "attn/ops/matmul.h"
#include "attn/ops/norm.h"
#include "attn/ops/reduce.h"
#include "attn/ops/softmax.h"

namespace attn::models {

// ---- config ----

VitConfig vit_config_from_json(const nlohmann::json& j) {
  ConfigReader r(j, "vit config");
  VitConfig c;
  c.image_size = r.get<int64_t>("image_size", Range::positive);
  c.patch_size = r.get<int64_t>("patch_size", Range::positive);
  c.in_channels = r.get<int64_t>("in_channels", Range::positive);
  c.num_classes = r.get<int64_t>("num_classes", Range::positive);
  c.dim = r.get<int64_t>("dim", Range::positive);
  c.depth = r.get<int64_t>("depth", Range::positive);
  c.heads = r.get<int64_t>("heads", Range::positive);
  c.mlp_ratio = r.get<double>("mlp_ratio", Range::positive);
  c.qkv_bias = r.get<bool>("qkv_bias");
  c.drop = r.get<double>("drop", Range::probability);
  c.attn_drop = r.get<double>("attn_drop", Range::probability);
  c.drop_path = r.get<double>("drop_path", Range::probability);
  c.pos_embed = r.one_of("pos_embed", {"learned", "learned2d", "sincos2d", "relative", "none"});
  c.global_pool = r.one_of("global_pool", {"token", "avg"});
  c.representation_size = r.get<int64_t>("representation_size", Range::non_negative);
  c.distilled = r.get<bool>("distilled");
  c.eps = r.get<double>("eps", Range::positive);
  c.hybrid_channels = r.get<std::vector<int64_t>>("hybrid_channels", Range::positive);
  c.head_dim = r.get_or<int64_t>("head_dim", 0, Range::non_negative);
  c.share_qk = r.get_or("share_qk", false);
  c.attn_scale = r.one_of_or("attn_scale", "inv_sqrt_head_dim", {"inv_sqrt_head_dim", "none"});
  c.norm = r.one_of_or("norm", "layer", {"layer", "batch"});
  c.norm_first = r.get_or("norm_first", true);
  r.ignore("model");
  r.finish();
  return c;
}

nlohmann::json vit_config_to_json(const VitConfig& c) {
  return {{"image_size", c.image_size}, {"patch_size", c.patch_size}, {"in_channels", c.in_channels},
          {"num_classes", c.num_classes}, {"dim", c.dim}, {"depth", c.depth}, {"heads", c.heads},
          {"mlp_ratio", c.mlp_ratio}, {"qkv_bias", c.qkv_bias}, {"drop", c.drop}, {"attn_drop", c.attn_drop},
          {"drop_path", c.drop_path}, {"pos_embed", c.pos_embed}, {"global_pool", c.global_pool},
          {"representation_size", c.representation_size}, {"distilled", c.distilled}, {"eps", c.eps},
          {"hybrid_channels", c.hybrid_channels}, {"head_dim", c.head_dim}, {"share_qk", c.share_qk},
          {"attn_scale", c.attn_scale}, {"norm", c.norm}, {"norm_first", c.norm_first}};
}

namespace {

void init_linear(nn::Linear& l, Generator& g) {
  NoGradGuard ng;
  nn::init::trunc_normal_(l.weight, g, 0.0, 0.02);
  if (l.bias.defined()) nn::init::zeros_(l.bias);
}

// The patch embedding (and a hybrid's CNN stem): "patch_embed.proj", "patch_embed.backbone.N.*".
struct PatchEmbed : nn::Module {
  std::shared_ptr<nn::Conv2d> proj;
  std::vector<std::pair<std::shared_ptr<nn::Conv2d>, std::shared_ptr<nn::BatchNorm2d>>> stem;
  PatchEmbed(const VitConfig& c) {
    int64_t ch = c.in_channels;
    if (!c.hybrid_channels.empty()) {
      auto bb = register_module("backbone", std::make_shared<nn::Sequential>());
      for (int64_t out : c.hybrid_channels) {
        auto conv = bb->push_back(std::make_shared<nn::Conv2d>(
            nn::Conv2dOptions{.in_channels = ch, .out_channels = out, .kernel = 3, .stride = 2, .padding = 1, .bias = false}));
        auto bn = bb->push_back(std::make_shared<nn::BatchNorm2d>(out));
        stem.push_back({conv, bn});
        ch = out;
      }
    }
    proj = register_module("proj", std::make_shared<nn::Conv2d>(nn::Conv2dOptions{
        .in_channels = ch, .out_channels = c.dim, .kernel = c.patch_size, .stride = c.patch_size}));
  }
  // images (B, C, H, W) -> tokens (B, N, D)
  Tensor forward(Tensor x) const {
    for (const auto& [conv, bn] : stem) x = relu(bn->forward(conv->forward(x)));
    // proj's kernel equals its stride: the GEMM's rows are already the tokens (no (B, D, gh, gw) copy).
    return conv2d_patch_tokens(x, proj->weight, proj->bias);   // (B, N, D)
  }
};

}  // namespace

// ---- block ----

VitBlock::VitBlock(const VitConfig& c, double dp, int64_t grid) : norm_first_(c.norm_first) {
  if (c.norm == "batch") bn1 = register_module("norm1", std::make_shared<nn::BatchNorm2d>(c.dim));
  else norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(c.dim, c.eps));
  attn = register_module("attn", std::make_shared<nn::SelfAttention>(nn::SelfAttentionOptions{
      .dim = c.dim, .num_heads = c.heads, .head_dim = c.head_dim, .share_qk = c.share_qk,
      .scale = c.attn_scale == "none" ? 1.0 : double(NAN), .qkv_bias = c.qkv_bias, .attn_drop = c.attn_drop,
      .proj_drop = c.drop}));
  drop_path = register_module("drop_path", std::make_shared<nn::DropPath>(dp));
  if (c.norm == "batch") bn2 = register_module("norm2", std::make_shared<nn::BatchNorm2d>(c.dim));
  else norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(c.dim, c.eps));
  mlp = register_module("mlp", std::make_shared<nn::MLP>(nn::MLPOptions{
      .in_features = c.dim, .hidden_features = int64_t(double(c.dim) * c.mlp_ratio), .drop = c.drop}));
  if (c.pos_embed == "relative") {
    ATTN_CHECK(grid > 0, "VitBlock: pos_embed \"relative\" needs the patch grid's side, got ", grid);
    rel_pos = register_module("rel_pos", std::make_shared<nn::RelativePositionBias2D>(nn::RelativePositionBias2DOptions{
        .window_h = grid, .window_w = grid, .num_heads = c.heads, .class_token = true}));
  }
}

Tensor VitBlock::attention_bias() const { return rel_pos ? rel_pos->forward() : Tensor(); }

Tensor VitBlock::norm(int which, const Tensor& x) const {
  const auto& ln = which == 1 ? norm1 : norm2;
  return ln ? ln->forward(x) : (which == 1 ? bn1 : bn2)->forward_tokens(x);
}

Tensor VitBlock::after_attention(const Tensor& x, const Tensor& attn_out) const {
  if (!norm_first_) {   // post-norm: x = norm(x + f(x))
    const Tensor y = norm(1, x + drop_path->forward(attn_out));
    return norm(2, y + drop_path->forward(mlp->forward(y)));
  }
  const Tensor y = x + drop_path->forward(attn_out);
  return y + drop_path->forward(mlp->forward(norm(2, y)));
}

Tensor VitBlock::forward(const Tensor& x) const {
  return after_attention(x, attn->forward(norm_first_ ? norm(1, x) : x, attention_bias()).out);
}

std::pair<Tensor, Tensor> VitBlock::forward_fused(const Tensor& x, const Tensor& pending) const {
  // A bf16 model in inference, or training under bf16 autocast: the norms write their results in bf16 for
  // the Linears that read them (qkv, fc1), which would round them so anyway (ops/matmul.h:
  // linear_reads_bf16, linear_autocasts).
  const bool infer = !grad_enabled() && !is_training() && x.dtype() == DType::f32;
  auto reads_bf16 = [&](const Tensor& w) {
    return x.dtype() == DType::f32 && ((infer && linear_reads_bf16(w)) || linear_autocasts(w));
  };
  // (a relative position bias is an f32 mask, which takes the f32 input)
  const DType h_dt = !rel_pos && reads_bf16(attn->qkv->weight) ? DType::bf16 : DType::f32;
  const DType h2_dt = reads_bf16(mlp->fc1->weight) ? DType::bf16 : DType::f32;
  Tensor s = x, h;
  if (pending.defined())
    std::tie(s, h) = add_layer_norm(x, pending, norm1->weight, norm1->bias, norm1->options().eps, h_dt);
  else if (h_dt == DType::bf16) h = layer_norm(x, norm1->weight, norm1->bias, norm1->options().eps, h_dt);
  else h = norm1->forward(x);
  auto [s1, h2] = add_layer_norm(s, drop_path->forward(attn->forward(h, attention_bias()).out), norm2->weight, norm2->bias,
                                 norm2->options().eps, h2_dt);
  return {s1, drop_path->forward(mlp->forward(h2))};
}

Tensor VitBlock::forward_with_attention(const Tensor& x, Tensor& weights) const {
  nn::MultiHeadResult r = attn->forward(norm_first_ ? norm(1, x) : x, attention_bias(), /*need_weights=*/true);
  weights = r.weights;
  return after_attention(x, r.out);
}

// ---- model ----

VisionTransformer::VisionTransformer(const VitConfig& c, std::string name) : cfg_(c), model_name_(std::move(name)) {
  int64_t fmap = c.image_size;
  for (size_t i = 0; i < c.hybrid_channels.size(); ++i) fmap = (fmap + 1) / 2;
  ATTN_CHECK(c.patch_size > 0 && fmap % c.patch_size == 0, "vit: image size ", c.image_size,
             (c.hybrid_channels.empty() ? "" : " (after the CNN stem: " + std::to_string(fmap) + ")"),
             " is not a multiple of the patch size ", c.patch_size);
  ATTN_CHECK(c.heads > 0 && (c.head_dim > 0 || c.dim % c.heads == 0), "vit: dim ", c.dim,
             " is not divisible by heads ", c.heads, " (set head_dim for heads of another width)");
  ATTN_CHECK(c.global_pool == "token" || c.global_pool == "avg", "vit: global_pool must be token or avg, got '",
             c.global_pool, "'");
  ATTN_CHECK(!(c.distilled && c.global_pool == "avg"), "vit: a distilled (DeiT) model pools the class token");
  chunk_setting_ = env::vit_chunk().value_or(kAutoChunk);
  Generator& g = default_generator();
  patch_embed_ = register_module("patch_embed", std::make_shared<PatchEmbed>(c));
  cls_token_ = &register_parameter("cls_token", Tensor::zeros({1, 1, c.dim}));
  if (c.distilled) dist_token_ = &register_parameter("dist_token", Tensor::zeros({1, 1, c.dim}));
  const int64_t n = grid() * grid(), prefix = num_prefix_tokens();
  {
    NoGradGuard ng;
    nn::init::normal_(*cls_token_, g, 0.0, 1e-6);   // timm
    if (dist_token_) nn::init::trunc_normal_(*dist_token_, g, 0.0, 0.02);   // DeiT
  }
  if (c.pos_embed == "learned") {
    pos_embed_ = &register_parameter("pos_embed", Tensor::zeros({1, prefix + n, c.dim}));
    NoGradGuard ng;
    nn::init::trunc_normal_(*pos_embed_, g, 0.0, 0.02);
  } else if (c.pos_embed == "sincos2d") {
    NoGradGuard ng;
    Tensor grid_pe = nn::sincos_2d_pos_embed(c.dim, grid(), grid(), false);   // (N, D)
    Tensor pe = concat({Tensor::zeros({prefix, c.dim}), grid_pe}, 0).unsqueeze(0);
    pos_embed_ = &register_buffer("pos_embed", pe);
  } else if (c.pos_embed == "learned2d") {
    pos_prefix_ = &register_parameter("pos_embed_prefix", Tensor::zeros({1, prefix, c.dim}));
    pos_2d_ = register_module("pos_embed_2d", std::make_shared<nn::PosEmbed>(nn::PosEmbedOptions{
        .kind = nn::PosEmbedKind::learned_2d, .dim = c.dim, .grid_h = grid(), .grid_w = grid()}));
    NoGradGuard ng;
    nn::init::trunc_normal_(*pos_prefix_, g, 0.0, 0.02);
  } else if (c.pos_embed == "relative") {   // in the blocks (VitBlock::rel_pos): BEiT's, class token included
    ATTN_CHECK(prefix == 1, "vit: pos_embed \"relative\" takes one class token; a distilled model has ", prefix,
               " prefix tokens");
  } else {
    ATTN_CHECK(c.pos_embed == "none", "vit: pos_embed must be learned, learned2d, sincos2d, relative or none, got '",
               c.pos_embed, "'");
  }
  pos_drop_ = register_module("pos_drop", std::make_shared<nn::Dropout>(c.drop));
  blocks_ = register_module("blocks", std::make_shared<nn::ModuleList<VitBlock>>());
  for (int64_t i = 0; i < c.depth; ++i) {
    const double dp = c.depth > 1 ? c.drop_path * double(i) / double(c.depth - 1) : c.drop_path;   // linear in depth
    blocks_->push_back(std::make_shared<VitBlock>(c, dp, grid()));
  }
  ATTN_CHECK(c.norm == "layer" || c.norm == "batch", "vit: norm must be layer or batch, got '", c.norm, "'");
  if (c.norm_first && c.norm == "layer") norm_ = register_module("norm", std::make_shared<nn::LayerNorm>(c.dim, c.eps));
  else if (c.norm_first) bn_ = register_module("norm", std::make_shared<nn::BatchNorm2d>(c.dim));
  int64_t feat = c.dim;
  if (c.representation_size > 0) {
    auto pl = register_module("pre_logits", std::make_shared<nn::Module>());
    pre_logits_ = pl->register_module("fc", std::make_shared<nn::Linear>(c.dim, c.representation_size));
    feat = c.representation_size;
  }
  head_ = register_module("head", std::make_shared<nn::Linear>(feat, c.num_classes));
  if (c.distilled) head_dist_ = register_module("head_dist", std::make_shared<nn::Linear>(c.dim, c.num_classes));
  // timm's init: Linear weights trunc_normal(.02), biases zero (blocks and heads).
  for (const auto& [name, m] : named_modules())
    if (auto* l = dynamic_cast<nn::Linear*>(m.get())) init_linear(*l, g);
}

int64_t VisionTransformer::grid() const {
  int64_t fmap = cfg_.image_size;
  for (size_t i = 0; i < cfg_.hybrid_channels.size(); ++i) fmap = (fmap + 1) / 2;
  return fmap / cfg_.patch_size;
}

Tensor VisionTransformer::patch_position_embeddings() const {
  NoGradGuard ng;
  const int64_t n = grid() * grid();
  if (pos_embed_) return pos_embed_->select(0, 0).slice(0, num_prefix_tokens(), num_prefix_tokens() + n).contiguous();
  if (pos_2d_) return pos_2d_->embedding().select(0, 0).contiguous();   // (N, D): no prefix rows in it
  return Tensor();
}

Tensor VisionTransformer::embed(const Tensor& images) const {
  ATTN_CHECK(images.dim() == 4 && images.size(1) == cfg_.in_channels && images.size(2) == cfg_.image_size &&
                 images.size(3) == cfg_.image_size,
             "vit: expected images (B, ", cfg_.in_channels, ", ", cfg_.image_size, ", ", cfg_.image_size,
             "), got shape ", images.shape());
  const int64_t B = images.size(0);
  Tensor x = static_cast<const PatchEmbed&>(*patch_embed_).forward(images);   // (B, N, D)
  std::vector<Tensor> parts{cls_token_->expand({B, 1, cfg_.dim})};
  if (dist_token_) parts.push_back(dist_token_->expand({B, 1, cfg_.dim}));
  parts.push_back(x);
  x = concat(parts, 1);
  if (pos_embed_) x = x + *pos_embed_;
  else if (pos_2d_) x = x + concat({*pos_prefix_, pos_2d_->embedding()}, 1);
  return pos_drop_->forward(x);
}

Tensor VisionTransformer::forward_features(const Tensor& images) const {
  // The blocks' residual adds are fused with the LayerNorm that follows each (the next block's norm1, or
  // the final norm): every block hands on its stream and its MLP branch unadded. Same values as
  // VitBlock::forward in sequence (the add and the norm are the same kernels, one pass instead of two).
  Tensor x = embed(images), pending;
  if (!norm_) {   // BatchNorm or post-norm: block by block (the fusion is LayerNorm's); a final BatchNorm
    for (const auto& b : *blocks_) x = b->forward(x);
    return bn_ ? bn_->forward_tokens(x) : x;
  }
  for (const auto& b : *blocks_) std::tie(x, pending) = b->forward_fused(x, pending);
  if (!pending.defined()) return norm_->forward(x);
  return add_layer_norm(x, pending, norm_->weight, norm_->bias, norm_->options().eps).second;
}

std::pair<Tensor, Tensor> VisionTransformer::forward_head(const Tensor& f) const {
  const int64_t prefix = num_prefix_tokens();
  Tensor x = cfg_.global_pool == "avg" ? mean(f.slice(1, prefix, f.size(1)), {1}) : f.select(1, 0);
  if (pre_logits_) x = tanh(pre_logits_->forward(x));
  Tensor cls = head_->forward(x);
  Tensor dist = head_dist_ ? head_dist_->forward(f.select(1, 1)) : Tensor();
  return {cls, dist};
}

void VisionTransformer::set_inference_chunk(int64_t n) {
  ATTN_CHECK(n >= 0 || n == kAutoChunk, "set_inference_chunk: expected a slice of n >= 0 images (0: the batch whole) "
             "or kAutoChunk (", kAutoChunk, "), got ", n);
  chunk_setting_ = n;
}

int64_t VisionTransformer::inference_chunk() const {
  if (chunk_setting_ != kAutoChunk) return chunk_setting_;
  const int64_t d = cfg_.dim, hidden = int64_t(double(d) * cfg_.mlp_ratio);
  const int64_t t = grid() * grid() + num_prefix_tokens();
  // Large layers (ViT-B: 28 MB of weights each) stream their weights from memory once per slice:
  // there the whole batch is cheaper.
  if (4 * (4 * d * d + 2 * d * hidden) > (int64_t(4) << 20)) return 0;
  const int64_t widest = 4 * t * std::max(3 * d, hidden);   // bytes per image of the widest activation
  // About 2 MiB of the widest activation per thread: on 2 threads vit_fmnist_small's slices of 54
  // images ran 2-3% faster than of 27 (and than the whole batch). Slices under 8 images (T = 197
  // at 224 × 224: DeiT-Ti would get 3) showed no clear gain; whole.
  const int64_t chunk = (int64_t(2) << 20) * std::max(1, get_num_threads()) / widest;
  return chunk >= 8 ? chunk : 0;
}

std::pair<Tensor, Tensor> VisionTransformer::forward_heads(const Tensor& images) const {
  // Inference (no grad, eval mode) on small models runs the batch in slices of inference_chunk()
  // images, each through every block: a slice's activations (about 2 MiB of the widest per thread)
  // stay in cache from layer to layer instead of going out to memory and back between every two ops
  // (at batch 256, vit_fmnist_small's are 6.5 MB per tensor). Every image's result is computed as alone.
  const int64_t chunk = !grad_enabled() && !is_training() && images.dim() == 4 ? inference_chunk() : 0;
  if (chunk <= 0 || images.size(0) <= chunk) return forward_head(forward_features(images));
  const int64_t B = images.size(0);
  std::vector<Tensor> cls, dist;
  for (int64_t b0 = 0; b0 < B; b0 += chunk) {
    auto [c, d] = forward_head(forward_features(images.narrow(0, b0, std::min(chunk, B - b0))));
    cls.push_back(c);
    if (d.defined()) dist.push_back(d);
  }
  return {concat(cls, 0), dist.empty() ? Tensor() : concat(dist, 0)};
}

Tensor VisionTransformer::forward(const Tensor& images) {
  auto [cls, dist] = forward_heads(images);
  if (!dist.defined()) return cls;
  return combine_distilled_heads(cls, dist, distilled_output_);
}

Tensor VisionTransformer::attention_maps(const Tensor& images) const {
  NoGradGuard ng;
  Tensor x = embed(images);
  std::vector<Tensor> maps;
  for (const auto& b : *blocks_) {
    Tensor w;
    x = b->forward_with_attention(x, w);
    maps.push_back(w);
  }
  return stack(maps, 0);
}

nlohmann::json VisionTransformer::config() const {
  nlohmann::json j = vit_config_to_json(cfg_);
  j["model"] = model_name_;
  return j;
}

int64_t VisionTransformer::macs_per_image() const {
  const int64_t n = grid() * grid(), t = n + num_prefix_tokens(), d = cfg_.dim;
  const int64_t hidden = int64_t(double(d) * cfg_.mlp_ratio);
  int64_t macs = 0;
  // CNN stem (hybrid): 3x3 convs, stride 2.
  int64_t ch = cfg_.in_channels, fm = cfg_.image_size;
  for (int64_t out : cfg_.hybrid_channels) {
    fm = (fm + 1) / 2;
    macs += fm * fm * out * ch * 9;
    ch = out;
  }
  macs += n * d * ch * cfg_.patch_size * cfg_.patch_size;   // patch embedding
  const int64_t inner = cfg_.heads * (cfg_.head_dim > 0 ? cfg_.head_dim : d / cfg_.heads);
  const int64_t block = t * d * (cfg_.share_qk ? 2 : 3) * inner   // qkv
                        + 2 * t * t * inner                        // q k^T and attn v
                        + t * inner * d                            // proj
                        + 2 * t * d * hidden;                      // mlp
  macs += cfg_.depth * block;
  int64_t feat = d;
  if (cfg_.representation_size > 0) { macs += d * cfg_.representation_size; feat = cfg_.representation_size; }
  macs += feat * cfg_.num_classes;
  if (cfg_.distilled) macs += d * cfg_.num_classes;
  return macs;
}

}  // namespace attn::models

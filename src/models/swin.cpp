// Swin Transformer V1 / V2 (torchvision's layout); see include/attn/models/swin.h.
#include "attn/models/swin.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "attn/autograd/grad_mode.h"
#include "attn/core/json_config.h"
#include "attn/nn/dropout.h"
#include "attn/nn/init.h"
#include "attn/ops/combine.h"
#include "attn/ops/conv.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/fused.h"
#include "attn/ops/matmul.h"
#include "attn/ops/norm.h"
#include "attn/ops/reduce.h"

namespace attn::models {

// ---- config ----

SwinConfig swin_config_from_json(const nlohmann::json& j) {
  ConfigReader r(j, "swin config");
  SwinConfig c;
  c.image_size = r.get<int64_t>("image_size", Range::positive);
  c.patch_size = r.get<int64_t>("patch_size", Range::positive);
  c.in_channels = r.get<int64_t>("in_channels", Range::positive);
  c.num_classes = r.get<int64_t>("num_classes", Range::positive);
  c.embed_dim = r.get<int64_t>("embed_dim", Range::positive);
  c.depths = r.get<std::vector<int64_t>>("depths", Range::positive);
  c.heads = r.get<std::vector<int64_t>>("heads", Range::positive);
  c.window_size = r.get<int64_t>("window_size", Range::positive);
  c.mlp_ratio = r.get<double>("mlp_ratio", Range::positive);
  c.drop = r.get<double>("drop", Range::probability);
  c.attn_drop = r.get<double>("attn_drop", Range::probability);
  c.drop_path = r.get<double>("drop_path", Range::probability);
  c.version = r.get<int64_t>("version", Range::positive);
  c.pretrained_window_sizes = r.get_or("pretrained_window_sizes", std::vector<int64_t>{}, Range::non_negative);
  c.convention = r.get_or("convention", "torchvision");
  c.distilled = r.get_or("distilled", false);
  r.ignore("model");
  r.finish();
  return c;
}

nlohmann::json swin_config_to_json(const SwinConfig& c) {
  return {{"image_size", c.image_size}, {"patch_size", c.patch_size}, {"in_channels", c.in_channels},
          {"num_classes", c.num_classes}, {"embed_dim", c.embed_dim}, {"depths", c.depths}, {"heads", c.heads},
          {"window_size", c.window_size}, {"mlp_ratio", c.mlp_ratio}, {"drop", c.drop}, {"attn_drop", c.attn_drop},
          {"drop_path", c.drop_path}, {"version", c.version}, {"pretrained_window_sizes", c.pretrained_window_sizes},
          {"convention", c.convention}, {"distilled", c.distilled}};
}

namespace {

// torchvision's SwinTransformer init, applied to every Linear last: trunc_normal .02, zero bias.
void swin_init_linears(nn::Module& m) {
  NoGradGuard ng;
  for (auto& [name, child] : m.named_modules())
    if (auto* l = dynamic_cast<nn::Linear*>(child.get())) {
      nn::init::trunc_normal_(l->weight, default_generator(), 0.0, 0.02);
      if (l->bias.defined()) nn::init::zeros_(l->bias);
    }
}

// Upper bounds, in double (no overflow), of the parameter and buffer elements and of the
// multiply-accumulates per image at image_size (macs_per_stage's terms, each window at its largest).
std::pair<double, double> swin_size_estimate(const SwinConfig& c) {
  const double P = double(c.patch_size), W = double(c.window_size), N = W * W;
  double C = double(c.embed_dim), h = std::floor(double(c.image_size) / P), w = h;
  double elements = double(c.in_channels) * P * P * C + 3 * C, macs = h * w * C * double(c.in_channels) * P * P;
  for (size_t i = 0; i < c.depths.size(); ++i) {
    if (i > 0) {
      h = std::ceil(h / 2), w = std::ceil(w / 2);
      elements += 8 * C * C + 4 * C;
      macs += h * w * 8 * C * C;
      C *= 2;
    }
    const double hidden = std::floor(C * c.mlp_ratio), hp = std::ceil(h / W) * W, wp = std::ceil(w / W) * W;
    const double bias = (2 * W - 1) * (2 * W - 1) * (double(c.heads[i]) + 2) + 1536 + 513 * double(c.heads[i]);
    const double block = 4 * C * C + 4 * C + 2 * C * hidden + hidden + 5 * C + bias + N * N;
    elements += double(c.depths[i]) * block;
    macs += double(c.depths[i]) * (hp * wp * (4 * C * C + 2 * N * C) + 2 * h * w * C * hidden);
  }
  return {elements + C * double(c.num_classes + 3), macs + C * double(c.num_classes)};
}

}  // namespace

void check_swin_config(const SwinConfig& c) {
  using L = SwinLimits;
  ATTN_CHECK(c.version == 1 || c.version == 2, "swin: expected version 1 or 2, got ", c.version);
  ATTN_CHECK(!c.depths.empty() && c.depths.size() == c.heads.size(), "swin: expected as many head counts as ",
             "stage depths (at least one stage), got ", c.depths.size(), " depths and ", c.heads.size(), " heads");
  const auto stages = int64_t(c.depths.size());
  ATTN_CHECK(stages <= L::stages, "swin: expected at most ", L::stages, " stages, got ", stages);
  ATTN_CHECK(c.embed_dim > 0 && c.embed_dim <= (L::width >> (stages - 1)), "swin: expected embed_dim in [1, ",
             L::width >> (stages - 1), "] (the last of ", stages, " stages is ", int64_t(1) << (stages - 1),
             " times as wide, at most ", L::width, "), got ", c.embed_dim);
  int64_t blocks = 0;
  for (size_t i = 0; i < c.depths.size(); ++i) {
    const int64_t dim = c.embed_dim << i;
    ATTN_CHECK(c.depths[i] > 0 && c.depths[i] <= L::blocks && c.heads[i] > 0 && dim % c.heads[i] == 0, "swin: stage ",
               i + 1, " needs a depth in [1, ", L::blocks, "] and a head count dividing its width ", dim,
               ", got depth ", c.depths[i], " and ", c.heads[i], " heads");
    blocks += c.depths[i];
  }
  ATTN_CHECK(blocks <= L::blocks, "swin: expected at most ", L::blocks, " blocks in all, got ", blocks);
  auto in = [](int64_t v, int64_t hi) { return v > 0 && v <= hi; };
  ATTN_CHECK(in(c.window_size, L::window) && in(c.patch_size, L::patch) && in(c.image_size, L::image) &&
                 in(c.in_channels, L::channels) && in(c.num_classes, L::classes),
             "swin: expected window_size in [1, ", L::window, "], patch_size in [1, ", L::patch, "], image_size in [1, ",
             L::image, "], in_channels in [1, ", L::channels, "] and num_classes in [1, ", L::classes, "], got ",
             c.window_size, ", ", c.patch_size, ", ", c.image_size, ", ", c.in_channels, " and ", c.num_classes);
  ATTN_CHECK(c.mlp_ratio > 0 && c.mlp_ratio <= L::mlp_ratio && int64_t(double(c.embed_dim) * c.mlp_ratio) >= 1,
             "swin: expected mlp_ratio in (0, ", L::mlp_ratio, "] giving an MLP at least 1 wide, got ", c.mlp_ratio);
  ATTN_CHECK(c.convention == "torchvision" || c.convention == "hf" || c.convention == "timm" ||
                 c.convention == "timm_dynamic",
             "swin: expected convention torchvision, hf, timm or timm_dynamic, got '", c.convention, "'");
  ATTN_CHECK(c.window_size > 1 || c.version == 1, "swin: V2's position bias needs a window of at least 2, got ",
             c.window_size);
  const auto& pw = c.pretrained_window_sizes;
  bool pw_ok = pw.empty() || int64_t(pw.size()) == stages;
  for (int64_t p : pw) pw_ok = pw_ok && (p == 0 || (c.version == 2 && p >= 2 && p <= L::window));
  ATTN_CHECK(pw_ok, "swin: expected pretrained_window_sizes empty or one per stage (", stages, "), each 0 or (V2 only) ",
             "in [2, ", L::window, "], got ", nlohmann::json(pw).dump(), " for Swin V", c.version);
  if (c.version == 2 && c.convention != "torchvision")
    ATTN_CHECK((c.image_size / c.patch_size) >> (stages - 1) >= 1, "swin (V2, convention ", c.convention,
               "): the last stage's map at image_size ", c.image_size, " is empty (", stages, " stages of patch ",
               c.patch_size, "); use a larger image_size");
  const auto [elements, macs] = swin_size_estimate(c);
  ATTN_CHECK(elements <= L::elements && macs <= L::macs, "swin: expected a model of at most ", L::elements,
             " parameter and buffer elements and ", L::macs, " multiply-accumulates per image, got ", elements,
             " and ", macs, " (embed_dim ", c.embed_dim, ", depths ", nlohmann::json(c.depths).dump(), ", window ",
             c.window_size, ", image_size ", c.image_size, ")");
}

int64_t swin_stage_window(const SwinConfig& c, size_t stage) {
  if (c.version != 2 || c.convention == "torchvision") return c.window_size;
  return std::min(c.window_size, (c.image_size / c.patch_size) >> stage);
}

// ---- block ----

SwinBlock::SwinBlock(const SwinConfig& c, int64_t dim, int64_t heads, int64_t window, int64_t shift,
                     int64_t pretrained, double dp)
    : v2_(c.version == 2), hf_(c.convention == "hf" && c.version == 1) {
  norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(dim, 1e-5));
  attn = register_module("attn", std::make_shared<nn::ShiftedWindowAttention>(nn::ShiftedWindowAttentionOptions{
                                     .dim = dim, .num_heads = heads, .window_h = window, .window_w = window,
                                     .shift_h = shift, .shift_w = shift, .attn_drop = c.attn_drop, .proj_drop = c.drop,
                                     .v2 = v2_, .roll_before_pad = c.convention == "timm_dynamic",
                                     .hf_v2 = v2_ && c.convention == "hf", .pretrained_window_h = pretrained,
                                     .pretrained_window_w = pretrained}));
  drop_path = register_module("stochastic_depth", std::make_shared<nn::DropPath>(dp));
  norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(dim, 1e-5));
  const auto hidden = int64_t(double(dim) * c.mlp_ratio);
  mlp = register_module("mlp", std::make_shared<nn::Sequential>());
  mlp->push_back(std::make_shared<nn::Linear>(dim, hidden));
  mlp->push_back(std::make_shared<nn::Lambda>([](const Tensor& x) { return gelu(x); }));
  mlp->push_back(std::make_shared<nn::Dropout>(c.drop));
  mlp->push_back(std::make_shared<nn::Linear>(hidden, dim));
  mlp->push_back(std::make_shared<nn::Dropout>(c.drop));
}

std::pair<int64_t, int64_t> SwinBlock::effective_shift(int64_t h, int64_t w) const {
  // transformers' SwinLayer.set_shift_and_window_size: no shift on a map the window covers.
  return attn->effective_shift(h, w, !hf_ || std::min(h, w) > attn->options().window_h);
}

bool SwinBlock::shifts(int64_t h, int64_t w) const {
  const int64_t side = std::min(h, w), ws = attn->options().window_h;
  ATTN_CHECK(!hf_ || side >= ws, "swin (convention hf): a ", h, " x ", w, " map is smaller than the ", ws, " x ",
             ws, " window, which transformers' Swin cannot run either (its window shrinks to ", side,
             " but its position bias stays ", ws * ws, " x ", ws * ws, "); use a larger image");
  return !hf_ || side > ws;
}

std::pair<Tensor, Tensor> SwinBlock::forward_fused(const Tensor& x, const Tensor& pending) const {
  if (v2_ || grad_enabled() || is_training() || x.dtype() != DType::f32 || x.dim() != 4) return {};
  const int64_t B = x.size(0), H = x.size(1), W = x.size(2), C = x.size(3);
  const bool shift = shifts(H, W);
  const nn::ShiftedWindowAttention::RowMap rows = attn->row_map(B, H, W, shift);
  if (!rows.source.defined()) return {};
  // norm1's result in bf16 for a packed bf16 qkv, norm2's for a packed bf16 fc1 (linear_reads_bf16).
  const auto fc1 = std::static_pointer_cast<nn::Linear>(mlp->operator[](0));
  const DType n1_dt = linear_reads_bf16(attn->qkv->weight) ? DType::bf16 : DType::f32;
  const DType n2_dt = linear_reads_bf16(fc1->weight) ? DType::bf16 : DType::f32;
  const int64_t N = attn->options().window_h * attn->options().window_w;
  const auto [s, windows] = layer_norm_rows(x, pending, rows.source, norm1->weight, norm1->bias,
                                            norm1->options().eps, n1_dt);
  const Tensor o = attn->attend_windows(windows.view({-1, N, C}), H, W, shift);
  const auto [h, n] = add_layer_norm_rows(s, o, rows.back, norm2->weight, norm2->bias, norm2->options().eps, n2_dt);
  return {h, mlp_forward(n)};
}

Tensor SwinBlock::forward(const Tensor& x, Tensor* weights) const {
  const bool shift = shifts(x.size(1), x.size(2));
  if (v2_) {
    Tensor h = x + drop_path->forward(norm1->forward(attn->forward(x, shift, weights)));
    return h + drop_path->forward(norm2->forward(mlp_forward(h)));
  }
  if (!grad_enabled() && !is_training()) {   // the residual add and norm2 in one pass (ops/fused.h)
    // norm2's result in bf16 for a packed bf16 fc1, which would round it so anyway (linear_reads_bf16).
    const auto fc1 = std::static_pointer_cast<nn::Linear>(mlp->operator[](0));
    const DType n_dt = x.dtype() == DType::f32 && linear_reads_bf16(fc1->weight) ? DType::bf16 : DType::f32;
    // norm1's likewise for a packed bf16 qkv: the windows are gathered and projected in bf16.
    const bool n1_bf16 = x.dtype() == DType::f32 && linear_reads_bf16(attn->qkv->weight) && !weights;
    const Tensor n1 = n1_bf16 ? layer_norm(x, norm1->weight, norm1->bias, norm1->options().eps, DType::bf16)
                              : norm1->forward(x);
    const auto [h, n] = add_layer_norm(x, attn->forward(n1, shift, weights), norm2->weight, norm2->bias,
                                       norm2->options().eps, n_dt);
    return h + mlp_forward(n);
  }
  Tensor h = x + drop_path->forward(attn->forward(norm1->forward(x), shift, weights));
  return h + drop_path->forward(mlp_forward(norm2->forward(h)));
}

// fc1, GELU, dropout, fc2, dropout; in inference the GELU is fc1's epilogue (ops/fused.h), its result
// bf16 for a packed bf16 fc2 (which would round its input so).
Tensor SwinBlock::mlp_apply(const Tensor& x) const {
  if (grad_enabled() || is_training()) return mlp->forward(x);
  const auto fc1 = std::static_pointer_cast<nn::Linear>(mlp->operator[](0));
  const auto fc2 = std::static_pointer_cast<nn::Linear>(mlp->operator[](3));
  const DType hidden = fc2->weight.is_gemm_packed() && fc2->weight.dtype() == DType::bf16 ? DType::bf16 : DType::f32;
  const bool bf16_x = x.dtype() == DType::bf16 && linear_reads_bf16(fc1->weight);
  if ((x.dtype() != DType::f32 && !bf16_x) || !fc1->bias.defined()) return mlp->forward(x);
  return fc2->forward(linear_bias_gelu(x, fc1->weight, fc1->bias, GeluApprox::none, hidden));
}

Tensor SwinBlock::mlp_forward(const Tensor& x) const {
  // 4,096 rows: GEMMs as efficient as the whole map's; swin_t at batch 8 keeps 2 x 6 MB of hidden
  // activations instead of 2 x 38.5 MB (fc1's output and GELU's) at its first stage.
  constexpr int64_t kRows = 4096;
  const int64_t C = x.size(-1), n = x.numel() / C;
  if (grad_enabled() || is_training() || n <= 2 * kRows) return mlp_apply(x);
  const Tensor rows = x.contiguous().view({n, C});
  Tensor out;
  for (int64_t r = 0; r < n; r += kRows) {
    const Tensor y = mlp_apply(rows.slice(0, r, std::min(n, r + kRows)));
    if (!out.defined()) out = Tensor::empty({n, y.size(1)}, y.dtype());
    out.slice(0, r, std::min(n, r + kRows)).copy_(y);
  }
  return out.view(x.shape());
}

int64_t SwinBlock::macs(int64_t h, int64_t w) const {
  const int64_t ws = attn->options().window_h, dim = attn->options().dim;
  const int64_t hp = (h + ws - 1) / ws * ws, wp = (w + ws - 1) / ws * ws;
  const int64_t hidden = std::dynamic_pointer_cast<nn::Linear>(mlp->operator[](0))->options().out_features;
  return attn->macs(hp, wp) + 2 * h * w * dim * hidden;
}

// ---- patch merging ----

PatchMerging::PatchMerging(int64_t dim, bool v2) : v2_(v2) {
  reduction = register_module("reduction", std::make_shared<nn::Linear>(4 * dim, 2 * dim, false));
  norm = register_module("norm", std::make_shared<nn::LayerNorm>(v2 ? 2 * dim : 4 * dim, 1e-5));
}

Tensor PatchMerging::forward(const Tensor& x) const {
  ATTN_CHECK(x.dim() == 4, "PatchMerging: expected (B, H, W, C), got shape ", x.shape());
  const int64_t B = x.size(0), H = x.size(1), W = x.size(2), C = x.size(3);
  Tensor h = x;
  if (H % 2) h = concat({h, Tensor::zeros({B, 1, W, C}, x.dtype())}, 1);
  if (W % 2) h = concat({h, Tensor::zeros({B, h.size(1), 1, C}, x.dtype())}, 2);
  const int64_t Hp = h.size(1), Wp = h.size(2);
  auto part = [&](int64_t i, int64_t j) { return h.slice(1, i, Hp, 2).slice(2, j, Wp, 2); };
  h = concat({part(0, 0), part(1, 0), part(0, 1), part(1, 1)}, -1);
  return v2_ ? norm->forward(reduction->forward(h)) : reduction->forward(norm->forward(h));
}

// ---- model ----

SwinTransformer::SwinTransformer(const SwinConfig& c, std::string name) : cfg_(c), model_name_(std::move(name)) {
  check_swin_config(c);
  const bool v2 = c.version == 2;
  auto features = register_module("features", std::make_shared<nn::ModuleList<nn::Module>>());
  auto embed = std::make_shared<nn::Sequential>();
  patch_conv_ = embed->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions{
      .in_channels = c.in_channels, .out_channels = c.embed_dim, .kernel = c.patch_size, .stride = c.patch_size}));
  embed->push_back(std::make_shared<nn::Lambda>([](const Tensor& x) { return x.permute({0, 2, 3, 1}); }));
  patch_norm_ = embed->push_back(std::make_shared<nn::LayerNorm>(c.embed_dim, 1e-5));
  features->push_back(embed);
  int64_t total = 0, id = 0;
  for (int64_t d : c.depths) total += d;
  for (size_t i = 0; i < c.depths.size(); ++i) {
    const int64_t dim = c.embed_dim << i;
    // timm_dynamic (and V2's hf): the stage's map at image_size fixes the shift (timm's _calc_window_shift,
    // transformers' Swinv2Layer._compute_window_shift); V2 shrinks the window to that map.
    const int64_t built = (c.image_size / c.patch_size) >> i, window = swin_stage_window(c, i);
    const bool fixed = c.convention == "timm_dynamic" || (v2 && c.convention == "hf");
    ATTN_CHECK(v2 || c.convention != "timm_dynamic" || built >= c.window_size, "swin (convention timm_dynamic): stage ",
               i + 1, "'s ", built, " x ", built, " map at image_size ", c.image_size, " is smaller than the ",
               c.window_size, " window (timm would shrink the window); use a larger image_size");
    const int64_t pretrained = c.pretrained_window_sizes.empty() ? 0 : c.pretrained_window_sizes[i];
    auto stage = std::make_shared<nn::ModuleList<SwinBlock>>();
    for (int64_t b = 0; b < c.depths[i]; ++b, ++id) {
      const double dp = total > 1 ? c.drop_path * double(id) / double(total - 1) : 0.0;
      const bool shifted = b % 2 == 1 && window == c.window_size && !(fixed && built <= c.window_size);
      stage->push_back(std::make_shared<SwinBlock>(c, dim, c.heads[i], window, shifted ? c.window_size / 2 : 0,
                                                   pretrained, dp));
    }
    features->push_back(stage);
    stages_.push_back(stage);
    if (i + 1 < c.depths.size()) merges_.push_back(std::static_pointer_cast<PatchMerging>(
                                     features->push_back(std::make_shared<PatchMerging>(dim, v2))));
  }
  const int64_t last = c.embed_dim << (c.depths.size() - 1);
  norm_ = register_module("norm", std::make_shared<nn::LayerNorm>(last, 1e-5));
  head_ = register_module("head", std::make_shared<nn::Linear>(last, c.num_classes));
  if (c.distilled) head_dist_ = register_module("head_dist", std::make_shared<nn::Linear>(last, c.num_classes));
  swin_init_linears(*this);
}

Tensor SwinTransformer::embed(const Tensor& images) const {
  const int64_t P = cfg_.patch_size;
  ATTN_CHECK(images.dim() == 4 && images.size(1) == cfg_.in_channels, "swin: expected images (B, ",
             cfg_.in_channels, ", H, W), got shape ", images.shape());
  const int64_t H = images.size(2), W = images.size(3);
  ATTN_CHECK(H >= P && W >= P, "swin: expected images of at least one patch (", P, " x ", P, " pixels), got ", H,
             " x ", W);
  Tensor x = images;
  if (cfg_.convention == "timm") {
    const int64_t ws = cfg_.window_size;
    bool ok = H % P == 0 && W % P == 0;
    for (int64_t h = H / P, w = W / P, i = 0; ok && i < int64_t(cfg_.depths.size()); ++i, h /= 2, w /= 2) {
      // V2: timm built at H x W shrinks a window to a smaller map; the stage's window must be that one.
      const int64_t sw = swin_stage_window(cfg_, size_t(i));
      auto fits = [&](int64_t n) { return cfg_.version == 2 ? n % sw == 0 && (sw == ws || n == sw) : n % ws == 0 || n <= ws; };
      ok = fits(h) && fits(w);
      if (i + 1 < int64_t(cfg_.depths.size())) ok = ok && h % 2 == 0 && w % 2 == 0;
    }
    ATTN_CHECK(ok, "swin (convention timm, strict): a ", H, " x ", W, " image does not divide into ", P, " x ", P,
               " patches whose maps halve evenly and tile by the ", ws, " x ", ws, " window at every stage (",
               cfg_.image_size, " x ", cfg_.image_size, " does); resize the image, or use convention torchvision "
               "or hf, which pad");
  }
  ATTN_CHECK(cfg_.convention != "timm_dynamic" || (H % P == 0 && W % P == 0), "swin (convention timm_dynamic): a ",
             H, " x ", W, " image does not divide into ", P, " x ", P, " patches (timm's PatchEmbed refuses it)");
  if (cfg_.convention == "hf" && (H % P || W % P)) {   // transformers' SwinPatchEmbeddings.maybe_pad
    const int64_t ph = (P - H % P) % P, pw = (P - W % P) % P;
    if (ph) x = concat({x, Tensor::zeros({x.size(0), x.size(1), ph, W}, x.dtype())}, 2);
    if (pw) x = concat({x, Tensor::zeros({x.size(0), x.size(1), H + ph, pw}, x.dtype())}, 3);
  }
  // The patch conv's kernel equals its stride: its GEMM's rows are already the (B, Ho, Wo, C) map.
  const int64_t Ho = x.size(2) / P, Wo = x.size(3) / P;
  const Tensor tokens = conv2d_patch_tokens(x, patch_conv_->weight, patch_conv_->bias);
  return patch_norm_->forward(tokens.view({x.size(0), Ho, Wo, tokens.size(2)}));
}

Tensor SwinTransformer::forward_features(const Tensor& images) const {
  Tensor x = embed(images);
  // In inference each block leaves its last residual add to the next one's first layer norm
  // (SwinBlock::forward_fused), pending until a block, patch merging or the final norm that cannot take it.
  Tensor pending;
  for (size_t i = 0; i < stages_.size(); ++i) {
    for (const auto& b : *stages_[i]) {
      auto [s, m] = b->forward_fused(x, pending);
      if (s.defined()) {
        x = s, pending = m;
        continue;
      }
      if (pending.defined()) x = x + pending, pending = Tensor();
      x = b->forward(x);
    }
    if (i < merges_.size()) {
      if (pending.defined()) x = x + pending, pending = Tensor();
      x = merges_[i]->forward(x);
    }
  }
  if (pending.defined()) return add_layer_norm(x, pending, norm_->weight, norm_->bias, norm_->options().eps).second;
  return norm_->forward(x);
}

std::vector<Tensor> SwinTransformer::forward_intermediates(const Tensor& images, bool nchw) const {
  std::vector<Tensor> out;
  Tensor x = embed(images);
  for (size_t i = 0; i < stages_.size(); ++i) {
    if (i > 0) x = merges_[i - 1]->forward(x);
    for (const auto& b : *stages_[i]) x = b->forward(x);
    out.push_back(nchw ? x.permute({0, 3, 1, 2}).contiguous() : x);
  }
  return out;
}

std::pair<Tensor, Tensor> SwinTransformer::forward_heads(const Tensor& images) const {
  const Tensor pooled = mean(forward_features(images), {1, 2});
  return {head_->forward(pooled), head_dist_ ? head_dist_->forward(pooled) : Tensor()};
}

Tensor SwinTransformer::forward(const Tensor& images) {
  const int64_t n = inference_chunk(images), B = images.dim() == 4 ? images.size(0) : 0;
  if (n > 0 && n < B && !grad_enabled() && !is_training()) {
    std::vector<Tensor> parts;
    for (int64_t s = 0; s < B; s += n) parts.push_back(forward(images.slice(0, s, std::min(B, s + n)).contiguous()));
    return concat(parts, 0);
  }
  auto [cls, dist] = forward_heads(images);
  return dist.defined() ? combine_distilled_heads(cls, dist, distilled_output_) : cls;
}

int64_t SwinTransformer::inference_chunk(const Tensor& images) const {
  if (chunk_setting_ >= 0) return chunk_setting_;
  if (images.dim() != 4) return 0;
  const int64_t P = cfg_.patch_size;
  const int64_t tokens = std::max<int64_t>(1, ((images.size(2) + P - 1) / P) * ((images.size(3) + P - 1) / P));
  return std::max<int64_t>(1, 8192 / tokens);
}

void SwinTransformer::set_inference_chunk(int64_t n) {
  ATTN_CHECK(n >= -1, "swin set_inference_chunk: expected n > 0 images, 0 (the batch whole) or -1 (the default), got ",
             n);
  chunk_setting_ = n;
}

SwinBlockAttention SwinTransformer::attention_of(const Tensor& images, int64_t stage, int64_t block) const {
  ATTN_CHECK(stage >= 0 && stage < num_stages() && block >= 0 && block < int64_t(stages_[size_t(stage)]->size()),
             "swin: expected a stage in [0, ", num_stages(), ") and a block of it, got stage ", stage, " block ",
             block, " (depths ", nlohmann::json(cfg_.depths).dump(), ")");
  NoGradGuard ng;
  Tensor x = embed(images);
  for (int64_t i = 0; i <= stage; ++i) {
    if (i > 0) x = merges_[size_t(i - 1)]->forward(x);
    const auto& blocks = *stages_[size_t(i)];
    for (int64_t b = 0; b < (i == stage ? block : int64_t(blocks.size())); ++b) x = blocks[size_t(b)]->forward(x);
  }
  const SwinBlock& target = *(*stages_[size_t(stage)])[size_t(block)];
  SwinBlockAttention r;
  target.forward(x, &r.probs);
  r.height = x.size(1), r.width = x.size(2), r.window = cfg_.window_size;
  std::tie(r.shift_h, r.shift_w) = target.effective_shift(r.height, r.width);
  r.roll_before_pad = target.attn->options().roll_before_pad;
  const int64_t N = r.window * r.window;
  r.probs = r.probs.reshape({x.size(0), -1, r.probs.size(1), N, N});
  return r;
}

nlohmann::json SwinTransformer::config() const {
  nlohmann::json j = swin_config_to_json(cfg_);
  j["model"] = model_name_;
  return j;
}

std::vector<std::pair<std::string, int64_t>> SwinTransformer::macs_per_stage() const {
  const int64_t P = cfg_.patch_size;
  int64_t h = cfg_.image_size / P, w = h, C = cfg_.embed_dim;
  std::vector<std::pair<std::string, int64_t>> out = {{"patch_embed", h * w * C * cfg_.in_channels * P * P}};
  for (size_t i = 0; i < stages_.size(); ++i) {
    int64_t macs = 0;
    if (i > 0) {
      h = (h + 1) / 2, w = (w + 1) / 2;
      macs += h * w * 4 * C * 2 * C;
      C *= 2;
    }
    for (const auto& b : *stages_[i]) macs += b->macs(h, w);
    out.emplace_back("stage" + std::to_string(i + 1), macs);
  }
  out.emplace_back("head", C * cfg_.num_classes * (cfg_.distilled ? 2 : 1));
  return out;
}

int64_t SwinTransformer::macs_per_image() const {
  int64_t macs = 0;
  for (const auto& [name, m] : macs_per_stage()) macs += m;
  return macs;
}

// ---- variants ----

void register_swin_models() {
  struct Variant {
    const char* name;
    const char* description;
    SwinConfig cfg;
  };
  auto v = [](int64_t embed, std::vector<int64_t> depths, std::vector<int64_t> heads, double dp, int64_t version) {
    SwinConfig c;
    c.embed_dim = embed; c.depths = std::move(depths); c.heads = std::move(heads); c.drop_path = dp;
    c.version = version;
    if (version == 2) c.image_size = 256, c.window_size = 8;
    return c;
  };
  // 28x28 Fashion-MNIST: patch 2 (a 14 x 14 map, 2 x 2 windows of 7, shifted by 3 on odd blocks), then
  // one merging to 7 x 7 (one window: no shift); about 50M MACs per image, as vit_fmnist_small.
  auto fmnist = [](bool distilled) {
    SwinConfig c;
    c.image_size = 28, c.patch_size = 2, c.in_channels = 1, c.num_classes = 10;
    c.embed_dim = 48, c.depths = {2, 6}, c.heads = {3, 6}, c.window_size = 7, c.drop_path = 0.1;
    c.distilled = distilled;
    return c;
  };
  const std::vector<Variant> variants = {
      {"swin_t", "Swin-T (torchvision swin_t), 28.3M params", v(96, {2, 2, 6, 2}, {3, 6, 12, 24}, 0.2, 1)},
      {"swin_s", "Swin-S (torchvision swin_s), 49.6M params", v(96, {2, 2, 18, 2}, {3, 6, 12, 24}, 0.3, 1)},
      {"swin_b", "Swin-B (torchvision swin_b), 87.8M params", v(128, {2, 2, 18, 2}, {4, 8, 16, 32}, 0.5, 1)},
      {"swin_v2_t", "Swin-V2-T (torchvision swin_v2_t), 28.4M params", v(96, {2, 2, 6, 2}, {3, 6, 12, 24}, 0.2, 2)},
      {"swin_v2_s", "Swin-V2-S (torchvision swin_v2_s), 49.7M params", v(96, {2, 2, 18, 2}, {3, 6, 12, 24}, 0.3, 2)},
      {"swin_v2_b", "Swin-V2-B (torchvision swin_v2_b), 87.9M params", v(128, {2, 2, 18, 2}, {4, 8, 16, 32}, 0.5, 2)},
      {"swin_fmnist", "small Swin for 28x28 Fashion-MNIST: patch 2, window 7, C 48, depths {2, 6}, heads {3, 6}",
       fmnist(false)},
      {"swin_fmnist_distilled", "swin_fmnist with DeiT's distillation head (head_dist on the pooled features)",
       fmnist(true)},
      {"swin", "a custom Swin Transformer: every config key can be set (defaults: swin_t)",
       v(96, {2, 2, 6, 2}, {3, 6, 12, 24}, 0.2, 1)},
  };
  for (const Variant& var : variants) {
    const std::string name = var.name;
    register_model({name, var.description, swin_config_to_json(var.cfg), [name](const nlohmann::json& j) {
                      return std::make_shared<SwinTransformer>(swin_config_from_json(j), name);
                    }});
  }
}

}  // namespace attn::models

// Multi-head attention modules on attn::scaled_dot_product_attention (ops/attention.h).
//
//   nn::SelfAttention attn({.dim = 768, .num_heads = 12, .qkv_bias = true});      // timm's Attention
//   Tensor y = attn.forward(x).out;                       // x (B, T, 768) -> (B, T, 768)
//   auto [y2, maps] = attn.forward(x, Tensor(), /*need_weights=*/true);   // maps (B, 12, T, T)
//
//   nn::MultiheadAttention mha({.embed_dim = 512, .num_heads = 8, .batch_first = true});
//   auto [out, w] = mha.forward(q, k, v, pad);            // torch.nn.MultiheadAttention; w (B, L, S)
//
// SelfAttention is timm's vision_transformer.Attention: a packed "qkv" Linear (dim -> 3 dim, bias
// iff qkv_bias), heads split as qkv.reshape(B, T, 3, NH, HS).permute(2, 0, 3, 1, 4), attention
// dropout attn_drop (training only), then "proj" Linear and proj_drop. Parameter names are timm's
// (qkv.weight, qkv.bias, proj.weight, proj.bias), so "blocks.N.attn.qkv.weight" maps 1:1. Options
// for ablations that timm lacks: head_dim apart from C / NH; share_qk, where "qkv" is (2 NH HS, C) with
// rows [qk; v] and the keys are the queries (the logits of token i and j are then symmetric); scale
// (1.0: the logits without the 1/sqrt(HS) factor). Asking
// for weights takes the materialising (naive) attention path; otherwise `impl` picks (automatic:
// the fused kernel where it is faster).
//
// MultiheadAttention is torch.nn.MultiheadAttention (1.13) without add_bias_kv / add_zero_attn:
//   parameters  kdim == vdim == embed_dim: "in_proj_weight" (3E, E); otherwise "q_proj_weight"
//               (E, E), "k_proj_weight" (E, kdim), "v_proj_weight" (E, vdim); "in_proj_bias" (3E)
//               when bias; "out_proj.weight" (E, E), "out_proj.bias" (E).
//   init        as torch: xavier_uniform on the input projections, zero biases, out_proj.weight as
//               nn.Linear's default.
//   inputs      query (L, B, E) / key (S, B, kdim) / value (S, B, vdim), or (B, L, E) ... with
//               batch_first, or unbatched (L, E) ...
//   masks       key_padding_mask (B, S) (unbatched: (S)): u8 nonzero = padding, or additive float;
//               attn_mask (L, S) or (B·NH, L, S) (unbatched: (NH, L, S)): u8 nonzero = may NOT
//               attend, or additive float. Float masks have the query's dtype. Both are combined
//               (u8 or u8: or; float with u8: -inf where the u8 one is set; float + float: sum).
//   outputs     out like query; weights when need_weights: averaged over heads (B, L, S), or per
//               head (B, NH, L, S) with average_attn_weights = false; taken before dropout.
//   departure   a query row whose every key is masked gives zeros (torch 1.13 gives NaN).
// share_qk (no torch equivalent): W_K = W_Q, symmetric attention. The shared projection is
//   "qk_proj_weight" (E, E) (needs kdim == E) beside "v_proj_weight" (E, vdim), and "in_proj_bias"
//   is (2E) = [b_qk; b_v], so in self-attention the logits (W x_i + b)ᵀ(W x_j + b) are a symmetric
//   matrix. It equals a torch module whose k weight and bias are copies of q's.
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>

#include "attn/core/rng.h"
#include "attn/nn/dropout.h"
#include "attn/nn/linear.h"
#include "attn/nn/module.h"
#include "attn/ops/attention.h"

namespace attn::nn {

struct MultiHeadResult {
  Tensor out;
  Tensor weights;   // undefined unless need_weights
};

struct SelfAttentionOptions {
  int64_t dim = 0;                        // C
  int64_t num_heads = 8;                  // NH; C % NH == 0 unless head_dim is set
  int64_t head_dim = 0;                   // HS; 0: C / NH (qkv: C -> 3 NH HS, proj: NH HS -> C)
  bool share_qk = false;                  // one projection for queries and keys (see above)
  double scale = NAN;                     // the logits' factor; NaN: 1/sqrt(HS) (1.0: unscaled)
  bool qkv_bias = false;
  double attn_drop = 0.0;
  double proj_drop = 0.0;
  bool causal = false;                    // top-left causal mask (decoder self-attention)
  SdpaImpl impl = SdpaImpl::automatic;
  DType dtype = DType::f32;
};

class SelfAttention : public Module {
 public:
  // dropout_gen: the generator of both dropouts (null: default_generator()); must outlive the module.
  explicit SelfAttention(const SelfAttentionOptions& o, Generator& g = default_generator(),
                         Generator* dropout_gen = nullptr);
  // x (B, T, C); mask u8 (nonzero = may NOT attend) or additive float of x's dtype, broadcastable
  // to (B, NH, T, T) (e.g. (B, 1, 1, T) padding, (T, T), or a (NH, T, T) relative position bias).
  // -> out (B, T, C), weights (B, NH, T, T) when need_weights.
  MultiHeadResult forward(const Tensor& x, const Tensor& mask = Tensor(), bool need_weights = false) const;
  const SelfAttentionOptions& options() const { return opt_; }
  int64_t head_dim() const { return opt_.head_dim > 0 ? opt_.head_dim : opt_.dim / opt_.num_heads; }

 private:
  SelfAttentionOptions opt_;
  Generator* gen_;

 public:
  std::shared_ptr<Linear> qkv;
  std::shared_ptr<Linear> proj;
  std::shared_ptr<Dropout> proj_drop;
};

struct MultiheadAttentionOptions {
  int64_t embed_dim = 0;                  // E
  int64_t num_heads = 1;                  // NH; E % NH == 0
  double dropout = 0.0;                   // on the attention weights, training only
  bool bias = true;
  int64_t kdim = 0;                       // 0: embed_dim
  int64_t vdim = 0;                       // 0: embed_dim
  bool batch_first = false;
  bool share_qk = false;                  // W_K = W_Q (see above)
  SdpaImpl impl = SdpaImpl::automatic;
  DType dtype = DType::f32;
};

class MultiheadAttention : public Module {
 public:
  explicit MultiheadAttention(const MultiheadAttentionOptions& o, Generator& g = default_generator(),
                              Generator* dropout_gen = nullptr);
  // torch's argument order. Shapes above.
  MultiHeadResult forward(const Tensor& query, const Tensor& key, const Tensor& value,
                          const Tensor& key_padding_mask = Tensor(), bool need_weights = true,
                          const Tensor& attn_mask = Tensor(), bool average_attn_weights = true) const;
  void reset_parameters(Generator& g);
  const MultiheadAttentionOptions& options() const { return opt_; }

 private:
  MultiheadAttentionOptions opt_;
  Generator* gen_;

 public:
  Tensor& in_proj_weight;    // (3E, E), packed layout only
  Tensor& qk_proj_weight;    // (E, E), share_qk only
  Tensor& q_proj_weight;     // (E, E), separate layout only
  Tensor& k_proj_weight;     // (E, kdim), separate layout only
  Tensor& v_proj_weight;     // (E, vdim), separate layout or share_qk
  Tensor& in_proj_bias;      // (3E), (2E) with share_qk; undefined without bias
  std::shared_ptr<Linear> out_proj;
};

}  // namespace attn::nn

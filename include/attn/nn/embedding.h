// nn::Embedding: a lookup table, as torch.nn.Embedding (parameter "weight", init N(0, 1)).
//
//   nn::Embedding wte(50257, 768);
//   Tensor h = wte.forward(tokens);     // tokens (B, T) i64 -> (B, T, 768)
#pragma once
#include "attn/core/rng.h"
#include "attn/nn/module.h"

namespace attn::nn {

struct EmbeddingOptions {
  int64_t num_embeddings = 0;
  int64_t embedding_dim = 0;
  DType dtype = DType::f32;
};

class Embedding : public Module {
 public:
  explicit Embedding(const EmbeddingOptions& o, Generator& g = default_generator());
  Embedding(int64_t num_embeddings, int64_t embedding_dim, Generator& g = default_generator());
  // indices: i64 or i32, any shape (...) -> (..., embedding_dim)
  Tensor forward(const Tensor& indices) const;
  void reset_parameters(Generator& g);
  const EmbeddingOptions& options() const { return opt_; }

 private:
  EmbeddingOptions opt_;

 public:
  Tensor& weight;   // (num_embeddings, embedding_dim)
};

}  // namespace attn::nn

// nn::Embedding over attn::embedding.
#include "attn/nn/embedding.h"

#include "attn/nn/init.h"
#include "attn/ops/indexing.h"

namespace attn::nn {

namespace {
const EmbeddingOptions& checked(const EmbeddingOptions& o) {
  ATTN_CHECK(o.num_embeddings > 0 && o.embedding_dim > 0,
             "Embedding: expected positive num_embeddings and embedding_dim, got ", o.num_embeddings, " and ",
             o.embedding_dim);
  ATTN_CHECK(is_floating(o.dtype), "Embedding: expected a f32 or f64 dtype, got ", dtype_name(o.dtype));
  return o;
}
}  // namespace

Embedding::Embedding(const EmbeddingOptions& o, Generator& g)
    : opt_(checked(o)), weight(register_parameter("weight", Tensor::empty({o.num_embeddings, o.embedding_dim}, o.dtype))) {
  reset_parameters(g);
}

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, Generator& g)
    : Embedding(EmbeddingOptions{num_embeddings, embedding_dim, DType::f32}, g) {}

void Embedding::reset_parameters(Generator& g) { init::normal_(weight, g, 0.0, 1.0); }

Tensor Embedding::forward(const Tensor& indices) const { return embedding(weight, indices); }

}  // namespace attn::nn

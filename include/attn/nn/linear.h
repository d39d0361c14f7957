// nn::Linear: y = x Wᵀ + b, as torch.nn.Linear (same parameter names and default init).
//
//   nn::Linear fc(768, 3072);                       // weight (3072, 768), bias (3072)
//   Tensor y = fc.forward(x);                       // x: (..., 768) -> (..., 3072)
//   nn::Linear head({.in_features = 768, .out_features = 1000, .bias = false}, g);
//
// Default init (torch's reset_parameters): weight ~ kaiming_uniform(a = sqrt(5)), i.e.
// U(-1/sqrt(in), 1/sqrt(in)); bias ~ U(-1/sqrt(in), 1/sqrt(in)).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "attn/core/rng.h"
#include "attn/nn/embedding.h"
#include "attn/nn/module.h"

namespace attn::nn {

struct LinearOptions {
  int64_t in_features = 0;
  int64_t out_features = 0;
  bool bias = true;
  DType dtype = DType::f32;
};

class Linear : public Module {
 public:
  explicit Linear(const LinearOptions& o, Generator& g = default_generator());
  Linear(int64_t in_features, int64_t out_features, bool bias = true, Generator& g = default_generator());

  // x: (..., in_features) -> (..., out_features)
  Tensor forward(const Tensor& x) const;
  void reset_parameters(Generator& g);

  const LinearOptions& options() const { return opt_; }

 private:
  LinearOptions opt_;   // declared first: initialised before the parameters

 public:
  Tensor& weight;   // (out_features, in_features)
  Tensor& bias;     // (out_features), undefined without bias
};

// bf16 inference: converts the weight of every Linear in `m` (recursively) to bf16, in place; biases,
// norms, embeddings, tokens and convolutions stay f32, and activations stay f32 between the GEMMs
// (see attn::linear for the numerics). The module can then only run without gradients. Returns the
// number of bytes the weights shrank by.
int64_t convert_linear_weights_to_bf16(Module& m);

// The same for a module about to be loaded: every f32 Linear weight is replaced by an uninitialised
// bf16 tensor of its shape, so the load (Module::load_state_dict from a state dict or a file,
// models::load_foreign_vit) converts f32 -> bf16 tensor by tensor (copy_ rounds as .to(bf16)) and the
// f32 source weights are never held whole. The f32 allocations it frees are resident only if
// something wrote them (build the model under nn::init::SkipRandomInit(Fill::none)). Returns the bytes saved.
int64_t make_linear_weights_bf16(Module& m);

// int8 inference (attn/ops/quantize.h): quantizes the weight of every Linear in `m` (recursively) to
// i8 per output channel, in place, and registers its scales as the Linear's buffer "weight_scale" (so
// state_dict() saves "<name>.weight" I8 and "<name>.weight_scale" F32). Biases, norms, embeddings and
// convolutions stay as they are, and activations f32 between the GEMMs. A weight shared with another
// tensor (tied to an embedding) stays as it is, as does one already int8. `skip`: Linears to leave
// alone by their dotted names ("head", a classifier's last layer, say). The module can then only run
// without gradients. Returns the bytes the weights shrank by.
int64_t quantize_linear_weights_int8(Module& m, const std::vector<std::string>& skip = {});

// The embedding table at dotted name `name` in `m` in int8, one scale per row (per token), registered
// as the layer's buffer "weight_scale" as above; nn::Embedding::forward then gives f32 rows (codes ·
// scale). Linears of `m` tied to the table (an output layer sharing the word embeddings) are pointed
// at the int8 table too: they read its codes with the row scales as their per-output-channel scales.
// Left as it is (returning 0) when anything else shares the table. Returns the bytes saved.
int64_t quantize_embedding_int8(Module& m, const std::string& name);

// The same for a model about to load an int8 checkpoint: each Linear or Embedding whose dotted name
// `quantized` accepts gets an uninitialised i8 weight and f32 scales of its shape for the load to
// fill. Returns the number of layers made int8.
int64_t make_linear_weights_int8(Module& m, const std::function<bool(const std::string&)>& quantized);

// Inference: packs the weight of every Linear in `m` once into oneDNN's own layout for the GEMM, in
// place (no second copy), so that no forward pass re-packs it: 10-16% off an f32 GEMM at ViT's
// shapes, 12-29% off a bf16 one. f32, bf16 and int8 weights; a weight whose packed layout would differ in
// size (out_features not a multiple of the kernel's block, e.g. a 1,000-class head), that is shared
// with another tensor, or for which oneDNN offers no blocked layout (its AVX2 kernels: there the
// layout it prefers is only the transpose, and slower) stays as it is. A packed weight
// can only go through linear() without gradients; everything else that reads it (saving, printing,
// .to(), state_dict values) throws until unpack_linear_weights. Returns the number of weights packed.
int64_t pack_linear_weights(Module& m);
// Restores the plain (out, in) layout, bit for bit. Returns the number of weights unpacked.
int64_t unpack_linear_weights(Module& m);

}  // namespace attn::nn


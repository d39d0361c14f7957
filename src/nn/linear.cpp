// nn::Linear on attn::linear (oneDNN GEMM).
#include "attn/nn/linear.h"

#include <algorithm>
#include <cmath>

#include "attn/core/memory.h"
#include "attn/nn/init.h"
#include "attn/ops/matmul.h"
#include "attn/ops/quantize.h"

namespace attn::nn {

namespace {
const LinearOptions& checked(const LinearOptions& o) {
  ATTN_CHECK(o.in_features > 0 && o.out_features > 0, "Linear: expected positive in/out features, got in=",
             o.in_features, " out=", o.out_features);
  ATTN_CHECK(is_floating(o.dtype), "Linear: expected a f32 or f64 dtype, got ", dtype_name(o.dtype));
  return o;
}
}  // namespace

Linear::Linear(const LinearOptions& o, Generator& g)
    : opt_(checked(o)),
      weight(register_parameter("weight", Tensor::empty({o.out_features, o.in_features}, o.dtype))),
      bias(register_parameter("bias", o.bias ? Tensor::empty({o.out_features}, o.dtype) : Tensor())) {
  reset_parameters(g);
}

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, Generator& g)
    : Linear(LinearOptions{in_features, out_features, bias, DType::f32}, g) {}

void Linear::reset_parameters(Generator& g) {
  init::kaiming_uniform_(weight, g, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(double(weight.size(1)));
    init::uniform_(bias, g, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& x) const {
  ATTN_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), "Linear: expected input with last dim ",
             weight.size(1), ", got shape ", x.shape());
  return linear(x, weight, bias);
}

namespace {
// Every f32 Linear weight of `m` becomes bf16: rounded from its values (keep_values) or an empty
// tensor of its shape for a load to fill. Returns the bytes saved.
int64_t linear_weights_to_bf16(Module& m, const char* what, bool keep_values) {
  int64_t saved = 0;
  std::vector<std::pair<std::string, Module*>> mods{{"", &m}};
  for (auto& [name, mod] : m.named_modules()) mods.emplace_back(name, mod.get());
  for (auto& [name, mod] : mods) {
    auto* l = dynamic_cast<Linear*>(mod);
    if (!l || l->weight.dtype() == DType::bf16) continue;
    ATTN_CHECK(l->weight.dtype() == DType::f32, what, ": ", name.empty() ? "<root>" : name, ".weight is ",
               dtype_name(l->weight.dtype()), ", expected f32");
    saved += l->weight.numel() * 2;
    // The f32 storage is freed here unless something else holds it.
    l->weight = keep_values ? l->weight.detach().to(DType::bf16) : Tensor::empty(l->weight.shape(), DType::bf16);
    // Hand the freed f32 weight back at once (a freed block waits in the cache for its size class,
    // and the bf16 weights that follow are of other sizes), so the peak stays one weight above.
    if (l->weight.numel() * 4 >= (int64_t(1) << 20)) release_cached_memory();
  }
  return saved;
}
}  // namespace

int64_t convert_linear_weights_to_bf16(Module& m) {
  return linear_weights_to_bf16(m, "convert_linear_weights_to_bf16", /*keep_values=*/true);
}

int64_t make_linear_weights_bf16(Module& m) {
  return linear_weights_to_bf16(m, "make_linear_weights_bf16", /*keep_values=*/false);
}

namespace {
// Every Linear of `m` with its dotted name ("" for m itself).
std::vector<std::pair<std::string, Linear*>> named_linears(Module& m) {
  std::vector<std::pair<std::string, Linear*>> out;
  if (auto* l = dynamic_cast<Linear*>(&m)) out.emplace_back("", l);
  for (auto& [name, mod] : m.named_modules())
    if (auto* l = dynamic_cast<Linear*>(mod.get())) out.emplace_back(name, l);
  return out;
}

// Gives the layer (a Linear or an Embedding: its registered `weight`) the i8 weight and scales of `q`:
// the scales become its buffer "weight_scale", which the weight's storage refers to.
void set_int8(Module& layer, Tensor& weight, Int8Weight q) {
  weight = std::move(q.weight);
  Tensor& scale = layer.register_buffer("weight_scale", std::move(q.scale));
  set_int8_weight_scale(weight, scale);
}
}  // namespace

int64_t quantize_linear_weights_int8(Module& m, const std::vector<std::string>& skip) {
  int64_t saved = 0;
  for (auto& [name, l] : named_linears(m)) {
    if (l->weight.dtype() == DType::i8 || std::find(skip.begin(), skip.end(), name) != skip.end()) continue;
    // Tied or shared: the other holder (an embedding) reads the float values.
    if (l->weight.impl_ptr().use_count() != 1 || l->weight.impl().storage.use_count() != 1) continue;
    ATTN_CHECK(!l->weight.is_gemm_packed(), "quantize_linear_weights_int8: ", name.empty() ? "<root>" : name,
               ".weight is packed for the GEMM; quantize before nn::pack_linear_weights");
    const int64_t before = l->weight.numel() * int64_t(l->weight.element_size());
    Int8Weight q = quantize_weight_int8(l->weight);
    saved += before - l->weight.numel() - q.scale.numel() * 4;
    set_int8(*l, l->weight, std::move(q));
  }
  return saved;
}

namespace {
Embedding& embedding_at(Module& m, const std::string& name) {
  if (auto* e = dynamic_cast<Embedding*>(&m); e && name.empty()) return *e;
  for (auto& [n, mod] : m.named_modules())
    if (auto* e = dynamic_cast<Embedding*>(mod.get()); e && n == name) return *e;
  fail("quantize_embedding_int8: no Embedding named '", name, "'");
}

// The Linears of `m` whose weight is `table` (an output layer tied to an embedding).
std::vector<Linear*> tied_to(Module& m, const Tensor& table) {
  std::vector<Linear*> tied;
  for (auto& [n, l] : named_linears(m))
    if (l->weight.defined() && l->weight.is_same(table)) tied.push_back(l);
  return tied;
}

// Makes the table of `e` int8 with `make` (which replaces e.weight), keeping the Linears `tied` to the
// old table tied to the new one.
template <class Make>
void replace_table(Embedding& e, const std::vector<Linear*>& tied, Make make) {
  for (Linear* l : tied) l->weight = Tensor();
  make();
  for (Linear* l : tied) l->weight = e.weight;
}
}  // namespace

int64_t quantize_embedding_int8(Module& m, const std::string& name) {
  Embedding& e = embedding_at(m, name);
  if (e.weight.dtype() == DType::i8) return 0;
  const std::vector<Linear*> tied = tied_to(m, e.weight);
  if (e.weight.impl_ptr().use_count() != 1 + int64_t(tied.size()) || e.weight.impl().storage.use_count() != 1) return 0;
  const int64_t before = e.weight.numel() * int64_t(e.weight.element_size());
  int64_t saved = 0;
  replace_table(e, tied, [&] {
    Int8Weight q = quantize_weight_int8(e.weight);
    saved = before - e.weight.numel() - q.scale.numel() * 4;
    set_int8(e, e.weight, std::move(q));
  });
  return saved;
}

int64_t make_linear_weights_int8(Module& m, const std::function<bool(const std::string&)>& quantized) {
  int64_t n = 0;
  auto make = [&](Module& layer, Tensor& w) {
    set_int8(layer, w, {Tensor::empty(w.shape(), DType::i8), Tensor::ones({w.size(0)}, DType::f32)});
    ++n;
  };
  for (auto& [name, l] : named_linears(m))
    if (l->weight.dtype() != DType::i8 && quantized(name)) make(*l, l->weight);
  for (auto& [name, mod] : m.named_modules())
    if (auto* e = dynamic_cast<Embedding*>(mod.get()); e && e->weight.dtype() != DType::i8 && quantized(name))
      replace_table(*e, tied_to(m, e->weight), [&] { make(*e, e->weight); });
  return n;
}

namespace {
std::vector<Linear*> linears_of(Module& m) {
  std::vector<Linear*> out;
  if (auto* l = dynamic_cast<Linear*>(&m)) out.push_back(l);
  for (auto& [name, mod] : m.named_modules())
    if (auto* l = dynamic_cast<Linear*>(mod.get())) out.push_back(l);
  return out;
}
}  // namespace

int64_t pack_linear_weights(Module& m) {
  int64_t packed = 0;
  for (Linear* l : linears_of(m))
    if (pack_linear_weight(l->weight)) ++packed;   // declines tied or shared weights
  return packed;
}

int64_t unpack_linear_weights(Module& m) {
  int64_t n = 0;
  for (Linear* l : linears_of(m))
    if (l->weight.is_gemm_packed()) unpack_linear_weight(l->weight), ++n;
  return n;
}

}  // namespace attn::nn

// nn::Module: the base of every layer and model. Holds named parameters, buffers and submodules;
// names compose with '.' into checkpoint keys ("blocks.0.attn.qkv.weight").
//
//   struct Block : nn::Module {
//     std::shared_ptr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(64, 64));
//     Tensor& scale = register_parameter("scale", Tensor::ones({64}));
//     Tensor forward(const Tensor& x) { return fc->forward(x) * scale; }
//   };
//   Block b;  b.named_parameters();   // {"scale", ...}, {"fc.weight", ...}, {"fc.bias", ...}
//   b.load_state_dict(io::load_safetensors("b.safetensors").tensors);   // or streamed: io::SafetensorsReader
//
// Order is PyTorch's: a module's own parameters (in registration order), then each submodule's
// (in registration order), depth first. state_dict(): own parameters, own persistent buffers, then
// submodules. parameters()/named_parameters() list a tensor shared by two names (tied weights)
// once, under its first name; state_dict() lists every name.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attn/core/tensor.h"
#include "attn/io/safetensors.h"

namespace attn::nn {

// Where Module::load_state_dict reads from:
//   a state dict (const io::TensorList&)  copied from; the caller keeps it.
//   a state dict given up (io::TensorList&&, e.g. std::move(sd))  each entry is dropped once copied, so
//       a source's storage is freed as soon as nothing else holds it (the peak is the module plus
//       what the caller still holds, not the module plus the whole state dict).
//   a safetensors file (const io::SafetensorsReader&)  streamed: the keys and shapes are checked from
//       the header, then one tensor at a time is read, copied into its parameter or buffer and dropped
//       (peak memory: the module plus one tensor).
class StateSource {
 public:
  StateSource(const io::TensorList& sd) : list_(&sd) {}
  StateSource(io::TensorList&& sd) : given_(&sd) {}
  StateSource(const io::SafetensorsReader& file) : file_(&file) {}

 private:
  friend class Module;
  const io::TensorList* list_ = nullptr;
  io::TensorList* given_ = nullptr;
  const io::SafetensorsReader* file_ = nullptr;
};

struct LoadOptions {
  bool strict = true;        // every key of the module present, no other key (see load_state_dict)
  // Set: the module key each source key loads into, nullopt to leave the entry out (an attn checkpoint's
  // optimizer state; io::checkpoint_weight_key picks its model or EMA weights). Unset: keys as they are.
  std::function<std::optional<std::string>(const std::string&)> key;
};

class Module {
 public:
  Module() = default;
  virtual ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Registers a parameter (marks it requires_grad) / buffer / submodule under `name` (non-empty,
  // no '.', unique within this module). The returned reference stays valid for the module's life
  // and IS the registry entry: layers keep it as a `Tensor&` member, so assigning to it (weight
  // tying: head.weight = emb.weight) changes what the module lists. An undefined tensor registers
  // an absent parameter (as PyTorch's None: Linear without bias), left out of every listing.
  Tensor& register_parameter(const std::string& name, Tensor t);
  // Non-persistent buffers (caches, masks) are not part of state_dict().
  Tensor& register_buffer(const std::string& name, Tensor t, bool persistent = true);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, std::static_pointer_cast<Module>(m));
    return m;
  }

  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  // Every submodule, depth first, with its dotted name ("" for none: this module is not listed).
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules() const;
  int64_t num_parameters() const;

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Drops every parameter's gradient (as PyTorch's set_to_none=True).
  void zero_grad();
  // Converts every floating-point parameter and buffer, recursively, to `dt` (f32, f64 or bf16), as
  // PyTorch's module.to(dtype) / .double(): integer buffers (num_batches_tracked) are left alone,
  // parameters stay leaves that require grad (their gradients are dropped), and a tensor shared by
  // two names (tied weights) stays shared. Layers that hold derived copies of weights are not
  // refreshed: convert before the first forward.
  void to(DType dt);

  // Parameters and persistent buffers, detached views of the live storage.
  io::TensorList state_dict() const;
  // Copies values in place (converting dtype) from `from` (a state dict, a state dict given up with
  // std::move, or a safetensors file streamed; see StateSource). Every key and shape is checked
  // before anything is copied or read: strict (LoadOptions) gives one attn::Error listing every
  // missing, unexpected and mis-shaped key (with both shapes); not strict skips missing and
  // unexpected keys, mis-shaped keys are still an error. A repeated key: its first entry is loaded.
  //   m.load_state_dict(other.state_dict());
  //   m.load_state_dict(io::SafetensorsReader("m.safetensors"),
  //                     {.key = [](const std::string& k) { return io::checkpoint_weight_key(k, which); }});
  // Linear weights made bf16 first (nn::make_linear_weights_bf16) are converted tensor by tensor.
  void load_state_dict(StateSource from, const LoadOptions& options = {});
  // The mismatch report load_state_dict would give ("" when `sd` loads), listing at most
  // `max_listed` keys of each kind (0: all).
  std::string state_dict_mismatch(const io::TensorList& sd, bool strict = true, size_t max_listed = 0) const;
  // The same report for a state dict known by names and shapes only (nullopt: an undefined tensor),
  // e.g. from a safetensors header before any tensor is read.
  using ShapeList = std::vector<std::pair<std::string, std::optional<Shape>>>;
  std::string shape_mismatch(const ShapeList& shapes, bool strict = true, size_t max_listed = 0) const;

  // One line per parameter (name, shape, count) and a total line (used by `attn info`).
  std::string parameter_table() const;

 protected:
  // Called by train(on) on this module (after the flag is set), for layers that cache per mode.
  virtual void on_train(bool on) {}

 private:
  struct Entry {
    std::string name;
    Tensor tensor;
    bool persistent = true;
  };
  void add_child(const std::string& name, std::shared_ptr<Module> m);
  void check_new_name(const std::string& name, const char* what) const;
  void collect(const std::string& prefix, bool params, bool buffers, bool persistent_only, bool recurse,
               std::vector<std::pair<std::string, Tensor>>& out) const;

  std::deque<Entry> params_;    // deque: references returned by register_* stay valid
  std::deque<Entry> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace attn::nn

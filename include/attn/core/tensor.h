// Tensor: a typed, strided view over shared, 64-byte-aligned storage.
//
//   Tensor x = Tensor::randn({8, 197, 768});        // f32, from the global generator
//   Tensor y = x.transpose(1, 2);                   // a view: same storage, new strides
//   Tensor z = y.contiguous();                      // a copy, row-major
//   x.requires_grad_();  (x * x).sum().backward();  // x.grad() == 2x
//
// Row-major, PyTorch dimension order. Views share storage; in-place writes through a view are
// seen by every view of the storage. In-place methods (fill_, copy_, add_) do not record
// autograd history: they are for initialisation and optimizer updates under NoGradGuard.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include <iosfwd>

#include "attn/core/dtype.h"
#include "attn/core/error.h"

namespace attn {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);      // "[8, 197, 768]"
Shape contiguous_strides(const Shape& s);

// Owns one aligned allocation. Tensors hold it through shared_ptr.
struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  // Set while `data` holds a weight in the GEMM's own packed layout (nn::pack_linear_weights): opaque
  // to everything but attn::linear, so Tensor::data() / raw_data() refuse such a tensor.
  std::shared_ptr<const void> gemm_packed;
  // Set on the storage of an int8 weight (attn/ops/quantize.h): its per-output-channel scales, which
  // linear() reads with the weight; opaque here.
  std::shared_ptr<void> int8_weight;
  // The storage of a tensor made under a ShapesOnlyGuard: nothing allocated, `data` stays null.
  bool shapes_only = false;
  struct ShapesOnly {};
  explicit Storage(size_t nbytes);
  Storage(size_t nbytes, ShapesOnly) : nbytes(nbytes), shapes_only(true) {}
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

// While a ShapesOnlyGuard lives (on this thread), new tensors get their shapes, strides and dtypes
// but no storage: nothing is allocated, and writing into them does nothing (fill_, copy_, zeros,
// from_vector, arange and the nn::init initialisers, which draw nothing). Building a model under one
// gives every parameter's shape at no memory or time cost, to count (models::parameter_count) or
// describe (`attn info`) a model of any size. Reading such a tensor, or computing with it, is an
// attn::Error naming the guard; it stays shapes-only after the guard ends.
//
//   { ShapesOnlyGuard shapes; n = models::create("vit_huge_patch14_224")->num_parameters(); }   // 632M, no bytes
class ShapesOnlyGuard {
 public:
  ShapesOnlyGuard();
  ~ShapesOnlyGuard();
  ShapesOnlyGuard(const ShapesOnlyGuard&) = delete;
  ShapesOnlyGuard& operator=(const ShapesOnlyGuard&) = delete;
};
bool shapes_only_mode();   // inside a ShapesOnlyGuard on this thread

namespace autograd { struct Node; }

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;            // in elements
  int64_t offset = 0;       // in elements
  DType dtype = DType::f32;
  bool requires_grad = false;
  bool retains_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<autograd::Node> grad_fn;   // null for leaves
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- creation ----
  static Tensor empty(const Shape& shape, DType dtype = DType::f32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  static Tensor ones(const Shape& shape, DType dtype = DType::f32);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
  static Tensor scalar(double value, DType dtype = DType::f32);   // 0-d
  static Tensor arange(int64_t n, DType dtype = DType::i64);
  // From the global generator (see core/rng.h for explicit generators).
  static Tensor rand(const Shape& shape, DType dtype = DType::f32);    // U[0, 1)
  static Tensor randn(const Shape& shape, DType dtype = DType::f32);   // N(0, 1)
  template <class T>
  static Tensor from_vector(const std::vector<T>& v, const Shape& shape);

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  int64_t dim() const { return int64_t(impl().shape.size()); }
  int64_t size(int64_t d) const;       // negative d counts from the end
  int64_t stride(int64_t d) const;
  int64_t numel() const { return shape_numel(impl().shape); }
  int64_t offset() const { return impl().offset; }
  DType dtype() const { return impl().dtype; }
  size_t element_size() const { return dtype_size(dtype()); }
  bool is_contiguous() const;
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  bool shares_storage(const Tensor& o) const;

  // Typed pointer to element 0 of this view; throws if T does not match dtype().
  template <class T> T* data() const;
  void* raw_data() const;
  // True while the storage holds a GEMM-packed weight (see Storage::gemm_packed).
  bool is_gemm_packed() const { return impl().storage && impl().storage->gemm_packed != nullptr; }
  // True for a tensor made under a ShapesOnlyGuard (and its views): no values, shapes only.
  bool is_shapes_only() const { return impl().storage && impl().storage->shapes_only; }

  // ---- autograd ----
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& requires_grad_(bool on = true);
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  Tensor grad() const;                 // undefined until a backward pass reaches it
  void set_grad(const Tensor& g);
  void zero_grad();                    // drops the gradient (as set_to_none=True)
  void retain_grad();                  // keep .grad() on a non-leaf
  const std::shared_ptr<autograd::Node>& grad_fn() const { return impl().grad_fn; }
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;
  Tensor detach() const;               // same storage, no history

  // ---- views (no copy) and copies; all record autograd ----
  Tensor view(const Shape& shape) const;        // requires compatible strides; -1 infers
  Tensor reshape(const Shape& shape) const;     // view when possible, else copy
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const { return transpose(0, 1); }
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const { return slice(dim, start, start + length); }
  Tensor select(int64_t dim, int64_t index) const;   // drops dim
  Tensor expand(const Shape& shape) const;           // -1 keeps a size; new leading dims allowed
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor contiguous() const;                         // self if already contiguous
  Tensor clone() const;                              // always a fresh contiguous copy
  Tensor to(DType dtype) const;                      // conversion (differentiable between f32/f64)

  // ---- in-place, no autograd ----
  Tensor& fill_(double value);
  Tensor& copy_(const Tensor& src);                  // src broadcast to this shape, converted
  Tensor& zero_() { return fill_(0.0); }

  // ---- reading ----
  double item() const;                               // numel must be 1
  double at(const std::vector<int64_t>& index) const;
  template <class T> std::vector<T> to_vector() const;   // contiguous copy, converted to T
  std::string str(int64_t max_per_dim = 6) const;

  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Throws if t's storage cannot be read as plain values: it holds a GEMM-packed weight
// (Storage::gemm_packed), or nothing (a shapes-only tensor, see ShapesOnlyGuard). For kernels that read
// storage->data directly rather than through Tensor::data().
void check_not_gemm_packed(const Tensor& t);

// Makes a tensor that views `base`'s storage with the given geometry (no autograd).
Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset);

}  // namespace attn

// Tensor storage, creation, metadata, reading and printing. Views live in src/ops/shape_ops.cpp.
#include "attn/core/tensor.h"

#include <cmath>
#include <cstring>
#include <malloc.h>
#include <functional>
#include <cstdlib>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "attn/autograd/grad_mode.h"
#include "attn/autograd/node.h"
#include "attn/core/memory.h"
#include "attn/core/rng.h"
#include "strided.h"

namespace attn {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
    case DType::i8: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
    case DType::i8: return "i8";
  }
  return "?";
}

bool is_floating(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::bf16; }

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) { return detail::cat(s); }

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (int64_t i = int64_t(s.size()) - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= std::max<int64_t>(s[i], 1);
  }
  return st;
}

namespace {
// Training allocates and frees the same activation buffers every step. glibc serves blocks over
// 128 KiB with fresh mmap()s, so every step would page-fault its memory in again (about a tenth of
// a ViT training step in profiles). Tensors of 1 MiB and more come from attn's block cache
// (src/core/memory.cpp); for those between 128 KiB and 1 MiB, raising the mmap threshold keeps them
// in the heap for reuse, and trimming is raised with it so freed memory is not handed back at once.
[[maybe_unused]] const bool g_malloc_tuned = [] {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 512 << 20);
  mallopt(M_TRIM_THRESHOLD, 1024 << 20);
#endif
  return true;
}();

// What Storage allocates for n bytes: a whole number of 64-byte lines, at least one.
size_t storage_bytes(size_t n) { return n == 0 ? 64 : (n + 63) / 64 * 64; }

}  // namespace

namespace {
thread_local int g_shapes_only_depth = 0;
}  // namespace

ShapesOnlyGuard::ShapesOnlyGuard() { ++g_shapes_only_depth; }
ShapesOnlyGuard::~ShapesOnlyGuard() { --g_shapes_only_depth; }
bool shapes_only_mode() { return g_shapes_only_depth > 0; }

void check_not_gemm_packed(const Tensor& t) {
  if (t.is_shapes_only())
    fail("Tensor: this ", dtype_name(t.dtype()), " tensor of shape ", t.shape(),
         " has shapes only (it was made under an attn::ShapesOnlyGuard, e.g. by models::parameter_count or "
         "models::create_shapes_only): it holds no values to read or compute with");
  if (t.impl().storage && t.impl().storage->gemm_packed)
    fail("Tensor: this ", dtype_name(t.dtype()), " tensor of shape ", t.shape(),
         " holds a weight packed for the GEMM (nn::pack_linear_weights), which only linear() can read; "
         "unpack it first (nn::unpack_linear_weights)");
}

Storage::Storage(size_t n) : nbytes(n) {
  data = detail::storage_alloc(storage_bytes(n));
  detail::note_storage_alloc(storage_bytes(n));
}

Storage::~Storage() {
  if (shapes_only) return;
  detail::storage_free(data, storage_bytes(nbytes));
  detail::note_storage_free(storage_bytes(nbytes));
}

TensorImpl& Tensor::impl() const {
  if (!impl_) fail("Tensor: use of an undefined tensor");
  return *impl_;
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  // Every dim >= 0, and the strides (products of max(d, 1)) and byte size must fit: an empty
  // tensor with huge other dims would otherwise overflow its strides.
  int64_t span = 1;
  for (int64_t d : shape) {
    ATTN_CHECK(d >= 0, "Tensor::empty: negative dimension in shape ", shape);
    const int64_t m = std::max<int64_t>(d, 1);
    ATTN_CHECK(span <= (int64_t(1) << 62) / m / int64_t(dtype_size(dtype)), "Tensor::empty: shape ", shape,
               " is too large");
    span *= m;
  }
  auto impl = std::make_shared<TensorImpl>();
  const size_t nbytes = size_t(shape_numel(shape)) * dtype_size(dtype);
  impl->storage = shapes_only_mode() ? std::make_shared<Storage>(nbytes, Storage::ShapesOnly{})
                                     : std::make_shared<Storage>(nbytes);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  if (!t.is_shapes_only()) std::memset(t.raw_data(), 0, size_t(t.numel()) * dtype_size(dtype));
  return t;
}

Tensor Tensor::ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.fill_(value);
  return t;
}

Tensor Tensor::scalar(double value, DType dtype) { return full({}, value, dtype); }

Tensor Tensor::arange(int64_t n, DType dtype) {
  Tensor t = empty({n}, dtype);
  if (t.is_shapes_only()) return t;
  if (dtype == DType::bf16) {
    auto* p = t.data<bf16>();
    for (int64_t i = 0; i < n; ++i) p[i] = bf16::from_float(float(i));
    return t;
  }
  ATTN_DISPATCH_ALL(dtype, "arange", [&] {
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = T(i);
  });
  return t;
}

Tensor Tensor::rand(const Shape& shape, DType dtype) { return attn::rand(shape, default_generator(), dtype); }
Tensor Tensor::randn(const Shape& shape, DType dtype) { return attn::randn(shape, default_generator(), dtype); }

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& v, const Shape& shape) {
  ATTN_CHECK(int64_t(v.size()) == shape_numel(shape), "Tensor::from_vector: ", v.size(),
             " values do not fill shape ", shape, " (", shape_numel(shape), " elements)");
  Tensor t = empty(shape, dtype_of<T>::value);
  if (!v.empty() && !t.is_shapes_only()) std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(T));
  return t;
}
template Tensor Tensor::from_vector(const std::vector<float>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<double>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<int32_t>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<int64_t>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<uint8_t>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<bf16>&, const Shape&);

static int64_t wrap_dim(int64_t d, int64_t n, const char* op) {
  int64_t r = d < 0 ? d + n : d;
  ATTN_CHECK(r >= 0 && r < std::max<int64_t>(n, 1), op, ": dim ", d, " is out of range for a ", n,
             "-d tensor");
  return r;
}

int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), "stride")]; }

bool Tensor::is_contiguous() const {
  int64_t expect = 1;
  for (int64_t i = dim() - 1; i >= 0; --i) {
    if (shape()[i] == 1) continue;
    if (strides()[i] != expect) return false;
    expect *= shape()[i];
  }
  return true;
}

bool Tensor::shares_storage(const Tensor& o) const {
  return defined() && o.defined() && impl().storage == o.impl().storage;
}

template <class T>
T* Tensor::data() const {
  ATTN_CHECK(dtype() == dtype_of<T>::value, "Tensor::data: tensor is ", dtype_name(dtype()),
             ", accessed as ", dtype_name(dtype_of<T>::value));
  check_not_gemm_packed(*this);
  return static_cast<T*>(impl().storage->data) + impl().offset;
}
template float* Tensor::data<float>() const;
template double* Tensor::data<double>() const;
template bf16* Tensor::data<bf16>() const;
template int32_t* Tensor::data<int32_t>() const;
template int64_t* Tensor::data<int64_t>() const;
template uint8_t* Tensor::data<uint8_t>() const;
template int8_t* Tensor::data<int8_t>() const;

void* Tensor::raw_data() const {
  check_not_gemm_packed(*this);
  return static_cast<char*>(impl().storage->data) + impl().offset * int64_t(element_size());
}

Tensor& Tensor::requires_grad_(bool on) {
  ATTN_CHECK(!on || is_floating(dtype()), "requires_grad_: only floating tensors can require "
             "grad, got ", dtype_name(dtype()));
  ATTN_CHECK(is_leaf() || on, "requires_grad_: cannot turn off grad on a non-leaf (use detach())");
  impl().requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const { return impl().grad ? Tensor(impl().grad) : Tensor(); }

void Tensor::set_grad(const Tensor& g) {
  if (!g.defined()) { impl().grad.reset(); return; }
  ATTN_CHECK(g.shape() == shape(), "set_grad: gradient shape ", g.shape(),
             " does not match tensor shape ", shape());
  impl().grad = g.impl_ptr();
}

void Tensor::zero_grad() { impl().grad.reset(); }

void Tensor::retain_grad() {
  if (is_leaf()) return;
  impl().retains_grad = true;
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  autograd::run_backward(*this, grad, retain_graph);
}

Tensor Tensor::detach() const {
  auto impl2 = std::make_shared<TensorImpl>();
  impl2->storage = impl().storage;
  impl2->shape = shape();
  impl2->strides = strides();
  impl2->offset = offset();
  impl2->dtype = dtype();
  return Tensor(std::move(impl2));
}

Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl().storage;
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

// Reads element at storage offset `off` of any dtype as double.
static double load_as_double(const void* base, DType dt, int64_t off) {
  switch (dt) {
    case DType::f32: return static_cast<const float*>(base)[off];
    case DType::f64: return static_cast<const double*>(base)[off];
    case DType::bf16: return static_cast<const bf16*>(base)[off].to_float();
    case DType::i32: return static_cast<const int32_t*>(base)[off];
    case DType::i64: return double(static_cast<const int64_t*>(base)[off]);
    case DType::u8: return static_cast<const uint8_t*>(base)[off];
    case DType::i8: return static_cast<const int8_t*>(base)[off];
  }
  return 0;
}

double Tensor::at(const std::vector<int64_t>& index) const {
  ATTN_CHECK(int64_t(index.size()) == dim(), "Tensor::at: ", index.size(), " indices for a ", dim(),
             "-d tensor of shape ", shape());
  int64_t off = offset();
  for (int64_t i = 0; i < dim(); ++i) {
    ATTN_CHECK(index[i] >= 0 && index[i] < shape()[i], "Tensor::at: index ", index[i],
               " out of range for dim ", i, " of size ", shape()[i]);
    off += index[i] * strides()[i];
  }
  check_not_gemm_packed(*this);
  return load_as_double(impl().storage->data, dtype(), off);
}

double Tensor::item() const {
  ATTN_CHECK(numel() == 1, "item: expected a tensor with one element, got shape ", shape());
  check_not_gemm_packed(*this);
  return load_as_double(impl().storage->data, dtype(), offset());
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = to(dtype_of<T>::value).contiguous();
  const T* p = c.data<T>();
  return std::vector<T>(p, p + c.numel());
}
template std::vector<float> Tensor::to_vector() const;
template std::vector<double> Tensor::to_vector() const;
template std::vector<int32_t> Tensor::to_vector() const;
template std::vector<int64_t> Tensor::to_vector() const;
template std::vector<uint8_t> Tensor::to_vector() const;

Tensor& Tensor::fill_(double value) {
  const int64_t n = numel();
  if (n == 0 || is_shapes_only()) return *this;
  check_not_gemm_packed(*this);
  DType dt = dtype();
  Shape st = strides();
  detail::for_each_offset(shape(), st, offset(), [&](int64_t off) {
    void* base = impl().storage->data;
    switch (dt) {
      case DType::f32: static_cast<float*>(base)[off] = float(value); break;
      case DType::f64: static_cast<double*>(base)[off] = value; break;
      case DType::bf16: static_cast<bf16*>(base)[off] = bf16::from_float(float(value)); break;
      case DType::i32: static_cast<int32_t*>(base)[off] = int32_t(value); break;
      case DType::i64: static_cast<int64_t*>(base)[off] = int64_t(value); break;
      case DType::u8: static_cast<uint8_t*>(base)[off] = uint8_t(value); break;
      case DType::i8: static_cast<int8_t*>(base)[off] = int8_t(value); break;
    }
  });
  return *this;
}

std::string Tensor::str(int64_t max_per_dim) const {
  std::ostringstream os;
  if (!defined()) return "Tensor(undefined)";
  os << "Tensor(" << dtype_name(dtype()) << ", shape=" << shape_str(shape());
  if (requires_grad()) os << ", requires_grad";
  os << ")\n";
  const bool fl = is_floating(dtype());
  std::vector<int64_t> idx;
  // Recursive printer with elision: the first and last max_per_dim/2 entries of each dim.
  std::function<void(int64_t, int)> rec = [&](int64_t d, int indent) {
    if (d == dim()) {
      double v = at(idx);
      if (fl) os << std::setw(11) << std::setprecision(5) << v;
      else os << int64_t(v);
      return;
    }
    os << '[';
    int64_t n = shape()[d];
    int64_t half = std::max<int64_t>(max_per_dim / 2, 1);
    for (int64_t i = 0; i < n; ++i) {
      if (n > max_per_dim && i == half) {
        if (d + 1 == dim()) {
          os << " ...";
        } else {
          os << '\n';
          for (int k = 0; k <= indent; ++k) os << ' ';
          os << "...";
        }
        i = n - half - 1;
        continue;
      }
      if (i > 0) {
        os << (d + 1 == dim() ? "," : ",\n");
        if (d + 1 != dim())
          for (int k = 0; k <= indent; ++k) os << ' ';
        else if (!fl) os << ' ';
      }
      idx.push_back(i);
      rec(d + 1, indent + 1);
      idx.pop_back();
    }
    os << ']';
  };
  rec(0, 0);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace attn

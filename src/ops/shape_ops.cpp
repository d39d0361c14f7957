// Views (reshape, permute, slice, expand, ...) and copies (contiguous, clone, to, copy_), each
// with its backward. Views share storage and never copy.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>

#include "attn/autograd/grad_mode.h"
#include "attn/autograd/node.h"
#include "attn/core/profile.h"
#include "attn/ops/reduce.h"
#include "../backend/cpu/convert_kernels.h"
#include "../core/strided.h"

namespace attn {

namespace {

int64_t wrap(int64_t d, int64_t n, const char* op, const Shape& shape) {
  int64_t r = d < 0 ? d + n : d;
  ATTN_CHECK(r >= 0 && r < n, op, ": dim ", d, " is out of range for shape ", shape);
  return r;
}

Shape infer_shape(const Shape& want, int64_t numel, const char* op, const Shape& from) {
  Shape s = want;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      ATTN_CHECK(infer < 0, op, ": only one dimension can be -1, got ", want);
      infer = int64_t(i);
    } else {
      ATTN_CHECK(s[i] >= 0, op, ": invalid size in shape ", want);
      known *= s[i];
    }
  }
  if (infer >= 0) {
    ATTN_CHECK(known > 0 && numel % known == 0, op, ": shape ", want, " is invalid for input of shape ",
               from, " (", numel, " elements)");
    s[infer] = numel / known;
  }
  ATTN_CHECK(shape_numel(s) == numel, op, ": shape ", want, " is invalid for input of shape ", from,
             " (", numel, " elements)");
  return s;
}

// Strides for viewing (shape, strides) as new_shape without copying, or empty if impossible.
// Same algorithm as PyTorch's computeStride: match chunks of contiguous dims.
bool view_strides(const Shape& old_shape, const Shape& old_strides, const Shape& new_shape, Shape& out) {
  out.assign(new_shape.size(), 0);
  if (shape_numel(old_shape) <= 1) { out = contiguous_strides(new_shape); return true; }
  int64_t view_d = int64_t(new_shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.empty() ? 1 : old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = int64_t(old_shape.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_shape[tensor_d];
    if (tensor_d == 0 || (old_shape[tensor_d - 1] != 1 &&
                          old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return false;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

struct ReshapeNode : autograd::Node {
  Shape in_shape;
  const char* name() const override { return "reshape"; }
  std::vector<Tensor> backward(const Tensor& dout) override { return {dout.reshape(in_shape)}; }
};

struct PermuteNode : autograd::Node {
  std::vector<int64_t> inverse;
  const char* name() const override { return "permute"; }
  std::vector<Tensor> backward(const Tensor& dout) override { return {dout.permute(inverse)}; }
};

struct SliceNode : autograd::Node {
  Shape in_shape;
  DType in_dtype;
  int64_t dim, start, end, step;
  const char* name() const override { return "slice"; }
  bool grad_is_view() const override { return true; }
  Tensor input_grad_view(const Tensor& grad) const override { return grad.slice(dim, start, end, step); }
  std::vector<Tensor> backward(const Tensor& dout) override {
    Tensor dx = Tensor::zeros(in_shape, in_dtype);
    Tensor part = dx.slice(dim, start, end, step);
    part.copy_(dout);
    return {dx};
  }
};

struct SelectNode : autograd::Node {
  Shape in_shape;
  DType in_dtype;
  int64_t dim, index;
  const char* name() const override { return "select"; }
  bool grad_is_view() const override { return true; }
  Tensor input_grad_view(const Tensor& grad) const override { return grad.select(dim, index); }
  std::vector<Tensor> backward(const Tensor& dout) override {
    Tensor dx = Tensor::zeros(in_shape, in_dtype);
    Tensor part = dx.select(dim, index);
    part.copy_(dout);
    return {dx};
  }
};

struct ExpandNode : autograd::Node {
  Shape in_shape;
  const char* name() const override { return "expand"; }
  std::vector<Tensor> backward(const Tensor& dout) override { return {sum_to(dout, in_shape)}; }
};

struct IdentityNode : autograd::Node {
  const char* name() const override { return "clone"; }
  std::vector<Tensor> backward(const Tensor& dout) override { return {dout}; }
};

struct ToNode : autograd::Node {
  DType in_dtype;
  const char* name() const override { return "to"; }
  std::vector<Tensor> backward(const Tensor& dout) override { return {dout.to(in_dtype)}; }
};

template <class NodeT>
Tensor with_node(Tensor out, const Tensor& in, std::shared_ptr<NodeT> n) {
  autograd::attach(out, std::move(n), {in});
  return out;
}

}  // namespace

Tensor Tensor::view(const Shape& shape_in) const {
  Shape s = infer_shape(shape_in, numel(), "view", shape());
  Shape st;
  ATTN_CHECK(view_strides(shape(), strides(), s, st), "view: shape ", shape_in,
             " is not compatible with the strides of input shape ", shape(), " (strides ", strides(),
             "); use reshape()");
  Tensor out = make_view(*this, s, st, offset());
  if (autograd::needs_grad({*this})) {
    auto n = std::make_shared<ReshapeNode>();
    n->in_shape = shape();
    return with_node(out, *this, n);
  }
  return out;
}

Tensor Tensor::reshape(const Shape& shape_in) const {
  Shape s = infer_shape(shape_in, numel(), "reshape", shape());
  Shape st;
  if (view_strides(shape(), strides(), s, st)) return view(s);
  return contiguous().view(s);
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  if (dim() == 0) return reshape({1});
  start = wrap(start, dim(), "flatten", shape());
  end = wrap(end, dim(), "flatten", shape());
  ATTN_CHECK(start <= end, "flatten: start dim ", start, " is after end dim ", end);
  Shape s(shape().begin(), shape().begin() + start);
  int64_t m = 1;
  for (int64_t i = start; i <= end; ++i) m *= shape()[i];
  s.push_back(m);
  s.insert(s.end(), shape().begin() + end + 1, shape().end());
  return reshape(s);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  ATTN_CHECK(int64_t(dims.size()) == dim(), "permute: expected ", dim(), " dims for shape ", shape(),
             ", got ", dims);
  Shape s(dim()), st(dim());
  std::vector<int64_t> inverse(dim(), -1);
  for (int64_t i = 0; i < dim(); ++i) {
    int64_t d = wrap(dims[i], dim(), "permute", shape());
    ATTN_CHECK(inverse[d] < 0, "permute: dim ", d, " repeated in ", dims);
    inverse[d] = i;
    s[i] = shape()[d];
    st[i] = strides()[d];
  }
  Tensor out = make_view(*this, s, st, offset());
  if (autograd::needs_grad({*this})) {
    auto n = std::make_shared<PermuteNode>();
    n->inverse = inverse;
    return with_node(out, *this, n);
  }
  return out;
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  std::vector<int64_t> p(dim());
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[wrap(d0, dim(), "transpose", shape())], p[wrap(d1, dim(), "transpose", shape())]);
  return permute(p);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = wrap(d, dim(), "slice", shape());
  ATTN_CHECK(step > 0, "slice: step must be positive, got ", step);
  const int64_t n = shape()[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape s = shape(), st = strides();
  s[d] = (end - start + step - 1) / step;
  st[d] = strides()[d] * step;
  Tensor out = make_view(*this, s, st, offset() + start * strides()[d]);
  if (autograd::needs_grad({*this})) {
    auto nd = std::make_shared<SliceNode>();
    nd->in_shape = shape();
    nd->in_dtype = dtype();
    nd->dim = d; nd->start = start; nd->end = end; nd->step = step;
    return with_node(out, *this, nd);
  }
  return out;
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = wrap(d, dim(), "select", shape());
  const int64_t n = shape()[d];
  ATTN_CHECK(index >= -n && index < n, "select: index ", index, " is out of range for dim ", d,
             " of size ", n, " (shape ", shape(), ")");
  if (index < 0) index += n;
  Shape s = shape(), st = strides();
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  Tensor out = make_view(*this, s, st, offset() + index * strides()[d]);
  if (autograd::needs_grad({*this})) {
    auto nd = std::make_shared<SelectNode>();
    nd->in_shape = shape();
    nd->in_dtype = dtype();
    nd->dim = d; nd->index = index;
    return with_node(out, *this, nd);
  }
  return out;
}

Tensor Tensor::expand(const Shape& shape_in) const {
  ATTN_CHECK(int64_t(shape_in.size()) >= dim(), "expand: target shape ", shape_in,
             " has fewer dims than the input shape ", shape());
  const int64_t lead = int64_t(shape_in.size()) - dim();
  Shape s(shape_in.size()), st(shape_in.size());
  for (int64_t i = 0; i < int64_t(shape_in.size()); ++i) {
    if (i < lead) {
      ATTN_CHECK(shape_in[i] >= 0, "expand: cannot use -1 for a new leading dim in ", shape_in);
      s[i] = shape_in[i];
      st[i] = 0;
      continue;
    }
    const int64_t have = shape()[i - lead];
    const int64_t want = shape_in[i] == -1 ? have : shape_in[i];
    ATTN_CHECK(have == want || have == 1, "expand: cannot expand shape ", shape(), " to ", shape_in,
               " (dim ", i, ": ", have, " vs ", want, ")");
    s[i] = want;
    st[i] = have == want ? strides()[i - lead] : 0;
  }
  if (s == shape()) return *this;
  Tensor out = make_view(*this, s, st, offset());
  if (autograd::needs_grad({*this})) {
    auto n = std::make_shared<ExpandNode>();
    n->in_shape = shape();
    return with_node(out, *this, n);
  }
  return out;
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap(d, dim(), "squeeze", shape());
  if (shape()[d] != 1) return *this;
  Shape s = shape();
  s.erase(s.begin() + d);
  return view(s);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  const int64_t n = dim() + 1;
  if (d < 0) d += n;
  ATTN_CHECK(d >= 0 && d < n, "unsqueeze: dim out of range for shape ", shape());
  Shape s = shape();
  s.insert(s.begin() + d, 1);
  return view(s);
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  ATTN_PROFILE("copy");
  Tensor out = Tensor::empty(shape(), dtype());
  out.copy_(detach());
  if (autograd::needs_grad({*this})) return with_node(out, *this, std::make_shared<IdentityNode>());
  return out;
}

Tensor Tensor::to(DType dt) const {
  ATTN_PROFILE("convert dtype");
  if (dt == dtype()) return *this;
  Tensor out = Tensor::empty(shape(), dt);
  out.copy_(detach());
  if (is_floating(dt) && autograd::needs_grad({*this})) {
    auto n = std::make_shared<ToNode>();
    n->in_dtype = dtype();
    return with_node(out, *this, n);
  }
  return out;
}

namespace {
// Floating point to integer. C++ leaves out-of-range conversions undefined (clang's UBSan reports
// them); this is what x86's truncating conversions give, and so PyTorch and NumPy there: toward zero;
// i64 from a 64-bit conversion, i32 and u8 from a 32-bit one (u8 then wraps modulo 256); NaN and
// values out of the conversion's range give its minimum (INT64_MIN / INT32_MIN, so 0 for u8).
template <class D, class F>
D float_to_int(F v) {
  if constexpr (sizeof(D) == 8) {
    const bool in = v >= F(-9223372036854775808.0) && v < F(9223372036854775808.0);
    return in ? D(v) : D(INT64_MIN);
  } else {
    const bool in = v >= F(-2147483648.0) && v < F(2147483648.0);
    return D(in ? int32_t(v) : INT32_MIN);
  }
}

template <class D, class S>
D convert(S v) {
  if constexpr (std::is_same_v<D, bf16>) {
    if constexpr (std::is_same_v<S, bf16>) return v;
    else return bf16::from_float(float(v));
  } else if constexpr (std::is_same_v<S, bf16>) {
    return convert<D>(v.to_float());
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>) {
    return float_to_int<D>(v);
  } else {
    return D(v);
  }
}

template <class S>
void copy_from(Tensor& dst, const Tensor& src) {
  check_not_gemm_packed(src);
  check_not_gemm_packed(dst);
  auto go = [&](auto* dp) {
    using D = std::remove_pointer_t<decltype(dp)>;
    const S* sp = static_cast<const S*>(src.impl().storage->data);
    D* db = static_cast<D*>(dst.impl().storage->data);
    if (dst.is_contiguous() && src.is_contiguous() && src.shape() == dst.shape()) {
      const S* s0 = sp + src.offset();
      D* d0 = db + dst.offset();
      const int64_t n = dst.numel();
      if constexpr (std::is_same_v<S, D>) {
        std::memcpy(d0, s0, size_t(n) * sizeof(S));
      } else if constexpr ((std::is_same_v<S, float> && std::is_same_v<D, bf16>) ||
                           (std::is_same_v<S, bf16> && std::is_same_v<D, float>)) {
        // The vector kernels: a memory-bound pass, on one thread up to 256K elements (a parallel
        // region costs more than such a pass saves, see docs/design.md).
        const auto& k = kernels::convert_kernels();
        // (The casts type-check for every S and D: clang 14 checks this lambda's body in the discarded
        // branches too.)
        const void* src = s0;
        void* dst = d0;
        parallel_for(0, n, int64_t(1) << 18, [&](int64_t b, int64_t e) {
          if constexpr (std::is_same_v<D, bf16>)
            k.f32_to_bf16(static_cast<const float*>(src) + b, static_cast<uint16_t*>(dst) + b, e - b);
          else
            k.bf16_to_f32(static_cast<const uint16_t*>(src) + b, static_cast<float*>(dst) + b, e - b);
        });
      } else {
        parallel_for(0, n, 65536, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) d0[i] = convert<D>(s0[i]);
        });
      }
      return;
    }
    detail::for_each_row<2>(dst.shape(), {&dst.strides(), &src.strides()}, {dst.offset(), src.offset()},
                            [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
                              D* d = db + off[0];
                              const S* s = sp + off[1];
                              if (st[0] == 1 && st[1] == 1) {
                                if constexpr (std::is_same_v<S, D>) {
                                  if (n >= 16) std::memcpy(d, s, size_t(n) * sizeof(S));
                                  else for (int64_t i = 0; i < n; ++i) d[i] = s[i];   // short rows: no call
                                } else if constexpr (std::is_same_v<S, float> && std::is_same_v<D, bf16>) {
                                  // (the heads of a packed projection rounded for a bf16 GEMM)
                                  const void* sv = s;
                                  kernels::convert_kernels().f32_to_bf16(static_cast<const float*>(sv),
                                                                         reinterpret_cast<uint16_t*>(d), n);
                                } else if constexpr (std::is_same_v<S, bf16> && std::is_same_v<D, float>) {
                                  void* dv = d;
                                  kernels::convert_kernels().bf16_to_f32(reinterpret_cast<const uint16_t*>(s),
                                                                         static_cast<float*>(dv), n);
                                } else for (int64_t i = 0; i < n; ++i) d[i] = convert<D>(s[i]);
                              } else if (st[0] == 1) {
                                for (int64_t i = 0; i < n; ++i) d[i] = convert<D>(s[i * st[1]]);
                              } else {
                                for (int64_t i = 0; i < n; ++i) d[i * st[0]] = convert<D>(s[i * st[1]]);
                              }
                            });
  };
  switch (dst.dtype()) {
    case DType::f32: go((float*)nullptr); break;
    case DType::f64: go((double*)nullptr); break;
    case DType::bf16: go((bf16*)nullptr); break;
    case DType::i32: go((int32_t*)nullptr); break;
    case DType::i64: go((int64_t*)nullptr); break;
    case DType::u8: go((uint8_t*)nullptr); break;
    case DType::i8: go((int8_t*)nullptr); break;
  }
}
}  // namespace

Tensor& Tensor::copy_(const Tensor& src_in) {
  NoGradGuard g;
  Tensor src = src_in.detach().expand(shape());
  if (numel() == 0 || is_shapes_only()) return *this;   // nothing to write into (ShapesOnlyGuard)
  // Overlapping source and destination (e.g. a shifted view of the same storage): copy first.
  if (shares_storage(src) && !(src.offset() == offset() && src.strides() == strides()))
    src = src.clone();
  switch (src.dtype()) {
    case DType::f32: copy_from<float>(*this, src); break;
    case DType::f64: copy_from<double>(*this, src); break;
    case DType::bf16: copy_from<bf16>(*this, src); break;
    case DType::i32: copy_from<int32_t>(*this, src); break;
    case DType::i64: copy_from<int64_t>(*this, src); break;
    case DType::u8: copy_from<uint8_t>(*this, src); break;
    case DType::i8: copy_from<int8_t>(*this, src); break;
  }
  return *this;
}

}  // namespace attn

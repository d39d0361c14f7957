#include <cstring>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "attn/core/isa.h"
#include "attn/core/parallel.h"
#include "attn/core/profile.h"
#include "convert_kernels.h"
#include "gemm.h"
#include "vec_dispatch.h"

namespace attn::kernels {

namespace {

dnnl::engine& cpu_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::memory::data_type dt_of(DType t) {
  switch (t) {
    case DType::f32: return dnnl::memory::data_type::f32;
    case DType::bf16: return dnnl::memory::data_type::bf16;
    case DType::i8: return dnnl::memory::data_type::s8;
    case DType::u8: return dnnl::memory::data_type::u8;
    case DType::i32: return dnnl::memory::data_type::s32;
    default: fail("gemm: oneDNN does not take dtype ", dtype_name(t));
  }
}

// 3-d geometry (batch, rows, cols) with strides.
struct Geo {
  dnnl::memory::dims dims, strides;
};

Geo geo3(const Tensor& t) {
  if (t.dim() == 2) return {{1, t.shape()[0], t.shape()[1]}, {0, t.strides()[0], t.strides()[1]}};
  return {{t.shape()[0], t.shape()[1], t.shape()[2]}, {t.strides()[0], t.strides()[1], t.strides()[2]}};
}

struct Prim {
  dnnl::matmul prim;
  dnnl::memory::desc a, b, bias, c;
  bool unpack_first = false;   // packed weight, but oneDNN offers only its reference kernel for it
};

// What Storage::gemm_packed holds for a packed weight W (N, K), seen by oneDNN as B = Wᵀ (K, N).
struct PackedWeight {
  dnnl::memory::desc plain, packed;
  int64_t N = 0, K = 0;
  DType dtype = DType::f32;
};

// Rows of X that oneDNN is asked about when it picks the packed layout (ViT's 197 tokens and
// batches of them; the layout is the brgemm kernel's and does not depend on M in practice).
constexpr int64_t kPackRows = 256;

constexpr size_t kMaxCachedPrimitives = 2048;
std::mutex g_mu;
std::unordered_map<std::string, std::shared_ptr<Prim>> g_cache;

void fix_batch_stride(Geo& g) {
  // oneDNN wants a sensible stride for a batch dim of 1.
  if (g.dims[0] == 1) g.strides[0] = g.dims[1] * g.dims[2];
}

// dst (layout `to`) = src (layout `from`), the same tensor's bytes in another layout.
void reorder_into(const dnnl::memory::desc& from, void* src, const dnnl::memory::desc& to, void* dst) {
  dnnl::stream s(cpu_engine());
  dnnl::memory ms(from, cpu_engine(), src), md(to, cpu_engine(), dst);
  dnnl::reorder(ms, md).execute(s, ms, md);
  s.wait();
}

void reorder_bytes(const dnnl::memory::desc& from, const dnnl::memory::desc& to, void* data, size_t bytes) {
  Storage tmp(bytes);
  reorder_into(from, data, to, tmp.data);
  std::memcpy(data, tmp.data, bytes);
}

// The cached primitive for `key`; `make` fills a new one on a miss.
template <class Make>
std::shared_ptr<Prim> cached_prim(const std::string& key, Make make) {
  {
    std::lock_guard<std::mutex> lk(g_mu);
    auto it = g_cache.find(key);
    if (it != g_cache.end()) return it->second;
  }
  auto p = std::make_shared<Prim>();
  make(*p);
  std::lock_guard<std::mutex> lk(g_mu);
  // Bounded: translation batches change shape every step, and an unbounded map would keep every
  // primitive of a long run. Dropping all of them is rare and cheap (callers hold their own ref).
  if (g_cache.size() >= kMaxCachedPrimitives) g_cache.clear();
  g_cache.emplace(key, p);
  return p;
}

// The primitive descriptor of C = A · B (+ bias) over p's descriptors. A bf16 matmul notes its kernel
// path (attn/core/isa.h) from the implementation oneDNN chose ("brg:avx512_core_amx", "..._bf16").
dnnl::matmul::primitive_desc matmul_pd(const Prim& p, bool with_bias, const dnnl::primitive_attr& attr = {}) {
  dnnl::matmul::desc d = with_bias ? dnnl::matmul::desc(p.a, p.b, p.bias, p.c) : dnnl::matmul::desc(p.a, p.b, p.c);
  dnnl::matmul::primitive_desc pd(d, attr, cpu_engine());
  if (p.a.data_type() == dnnl::memory::data_type::bf16 || p.b.data_type() == dnnl::memory::data_type::bf16) {
    const char* impl = pd.impl_info_str();
    if (std::strstr(impl, "amx")) detail::note_kernel_path(KernelPath::amx);
    else if (std::strstr(impl, "bf16")) detail::note_kernel_path(KernelPath::avx512_bf16);
  }
  return pd;
}

void run_prim(const Prim& p, void* a, void* b, const Tensor& bias, void* c) {
  ATTN_PROFILE("gemm (oneDNN)");
  dnnl::stream s(cpu_engine());
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnnl::memory(p.a, cpu_engine(), a)},
                                             {DNNL_ARG_WEIGHTS, dnnl::memory(p.b, cpu_engine(), b)},
                                             {DNNL_ARG_DST, dnnl::memory(p.c, cpu_engine(), c)}};
  if (bias.defined()) args.emplace(DNNL_ARG_BIAS, dnnl::memory(p.bias, cpu_engine(), bias.raw_data()));
  p.prim.execute(s, args);
  s.wait();
}
}  // namespace

bool gemm_onednn_supports(DType dt) { return dt == DType::f32 || dt == DType::bf16; }

bool gemm_onednn_bf16_native() {
  static const bool ok = [] {
    try {
      using dt = dnnl::memory::data_type;
      const dnnl::memory::desc a({1, 16, 32}, dt::bf16, dnnl::memory::format_tag::abc);
      const dnnl::memory::desc b({1, 32, 16}, dt::bf16, dnnl::memory::format_tag::abc);
      const dnnl::memory::desc c({1, 16, 16}, dt::f32, dnnl::memory::format_tag::abc);
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), cpu_engine());
      return true;
    } catch (const dnnl::error&) {
      return false;   // no bf16 matmul below AVX-512 (oneDNN 2.x)
    }
  }();
  return ok;
}

void gemm_onednn(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& c) {
  Geo ga = geo3(a), gb = geo3(b), gc = geo3(c);
  fix_batch_stride(ga); fix_batch_stride(gb); fix_batch_stride(gc);
  std::ostringstream key;
  key << int(a.dtype()) << int(b.dtype()) << int(c.dtype()) << (bias.defined() ? int(bias.dtype()) : -1)
      << '|' << get_num_threads();
  for (auto* g : {&ga, &gb, &gc})
    for (int i = 0; i < 3; ++i) key << ',' << g->dims[i] << ':' << g->strides[i];
  const std::shared_ptr<Prim> p = cached_prim(key.str(), [&](Prim& q) {
    q.a = dnnl::memory::desc(ga.dims, dt_of(a.dtype()), ga.strides);
    q.b = dnnl::memory::desc(gb.dims, dt_of(b.dtype()), gb.strides);
    q.c = dnnl::memory::desc(gc.dims, dt_of(c.dtype()), gc.strides);
    if (bias.defined())
      q.bias = dnnl::memory::desc({1, 1, gc.dims[2]}, dt_of(bias.dtype()), {gc.dims[2], gc.dims[2], 1});
    q.prim = dnnl::matmul(matmul_pd(q, bias.defined()));
  });
  run_prim(*p, a.raw_data(), b.raw_data(), bias, c.raw_data());
}

bool gemm_pack_weight(Tensor& w) {
  if (!w.defined() || w.dim() != 2) return false;
  if (w.is_gemm_packed()) return true;
  const bool int8 = w.dtype() == DType::i8;
  if (!(w.dtype() == DType::f32 || int8 || (w.dtype() == DType::bf16 && gemm_onednn_bf16_native()))) return false;
  Storage& st = *w.impl().storage;
  const int64_t N = w.size(0), K = w.size(1);
  const size_t bytes = size_t(N * K) * w.element_size();
  if (!w.is_contiguous() || w.offset() != 0 || st.nbytes != bytes) return false;
  const auto dt = dt_of(w.dtype());
  auto pw = std::make_shared<PackedWeight>();
  pw->N = N, pw->K = K, pw->dtype = w.dtype();
  pw->plain = dnnl::memory::desc({K, N}, dt, {1, K});
  try {
    // An int8 weight is packed for the u8 x s8 -> s32 matmul of gemm_onednn_u8s8 (no bias).
    const auto src_dt = int8 ? dnnl::memory::data_type::u8 : dt;
    const auto dst_dt = int8 ? dnnl::memory::data_type::s32 : dnnl::memory::data_type::f32;
    const dnnl::memory::desc src({kPackRows, K}, src_dt, {K, 1}), dst({kPackRows, N}, dst_dt, {N, 1}),
        bias({1, N}, dnnl::memory::data_type::f32, {N, 1}),
        any({K, N}, dt, dnnl::memory::format_tag::any);
    dnnl::matmul::primitive_desc pd(int8 ? dnnl::matmul::desc(src, any, dst) : dnnl::matmul::desc(src, any, bias, dst),
                                    cpu_engine());
    pw->packed = pd.weights_desc();
  } catch (const dnnl::error&) {
    return false;
  }
  // Only a blocked layout pays. Without brgemm (oneDNN 2.6 below AVX-512) the preferred layout is the
  // weight merely transposed, (K, N) row-major, and gemm:jit runs it slower than the plain one: 60
  // against 100 GFLOP/s at 197x768x3072 on an AVX2 Zen 3, ViT-B/16 at batch 1 25% slower (2026-12-01).
  const dnnl_memory_desc_t& pd_data = pw->packed.data;
  if (pd_data.format_kind != dnnl_blocked || pd_data.format_desc.blocking.inner_nblks == 0) return false;
  if (pw->packed == pw->plain || pw->packed.get_size() != bytes) return false;
  reorder_bytes(pw->plain, pw->packed, st.data, bytes);
  st.gemm_packed = pw;
  return true;
}

void gemm_unpack_weight(Tensor& w) {
  if (!w.defined() || !w.is_gemm_packed()) return;
  Storage& st = *w.impl().storage;
  auto pw = std::static_pointer_cast<const PackedWeight>(st.gemm_packed);
  reorder_bytes(pw->packed, pw->plain, st.data, st.nbytes);
  st.gemm_packed.reset();
}

void gemm_onednn_packed(const Tensor& a, const Tensor& w, const Tensor& bias, Tensor& c, GemmEpilogue epilogue) {
  ATTN_CHECK(w.is_gemm_packed(), "gemm_onednn_packed: the weight is not packed");
  auto pw = std::static_pointer_cast<const PackedWeight>(w.impl().storage->gemm_packed);
  const int64_t M = a.size(0), K = pw->K, N = pw->N;
  const bool c_ok = c.dtype() == DType::f32 || (c.dtype() == DType::bf16 && pw->dtype == DType::bf16);
  ATTN_CHECK(a.dim() == 2 && a.size(1) == K && a.stride(1) == 1 && c.dim() == 2 && c.size(0) == M && c.size(1) == N &&
                 c.is_contiguous() && c_ok && a.dtype() == pw->dtype,
             "gemm_onednn_packed: expected a (M, ", K, ") ", dtype_name(pw->dtype), " input with unit last stride and a "
             "contiguous (M, ", N, ") f32 output, got ", a.shape(), " ", dtype_name(a.dtype()), " and ", c.shape(), " ",
             dtype_name(c.dtype()));
  std::ostringstream key;
  key << "P" << int(pw->dtype) << int(c.dtype()) << int(epilogue) << (bias.defined() ? 1 : 0) << '|'
      << get_num_threads() << ',' << M << ':' << a.stride(0) << ',' << K << ',' << N;
  const std::shared_ptr<Prim> p = cached_prim(key.str(), [&](Prim& q) {
    q.a = dnnl::memory::desc({M, K}, dt_of(pw->dtype), {a.stride(0), 1});
    q.c = dnnl::memory::desc({M, N}, dt_of(c.dtype()), {N, 1});
    q.b = pw->packed;
    if (bias.defined()) q.bias = dnnl::memory::desc({1, N}, dnnl::memory::data_type::f32, {N, 1});
    dnnl::primitive_attr attr;
    if (epilogue != GemmEpilogue::none) {
      dnnl::post_ops po;
      po.append_eltwise(1.f, epilogue == GemmEpilogue::gelu_erf ? dnnl::algorithm::eltwise_gelu_erf
                                                                : dnnl::algorithm::eltwise_gelu_tanh, 0.f, 0.f);
      attr.set_post_ops(po);
    }
    const dnnl::matmul::primitive_desc pd = matmul_pd(q, bias.defined(), attr);
    // A layout oneDNN chose for M = kPackRows that only its reference kernel takes at this M: run
    // the plain GEMM on an unpacked copy instead (correct, slower; not seen on ViT's shapes).
    q.unpack_first = std::strncmp(pd.impl_info_str(), "ref", 3) == 0;
    if (!q.unpack_first) q.prim = dnnl::matmul(pd);
  });
  if (p->unpack_first) {
    Tensor plain = Tensor::empty({N, K}, pw->dtype);
    reorder_into(pw->packed, w.impl().storage->data, pw->plain, plain.raw_data());
    if (epilogue == GemmEpilogue::none && c.dtype() == DType::f32) {
      gemm_onednn(a, plain.transpose(0, 1), bias, c);
      return;
    }
    // The epilogue by the row kernels, on one thread (a shape this rare is not worth more).
    Tensor c32 = c.dtype() == DType::f32 ? c : Tensor::empty({M, N}, DType::f32);
    gemm_onednn(a, plain.transpose(0, 1), bias, c32);
    float* pc = c32.data<float>();
    if (epilogue != GemmEpilogue::none)
      row_kernels().gelu_fwd(pc, nullptr, pc, M, N, epilogue == GemmEpilogue::gelu_tanh);
    if (c.dtype() == DType::bf16) convert_kernels().f32_to_bf16(pc, static_cast<uint16_t*>(c.raw_data()), M * N);
    return;
  }
  run_prim(*p, a.raw_data(), w.impl().storage->data, bias, c.raw_data());
}

void gemm_onednn_bf16_4d(const void* a, const Strided4& ga, const void* b, const Strided4& gb, void* c,
                         const Strided4& gc, DType c_dtype, float scale) {
  ATTN_CHECK(c_dtype == DType::f32 || c_dtype == DType::bf16, "gemm_onednn_bf16_4d: expected an f32 or bf16 "
             "result, got ", dtype_name(c_dtype));
  auto dims = [](const Strided4& g) { return dnnl::memory::dims(g.dims, g.dims + 4); };
  auto strides = [](const Strided4& g) { return dnnl::memory::dims(g.strides, g.strides + 4); };
  std::ostringstream key;
  key << "B4|" << get_num_threads() << '|' << int(c_dtype) << '|' << scale;
  for (const Strided4* g : {&ga, &gb, &gc})
    for (int i = 0; i < 4; ++i) key << ',' << g->dims[i] << ':' << g->strides[i];
  const std::shared_ptr<Prim> p = cached_prim(key.str(), [&](Prim& q) {
    using dt = dnnl::memory::data_type;
    q.a = dnnl::memory::desc(dims(ga), dt::bf16, strides(ga));
    q.b = dnnl::memory::desc(dims(gb), dt::bf16, strides(gb));
    q.c = dnnl::memory::desc(dims(gc), dt_of(c_dtype), strides(gc));
    dnnl::primitive_attr attr;
    if (scale != 1.f) attr.set_output_scales(0, {scale});
    q.prim = dnnl::matmul(matmul_pd(q, false, attr));
  });
  run_prim(*p, const_cast<void*>(a), const_cast<void*>(b), Tensor(), c);
}

void gemm_onednn_u8s8(const uint8_t* a, int64_t M, int64_t K, int64_t lda, const Tensor& w, int32_t* c) {
  ATTN_PROFILE("gemm (oneDNN)");
  const int64_t N = w.size(0);
  ATTN_CHECK(w.dtype() == DType::i8 && w.dim() == 2 && w.size(1) == K, "gemm_onednn_u8s8: expected an i8 (N, ", K,
             ") weight, got ", dtype_name(w.dtype()), " ", w.shape());
  const bool packed = w.is_gemm_packed();
  std::shared_ptr<const PackedWeight> pw;
  if (packed) pw = std::static_pointer_cast<const PackedWeight>(w.impl().storage->gemm_packed);
  ATTN_CHECK(packed || w.stride(1) == 1, "gemm_onednn_u8s8: expected a weight with unit last stride, got strides ",
             w.strides());
  std::ostringstream key;
  key << "Q" << packed << '|' << get_num_threads() << ',' << M << ':' << lda << ',' << K << ',' << N << ':'
      << (packed ? 0 : w.stride(0));
  const std::shared_ptr<Prim> p = cached_prim(key.str(), [&](Prim& q) {
    q.a = dnnl::memory::desc({M, K}, dnnl::memory::data_type::u8, {lda, 1});
    q.c = dnnl::memory::desc({M, N}, dnnl::memory::data_type::s32, {N, 1});
    q.b = packed ? pw->packed : dnnl::memory::desc({K, N}, dnnl::memory::data_type::s8, {1, w.stride(0)});
    const dnnl::matmul::primitive_desc pd = matmul_pd(q, false);
    q.unpack_first = packed && std::strncmp(pd.impl_info_str(), "ref", 3) == 0;
    if (!q.unpack_first) q.prim = dnnl::matmul(pd);
  });
  if (p->unpack_first) {
    Tensor plain = Tensor::empty({N, K}, DType::i8);
    reorder_into(pw->packed, w.impl().storage->data, pw->plain, plain.raw_data());
    gemm_onednn_u8s8(a, M, K, lda, plain, c);
    return;
  }
  void* wdata = packed ? w.impl().storage->data : const_cast<void*>(w.raw_data());
  run_prim(*p, const_cast<uint8_t*>(a), wdata, Tensor(), c);
}

bool gemm_u8s8_full_range() {
  // Sums of products 255 x 127 over K = 64: exact only where the kernel accumulates each product in
  // 32 bits (VNNI, AMX); AVX2 and AVX-512 without VNNI add pairs in saturating 16 bits (vpmaddubsw).
  static const bool ok = [] {
    constexpr int64_t M = 16, K = 64, N = 16;
    std::vector<uint8_t> a(M * K, 255);
    Tensor w = Tensor::empty({N, K}, DType::i8);
    std::memset(w.raw_data(), 127, size_t(N * K));
    std::vector<int32_t> c(M * N, 0);
    gemm_onednn_u8s8(a.data(), M, K, K, w, c.data());
    for (int32_t v : c)
      if (v != 255 * 127 * K) return false;
    return true;
  }();
  return ok;
}

void gemm_reference(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& c) {
  Tensor a3 = a.dim() == 2 ? a.unsqueeze(0) : a;
  Tensor b3 = b.dim() == 2 ? b.unsqueeze(0) : b;
  Tensor c3 = c.dim() == 2 ? c.unsqueeze(0) : c;
  const int64_t B = c3.shape()[0], M = c3.shape()[1], N = c3.shape()[2], K = a3.shape()[2];
  Tensor ad = a3.to(DType::f64).contiguous(), bd = b3.to(DType::f64).contiguous();
  Tensor biasd = bias.defined() ? bias.to(DType::f64).contiguous() : Tensor();
  Tensor cd = Tensor::empty({B, M, N}, DType::f64);
  const double* pa = ad.data<double>();
  const double* pb = bd.data<double>();
  double* pc = cd.data<double>();
  const int64_t bB = b3.shape()[0] == 1 ? 0 : K * N;
  parallel_for(0, B * M, 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t bi = r / M, m = r % M;
      for (int64_t n = 0; n < N; ++n) {
        double acc = biasd.defined() ? biasd.data<double>()[n] : 0.0;
        for (int64_t k = 0; k < K; ++k) acc += pa[(bi * M + m) * K + k] * pb[bi * bB + k * N + n];
        pc[r * N + n] = acc;
      }
    }
  });
  c3.copy_(cd);
}

}  // namespace attn::kernels

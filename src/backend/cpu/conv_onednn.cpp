// conv2d on oneDNN's convolution primitives (f32): forward, backward data, backward weights.
// Plain NCHW / (G)OIHW layouts, so attn tensors are handed over without reorders; primitives are
// cached by geometry and thread count.
#include <memory>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>

#include "attn/core/parallel.h"
#include "conv_kernels.h"

namespace attn::kernels {

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

struct Descs {
  dnnl::memory::desc src, wei, bias, dst;
  dnnl::memory::dims strides, dilates, pad_l, pad_r;
};

Descs descs(const ConvParams& p) {
  Descs d;
  d.src = dnnl::memory::desc({p.N, p.C, p.H, p.W}, dt::f32, tag::nchw);
  d.dst = dnnl::memory::desc({p.N, p.O, p.Ho, p.Wo}, dt::f32, tag::nchw);
  if (p.groups == 1) d.wei = dnnl::memory::desc({p.O, p.C, p.kh, p.kw}, dt::f32, tag::oihw);
  else d.wei = dnnl::memory::desc({p.groups, p.Og(), p.Cg(), p.kh, p.kw}, dt::f32, tag::goihw);
  d.bias = dnnl::memory::desc({p.O}, dt::f32, tag::x);
  d.strides = {p.sh, p.sw};
  d.dilates = {p.dh - 1, p.dw - 1};
  d.pad_l = {p.ph, p.pw};
  d.pad_r = {p.ph, p.pw};
  return d;
}

// The primitive's own layouts are left to oneDNN (format_tag::any: blocked nChw8c / OIhw8i8o
// on AVX2), which run far faster than its gemm fallback on plain layouts; tensors are reordered
// in and out around each call.
dnnl::memory::desc any_like(const dnnl::memory::desc& d) {
  return dnnl::memory::desc(d.dims(), dt::f32, tag::any);
}

dnnl::convolution_forward::primitive_desc fwd_pd(const Descs& d, bool bias) {
  auto src = any_like(d.src), wei = any_like(d.wei), dst = any_like(d.dst);
  auto desc = bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                                     dnnl::algorithm::convolution_direct, src, wei, d.bias, dst,
                                                     d.strides, d.dilates, d.pad_l, d.pad_r)
                   : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                                     dnnl::algorithm::convolution_direct, src, wei, dst, d.strides,
                                                     d.dilates, d.pad_l, d.pad_r);
  return dnnl::convolution_forward::primitive_desc(desc, engine());
}

// A primitive with the layouts it chose for its three tensor arguments.
struct Prim {
  dnnl::primitive prim;
  dnnl::memory::desc a, b, c;   // fwd: src, wei, dst; bwd data: diff_dst, wei, diff_src; bwd w: src, diff_dst, diff_wei
};

std::mutex g_mu;
std::unordered_map<std::string, std::shared_ptr<Prim>> g_cache;

std::string key_of(char kind, bool bias, const ConvParams& p) {
  std::ostringstream k;
  k << kind << bias << '|' << get_num_threads();
  for (int64_t v : {p.N, p.C, p.H, p.W, p.O, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw, p.groups})
    k << ',' << v;
  return k.str();
}

template <class Make>
std::shared_ptr<Prim> cached(const std::string& key, Make&& make) {
  {
    std::lock_guard<std::mutex> lk(g_mu);
    auto it = g_cache.find(key);
    if (it != g_cache.end()) return it->second;
  }
  auto prim = std::make_shared<Prim>(make());
  std::lock_guard<std::mutex> lk(g_mu);
  g_cache.emplace(key, prim);
  return prim;
}

// `user` in layout `want`: itself when the layouts agree, else a reordered copy.
dnnl::memory to_layout(const dnnl::memory& user, const dnnl::memory::desc& want, dnnl::stream& s) {
  if (user.get_desc() == want) return user;
  dnnl::memory m(want, engine());
  dnnl::reorder(user, m).execute(s, const_cast<dnnl::memory&>(user), m);
  return m;
}

// A destination in layout `have` that ends up in `user`: write to `user` directly when the
// layouts agree; else to a scratch memory, copied back by finish().
struct Out {
  dnnl::memory user, mem;
  Out(const dnnl::memory& u, const dnnl::memory::desc& have)
      : user(u), mem(u.get_desc() == have ? u : dnnl::memory(have, engine())) {}
  void finish(dnnl::stream& s) {
    if (mem.get_data_handle() != user.get_data_handle()) dnnl::reorder(mem, user).execute(s, mem, user);
  }
};

}  // namespace

bool conv_onednn_supports(DType t) { return t == DType::f32; }

Tensor conv2d_onednn_forward(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, const ConvParams& p) {
  Tensor x = x_in.contiguous(), w = w_in.contiguous();
  Tensor b = b_in.defined() ? b_in.contiguous() : Tensor();
  Tensor y = Tensor::empty({p.N, p.O, p.Ho, p.Wo}, DType::f32);
  const Descs d = descs(p);
  auto pr = cached(key_of('f', b.defined(), p), [&] {
    auto pd = fwd_pd(d, b.defined());
    return Prim{dnnl::convolution_forward(pd), pd.src_desc(), pd.weights_desc(), pd.dst_desc()};
  });
  dnnl::stream s(engine());
  dnnl::memory src = to_layout(dnnl::memory(d.src, engine(), x.raw_data()), pr->a, s);
  dnnl::memory wei = to_layout(dnnl::memory(d.wei, engine(), w.raw_data()), pr->b, s);
  Out dst(dnnl::memory(d.dst, engine(), y.raw_data()), pr->c);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst.mem}};
  if (b.defined()) args.emplace(DNNL_ARG_BIAS, dnnl::memory(d.bias, engine(), b.raw_data()));
  pr->prim.execute(s, args);
  dst.finish(s);
  s.wait();
  return y;
}

void conv2d_onednn_backward(const Tensor& dout_in, const Tensor& x_in, const Tensor& w_in, const ConvParams& p,
                            bool want_x, bool want_w, bool want_b, Tensor& dx, Tensor& dw, Tensor& db) {
  Tensor dout = dout_in.contiguous();
  const Descs d = descs(p);
  dnnl::stream s(engine());
  dnnl::memory g_user(d.dst, engine(), dout.raw_data());
  dnnl::memory g_blocked = g_user;   // dout in the last layout a primitive asked for
  if (want_x) {
    Tensor w = w_in.contiguous();
    dx = Tensor::empty({p.N, p.C, p.H, p.W}, DType::f32);
    auto pr = cached(key_of('d', false, p), [&] {
      dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, any_like(d.src),
                                                 any_like(d.wei), any_like(d.dst), d.strides, d.dilates, d.pad_l,
                                                 d.pad_r);
      dnnl::convolution_backward_data::primitive_desc pd(desc, engine(), fwd_pd(d, false));
      return Prim{dnnl::convolution_backward_data(pd), pd.diff_dst_desc(), pd.weights_desc(), pd.diff_src_desc()};
    });
    dnnl::memory g = to_layout(g_user, pr->a, s);
    g_blocked = g;
    dnnl::memory wei = to_layout(dnnl::memory(d.wei, engine(), w.raw_data()), pr->b, s);
    Out out(dnnl::memory(d.src, engine(), dx.raw_data()), pr->c);
    pr->prim.execute(s, {{DNNL_ARG_DIFF_DST, g}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DIFF_SRC, out.mem}});
    out.finish(s);
  }
  if (want_w || want_b) {
    Tensor x = x_in.contiguous();
    dw = Tensor::empty({p.O, p.Cg(), p.kh, p.kw}, DType::f32);
    db = want_b ? Tensor::empty({p.O}, DType::f32) : Tensor();
    auto pr = cached(key_of('w', want_b, p), [&] {
      auto desc = want_b ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct,
                                                                    any_like(d.src), any_like(d.wei), d.bias,
                                                                    any_like(d.dst), d.strides, d.dilates, d.pad_l,
                                                                    d.pad_r)
                         : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct,
                                                                    any_like(d.src), any_like(d.wei),
                                                                    any_like(d.dst), d.strides, d.dilates, d.pad_l,
                                                                    d.pad_r);
      dnnl::convolution_backward_weights::primitive_desc pd(desc, engine(), fwd_pd(d, want_b));
      return Prim{dnnl::convolution_backward_weights(pd), pd.src_desc(), pd.diff_dst_desc(), pd.diff_weights_desc()};
    });
    dnnl::memory src = to_layout(dnnl::memory(d.src, engine(), x.raw_data()), pr->a, s);
    dnnl::memory g = g_blocked.get_desc() == pr->b ? g_blocked : to_layout(g_user, pr->b, s);
    Out out(dnnl::memory(d.wei, engine(), dw.raw_data()), pr->c);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, g},
                                               {DNNL_ARG_DIFF_WEIGHTS, out.mem}};
    if (want_b) args.emplace(DNNL_ARG_DIFF_BIAS, dnnl::memory(d.bias, engine(), db.raw_data()));
    pr->prim.execute(s, args);
    out.finish(s);
    if (!want_w) dw = Tensor();
  }
  s.wait();
}

}  // namespace attn::kernels

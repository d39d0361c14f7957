// Losses: cross_entropy (one fused log-softmax pass per position, the log-sum-exp kept for the
// backward; f32 (N, C) rows through the SIMD row kernels of vec_dispatch.h), kl_div and mse_loss
// (one elementwise kernel each way). Per-position losses are reduced in double in a fixed order,
// so results do not depend on the thread count.
#include "attn/ops/loss.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "attn/autograd/grad_mode.h"
#include "attn/autograd/node.h"
#include "attn/core/parallel.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "../backend/cpu/vec_dispatch.h"

namespace attn {

namespace {

// ---------------------------------------------------------------- cross_entropy

// logits viewed as (N, C, S) contiguous; position p = n * S + s has class c at
// x[n * C * S + c * S + s].
struct CeGeom {
  int64_t N = 1, C = 1, S = 1;
  int64_t positions() const { return N * S; }
};

struct CeState {
  CeGeom g;
  CrossEntropyOptions opts;
  bool soft = false;
  std::vector<int64_t> cls;     // class targets (when !soft)
  Tensor soft_target;           // contiguous, logits' shape (when soft)
  Tensor logits;                // contiguous, detached
  std::vector<double> lse;      // log-sum-exp per position
  int64_t count = 0;            // non-ignored positions (class targets)
};

// f32 logits with the classes contiguous (S == 1, the (N, C) case) take the SIMD row kernels:
// max, sum of exp and sum of x per row, exp as a polynomial; otherwise scalar loops with libm.
template <class T>
bool ce_rows_simd(const CeState& st) {
  return std::is_same_v<T, float> && st.g.S == 1;
}

// Forward for positions [p0, p1): fills lse and loss.
template <class T>
void ce_forward_range(const CeState& st, int64_t p0, int64_t p1, double* lse_out, double* loss_out) {
  const int64_t C = st.g.C, S = st.g.S;
  const T* x = st.logits.data<T>();
  const T* tp = st.soft ? st.soft_target.data<T>() : nullptr;
  const double ls = st.opts.label_smoothing;
  const bool simd = ce_rows_simd<T>(st);
  const bool want_sx = !st.soft && ls > 0;
  constexpr int64_t kRows = 64;   // rows per kernel call
  float mx[kRows];
  double se[kRows], sx[kRows];
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t n = p / S, s = p % S;
    const int64_t base = n * C * S + s;
    const T* xp = x + base;
    double l = 0, sum_x = 0;   // sum_x: label smoothing's sum of the logits (want_sx only)
    if (simd) {
      const int64_t j = (p - p0) % kRows;
      if (j == 0)
        kernels::row_kernels().ce_stats(reinterpret_cast<const float*>(xp), std::min(kRows, p1 - p), C, mx, se,
                                        want_sx ? sx : nullptr);
      l = double(mx[j]) + std::log(se[j]);
      if (want_sx) sum_x = sx[j];
    } else {
      // max over classes, NaN-propagating
      T m = -std::numeric_limits<T>::infinity();
      for (int64_t c = 0; c < C; ++c) {
        const T v = xp[c * S];
        if (v > m || v != v) m = v;
        if (m != m) break;
      }
      double sum = 0;
      for (int64_t c = 0; c < C; ++c) sum += double(std::exp(T(xp[c * S] - m)));
      l = double(m) + std::log(sum);
      if (want_sx)
        for (int64_t c = 0; c < C; ++c) sum_x += double(xp[c * S]);
    }
    lse_out[p] = l;
    double loss;
    if (st.soft) {
      const T* t = tp + base;
      double acc = 0;
      for (int64_t c = 0; c < C; ++c) {
        double tc = double(t[c * S]);
        if (ls > 0) tc = tc * (1 - ls) + ls / double(C);
        acc += tc * (double(xp[c * S]) - l);
      }
      loss = -acc;
    } else {
      const int64_t tc = st.cls[size_t(p)];
      if (tc == st.opts.ignore_index) {
        loss = 0;
      } else {
        const double nll = l - double(xp[tc * S]);
        if (ls > 0) {
          const double smooth = double(C) * l - sum_x;   // -sum_c log p_c
          loss = (1 - ls) * nll + smooth * (ls / double(C));
        } else {
          loss = nll;
        }
      }
    }
    loss_out[p] = loss;
  }
}

struct CrossEntropyNode : autograd::Node {
  CeState st;
  Shape logits_shape;
  const char* name() const override { return "cross_entropy"; }
  std::vector<Tensor> backward(const Tensor& dout) override {
    Tensor dx = Tensor::empty(logits_shape, st.logits.dtype());
    const int64_t P = st.g.positions();
    const int64_t C = st.g.C, S = st.g.S;
    const double ls = st.opts.label_smoothing;
    // Gradient scale per position.
    std::vector<double> gpos;
    double gscalar = 0;
    const bool per_pos = st.opts.reduction == Reduction::none;
    if (per_pos) {
      gpos = dout.contiguous().to_vector<double>();
    } else {
      gscalar = dout.item();
      if (st.opts.reduction == Reduction::mean) gscalar /= st.soft ? double(P) : double(st.count);
    }
    ATTN_DISPATCH_FLOAT(st.logits.dtype(), "cross_entropy backward", [&] {
      const T* x = st.logits.data<T>();
      const T* tp = st.soft ? st.soft_target.data<T>() : nullptr;
      T* d = dx.data<T>();
      parallel_for(0, P, std::max<int64_t>(1, 4096 / std::max<int64_t>(C, 1)), [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t n = p / S, s = p % S;
          const int64_t base = n * C * S + s;
          const T* xp = x + base;
          T* dp = d + base;
          const double g = per_pos ? gpos[size_t(p)] : gscalar;
          const double l = st.lse[size_t(p)];
          if (st.soft) {
            const T* t = tp + base;
            double tsum = 0;
            for (int64_t c = 0; c < C; ++c) {
              double tc = double(t[c * S]);
              if (ls > 0) tc = tc * (1 - ls) + ls / double(C);
              tsum += tc;
            }
            for (int64_t c = 0; c < C; ++c) {
              double tc = double(t[c * S]);
              if (ls > 0) tc = tc * (1 - ls) + ls / double(C);
              dp[c * S] = T(g * (std::exp(double(xp[c * S]) - l) * tsum - tc));
            }
          } else {
            const int64_t tc = st.cls[size_t(p)];
            if (tc == st.opts.ignore_index) {
              for (int64_t c = 0; c < C; ++c) dp[c * S] = T(0);
              continue;
            }
            // p_c - ls/C - (1 - ls) [c == t], with exp in T (f32 stays f32)
            // (x - lse in double: with large logits a rounded lse would cost digits)
            const T off = T(ls / double(C)), gt = T(g);
            if (ce_rows_simd<T>(st)) {
              const auto lhi = float(l);
              kernels::row_kernels().ce_grad(reinterpret_cast<const float*>(xp), reinterpret_cast<float*>(dp), C,
                                             lhi, float(l - double(lhi)), float(gt), float(off));
            } else {
              for (int64_t c = 0; c < C; ++c) dp[c * S] = gt * (std::exp(T(double(xp[c * S]) - l)) - off);
            }
            dp[tc * S] = T(g * (std::exp(double(xp[tc * S]) - l) - double(off) - (1 - ls)));
          }
        }
      });
    });
    return {dx, Tensor()};
  }
  void release() override {
    st.logits = Tensor();
    st.soft_target = Tensor();
    st.cls.clear();
    st.lse.clear();
  }
};

// ---------------------------------------------------------------- kl_div / mse_loss

enum class Pw { mse, kl, kl_log };

template <class T>
inline T xlogy_self(T t) {   // torch.xlogy(t, t)
  if (t != t) return t;
  if (t == T(0)) return T(0);
  return t * std::log(t);
}

template <class T>
inline T pw_value(Pw k, T i, T t) {
  switch (k) {
    case Pw::mse: { const T d = i - t; return d * d; }
    case Pw::kl: return xlogy_self(t) - t * i;
    case Pw::kl_log: return std::exp(t) * (t - i);
  }
  return T(0);
}

// d/di and d/dt of pw_value (torch's autograd formulas, NaN at t == 0 for kl's target).
template <class T>
inline void pw_grad(Pw k, T i, T t, T& di, T& dt) {
  switch (k) {
    case Pw::mse: di = T(2) * (i - t); dt = -di; return;
    case Pw::kl: {
      const T logt = t != T(0) ? std::log(t) : (t != t ? t : T(0));
      di = -t;
      dt = logt + t / t - i;
      return;
    }
    case Pw::kl_log: { const T e = std::exp(t); di = -e; dt = e * (t - i + T(1)); return; }
  }
}

const char* pw_name(Pw k) { return k == Pw::mse ? "mse_loss" : "kl_div"; }

struct PointwiseLossNode : autograd::Node {
  Pw kind = Pw::mse;
  Reduction reduction = Reduction::mean;
  Tensor input, target;   // detached originals
  Shape shape;            // broadcast shape
  const char* name() const override { return pw_name(kind); }
  std::vector<Tensor> backward(const Tensor& dout) override {
    const bool want_i = next[0].fn || next[0].leaf, want_t = next[1].fn || next[1].leaf;
    const DType dt = input.dtype();
    Tensor ie = input.expand(shape).contiguous(), te = target.expand(shape).contiguous();
    Tensor gi = Tensor::empty(shape, dt), gt = Tensor::empty(shape, dt);
    const int64_t n = shape_numel(shape);
    Tensor gd;
    double gs = 0;
    if (reduction == Reduction::none) {
      gd = dout.contiguous();
    } else {
      gs = dout.item();
      if (reduction == Reduction::mean) gs /= double(n);
    }
    ATTN_DISPATCH_FLOAT(dt, name(), [&] {
      const T* pi = ie.data<T>();
      const T* pt = te.data<T>();
      const T* pg = gd.defined() ? gd.data<T>() : nullptr;
      T* oi = gi.data<T>();
      T* ot = gt.data<T>();
      const T g0 = T(gs);
      parallel_for(0, n, 16384, [&](int64_t b, int64_t e) {
        for (int64_t j = b; j < e; ++j) {
          T di = T(0), dtt = T(0);
          pw_grad<T>(kind, pi[j], pt[j], di, dtt);
          const T g = pg ? pg[j] : g0;
          oi[j] = g * di;
          ot[j] = g * dtt;
        }
      });
    });
    Tensor da, db;
    if (want_i) da = sum_to(gi, input.shape());
    if (want_t) db = sum_to(gt, target.shape());
    return {da, db};
  }
  void release() override { input = Tensor(); target = Tensor(); }
};

Tensor pointwise_loss(Pw kind, const Tensor& input, const Tensor& target, Reduction reduction) {
  const char* op = pw_name(kind);
  ATTN_CHECK(input.dtype() == DType::f32 || input.dtype() == DType::f64, op,
             ": expected a f32 or f64 input, got ", dtype_name(input.dtype()));
  ATTN_CHECK(input.dtype() == target.dtype(), op, ": input and target dtypes differ (",
             dtype_name(input.dtype()), " and ", dtype_name(target.dtype()), "); convert one with .to()");
  const Shape s = broadcast_shapes(input.shape(), target.shape(), op);
  Tensor ie = input.detach().expand(s).contiguous(), te = target.detach().expand(s).contiguous();
  Tensor vals = Tensor::empty(s, input.dtype());
  ATTN_DISPATCH_FLOAT(input.dtype(), op, [&] {
    const T* pi = ie.data<T>();
    const T* pt = te.data<T>();
    T* o = vals.data<T>();
    parallel_for(0, vals.numel(), 16384, [&](int64_t b, int64_t e) {
      for (int64_t j = b; j < e; ++j) o[j] = pw_value<T>(kind, pi[j], pt[j]);
    });
  });
  Tensor out;
  {
    NoGradGuard ng;
    out = reduction == Reduction::none ? vals : reduction == Reduction::sum ? sum(vals) : mean(vals);
  }
  if (autograd::needs_grad({input, target})) {
    auto n = std::make_shared<PointwiseLossNode>();
    n->kind = kind; n->reduction = reduction;
    n->input = input.detach(); n->target = target.detach();
    n->shape = s;
    autograd::attach(out, n, {input, target});
  }
  return out;
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& opts) {
  ATTN_CHECK(logits.dtype() == DType::f32 || logits.dtype() == DType::f64,
             "cross_entropy: expected f32 or f64 logits, got ", dtype_name(logits.dtype()));
  ATTN_CHECK(logits.dim() >= 1, "cross_entropy: expected logits of shape (N, C) or (N, C, d1, ...), got shape ",
             logits.shape());
  ATTN_CHECK(opts.label_smoothing >= 0.0 && opts.label_smoothing <= 1.0,
             "cross_entropy: label_smoothing must be in [0, 1], got ", opts.label_smoothing);
  CeState st;
  st.opts = opts;
  const Shape& ls = logits.shape();
  Shape class_shape;   // expected shape of class-index targets
  if (logits.dim() == 1) {
    st.g.N = 1; st.g.C = ls[0]; st.g.S = 1;
  } else {
    st.g.N = ls[0]; st.g.C = ls[1];
    st.g.S = 1;
    for (size_t i = 2; i < ls.size(); ++i) st.g.S *= ls[i];
    class_shape.push_back(ls[0]);
    class_shape.insert(class_shape.end(), ls.begin() + 2, ls.end());
  }
  ATTN_CHECK(st.g.C > 0, "cross_entropy: expected at least one class, got logits of shape ", ls);
  st.soft = is_floating(target.dtype());
  if (st.soft) {
    ATTN_CHECK(target.dtype() == logits.dtype(), "cross_entropy: soft targets must have the logits' dtype (",
               dtype_name(logits.dtype()), "), got ", dtype_name(target.dtype()));
    ATTN_CHECK(target.shape() == ls, "cross_entropy: expected soft targets of the logits' shape ", ls,
               ", got ", target.shape());
    st.soft_target = target.detach().contiguous();
  } else {
    ATTN_CHECK(target.dtype() == DType::i64,
               "cross_entropy: expected a target of class indices (i64) or probabilities (f32/f64), got ",
               dtype_name(target.dtype()));
    ATTN_CHECK(target.shape() == class_shape, "cross_entropy: expected a target of shape ", class_shape,
               " for logits of shape ", ls, ", got ", target.shape());
    st.cls = target.to_vector<int64_t>();
    for (size_t i = 0; i < st.cls.size(); ++i) {
      const int64_t t = st.cls[i];
      if (t == opts.ignore_index) continue;
      ATTN_CHECK(t >= 0 && t < st.g.C, "cross_entropy: target ", t, " at flat position ", i,
                 " is out of range [0, ", st.g.C, ")");
      ++st.count;
    }
  }
  st.logits = logits.detach().contiguous();
  const int64_t P = st.g.positions();
  st.lse.assign(size_t(P), 0.0);
  std::vector<double> loss(size_t(P), 0.0);
  ATTN_DISPATCH_FLOAT(logits.dtype(), "cross_entropy", [&] {
    parallel_for(0, P, std::max<int64_t>(1, 4096 / st.g.C), [&](int64_t p0, int64_t p1) {
      ce_forward_range<T>(st, p0, p1, st.lse.data(), loss.data());
    });
  });
  Tensor out;
  if (opts.reduction == Reduction::none) {
    Shape os = st.soft ? class_shape : target.shape();
    out = Tensor::from_vector<double>(loss, os).to(logits.dtype());
  } else {
    double total = 0;
    for (double v : loss) total += v;
    if (opts.reduction == Reduction::mean) total /= st.soft ? double(P) : double(st.count);
    out = Tensor::scalar(total, logits.dtype());
  }
  if (autograd::needs_grad({logits})) {
    auto n = std::make_shared<CrossEntropyNode>();
    n->st = std::move(st);
    n->logits_shape = ls;
    autograd::attach(out, n, {logits, target});
  }
  return out;
}

Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction, bool log_target) {
  return pointwise_loss(log_target ? Pw::kl_log : Pw::kl, input, target, reduction);
}

Tensor kl_div_batchmean(const Tensor& input, const Tensor& target, bool log_target) {
  Tensor s = kl_div(input, target, Reduction::sum, log_target);
  if (input.dim() == 0) return s;
  return s / double(input.size(0));
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  return pointwise_loss(Pw::mse, input, target, reduction);
}

}  // namespace attn

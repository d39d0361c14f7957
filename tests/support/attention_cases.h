// Inputs for the attention op's tests (attention_test against PyTorch, attention_fused_test against
// the naive path): the mask kinds in their broadcast shapes, and a case's sizes and options.
//
//   const test::SdpaCase c{2, 3, 7, 7, 16, 16, test::MaskKind::bool_tq_tk, true, CausalAlign::top_left};
//   Tensor mask = test::make_mask(c.mask, c.B, c.NH, c.Tq, c.Tk, DType::f32, g);
//   SCOPED_TRACE(test::describe(c));
#pragma once
#include <cmath>
#include <sstream>
#include <string>

#include "attn/attn.h"
#include "attn/ops/attention.h"

namespace attn::test {

enum class MaskKind { none, bool_key_padding, bool_tq_tk, float_full, float_tq_tk, float_key_padding };

inline const char* mask_name(MaskKind m) {
  switch (m) {
    case MaskKind::none: return "none";
    case MaskKind::bool_key_padding: return "bool (B,1,1,Tk)";
    case MaskKind::bool_tq_tk: return "bool (Tq,Tk)";
    case MaskKind::float_full: return "float (B,NH,Tq,Tk)";
    case MaskKind::float_tq_tk: return "float (Tq,Tk)";
    case MaskKind::float_key_padding: return "float (B,1,1,Tk)";
  }
  return "?";
}

// A random mask of the kind; the (Tq, Tk) ones hide every key of query row 1 (an all-masked row).
// Additive masks are of dtype dt.
inline Tensor make_mask(MaskKind kind, int64_t B, int64_t NH, int64_t Tq, int64_t Tk, DType dt, Generator& g) {
  auto dead_row = [&](Tensor m, double value) {
    if (Tq > 1) m.select(0, 1).fill_(value);
    return m;
  };
  switch (kind) {
    case MaskKind::none: return Tensor();
    case MaskKind::bool_key_padding: return lt(rand({B, 1, 1, Tk}, g), 0.3);
    case MaskKind::bool_tq_tk: return dead_row(lt(rand({Tq, Tk}, g), 0.3).contiguous(), 1.0);
    case MaskKind::float_full: return randn({B, NH, Tq, Tk}, g, dt);
    case MaskKind::float_tq_tk: {
      Tensor m = randn({Tq, Tk}, g, dt);
      Tensor hide = lt(rand({Tq, Tk}, g, dt), 0.2);
      return dead_row(where(hide, Tensor::full({1}, -INFINITY, dt), m).contiguous(), -INFINITY);
    }
    case MaskKind::float_key_padding: {
      Tensor hide = lt(rand({B, 1, 1, Tk}, g, dt), 0.25);
      return where(hide, Tensor::full({1}, -INFINITY, dt), Tensor::zeros({1}, dt));
    }
  }
  return Tensor();
}

// Query, key and value sizes (HS for q and k, HSv for v), the mask kind, causality, dropout.
struct SdpaCase {
  int64_t B, NH, Tq, Tk, HS, HSv;
  MaskKind mask;
  bool causal;
  CausalAlign align;
  double p = 0.0;
};

inline const char* align_name(CausalAlign a) { return a == CausalAlign::bottom_right ? "bottom_right" : "top_left"; }

inline std::string describe(const SdpaCase& c) {
  std::ostringstream os;
  os << "B" << c.B << " NH" << c.NH << " Tq" << c.Tq << " Tk" << c.Tk << " HS" << c.HS << " HSv" << c.HSv
     << " mask " << mask_name(c.mask) << (c.causal ? std::string(" causal ") + align_name(c.align) : "")
     << " p " << c.p;
  return os.str();
}

}  // namespace attn::test

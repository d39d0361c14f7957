// Parameter initialisers: fills through the generator-driven creation functions of core/rng.h.
#include "attn/nn/init.h"

#include <cmath>

#include "attn/autograd/grad_mode.h"

namespace attn::nn::init {

namespace {
void check_float(const Tensor& t, const char* op) {
  ATTN_CHECK(t.defined(), op, ": expected a defined tensor");
  ATTN_CHECK(is_floating(t.dtype()) || t.dtype() == DType::bf16, op, ": expected a floating tensor, got ",
             dtype_name(t.dtype()));
}
// Draws in f32 (or f64 for f64 tensors) and copies into t, converting.
Tensor fill_from(Tensor t, const Tensor& values) {
  NoGradGuard ng;
  t.copy_(values);
  return t;
}
DType draw_dtype(const Tensor& t) { return t.dtype() == DType::f64 ? DType::f64 : DType::f32; }
thread_local int skip_depth = 0, unfilled_depth = 0;
// Under a SkipRandomInit: zeros, or t untouched for Fill::none.
Tensor skipped(Tensor t) { return unfilled_depth > 0 ? t : zeros_(std::move(t)); }
// Nothing to draw: a SkipRandomInit, or a tensor with shapes only (ShapesOnlyGuard; the generator
// is left where it was).
bool no_draw(const Tensor& t) { return random_init_skipped() || t.is_shapes_only(); }
}  // namespace

SkipRandomInit::SkipRandomInit(Fill fill) : fill_(fill) {
  ++skip_depth;
  if (fill_ == Fill::none) ++unfilled_depth;
}
SkipRandomInit::~SkipRandomInit() {
  --skip_depth;
  if (fill_ == Fill::none) --unfilled_depth;
}
bool random_init_skipped() { return skip_depth > 0; }
bool random_init_leaves_unfilled() { return skip_depth > 0 && unfilled_depth > 0; }

std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t) {
  ATTN_CHECK(t.defined() && t.dim() >= 2,
             "fan_in_and_fan_out: expected a tensor with at least 2 dims, got shape ",
             t.defined() ? t.shape() : Shape{});
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor zeros_(Tensor t) { return constant_(std::move(t), 0.0); }
Tensor ones_(Tensor t) { return constant_(std::move(t), 1.0); }

Tensor constant_(Tensor t, double value) {
  ATTN_CHECK(t.defined(), "constant_: expected a defined tensor");
  NoGradGuard ng;
  t.fill_(value);
  return t;
}

Tensor uniform_(Tensor t, Generator& g, double a, double b) {
  check_float(t, "uniform_");
  ATTN_CHECK(a <= b, "uniform_: expected a <= b, got a=", a, " b=", b);
  if (no_draw(t)) return skipped(std::move(t));
  return fill_from(t, uniform(t.shape(), a, b, g, draw_dtype(t)));
}

Tensor normal_(Tensor t, Generator& g, double mean, double std) {
  check_float(t, "normal_");
  ATTN_CHECK(std >= 0, "normal_: expected std >= 0, got ", std);
  if (no_draw(t)) return skipped(std::move(t));
  return fill_from(t, normal(t.shape(), mean, std, g, draw_dtype(t)));
}

Tensor trunc_normal_(Tensor t, Generator& g, double mean, double std, double a, double b) {
  check_float(t, "trunc_normal_");
  if (no_draw(t)) return skipped(std::move(t));
  return fill_from(t, trunc_normal(t.shape(), mean, std, a, b, g, draw_dtype(t)));
}

Tensor xavier_uniform_(Tensor t, Generator& g, double gain) {
  check_float(t, "xavier_uniform_");
  auto [fan_in, fan_out] = fan_in_and_fan_out(t);
  const double bound = gain * std::sqrt(6.0 / double(fan_in + fan_out));
  return uniform_(std::move(t), g, -bound, bound);
}

Tensor kaiming_uniform_(Tensor t, Generator& g, double a) {
  check_float(t, "kaiming_uniform_");
  auto [fan_in, fan_out] = fan_in_and_fan_out(t);
  ATTN_CHECK(fan_in > 0, "kaiming_uniform_: fan_in is 0 for shape ", t.shape());
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double bound = gain * std::sqrt(3.0 / double(fan_in));
  return uniform_(std::move(t), g, -bound, bound);
}

}  // namespace attn::nn::init

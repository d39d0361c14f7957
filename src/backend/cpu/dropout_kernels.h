// Internal: dropout's mask-and-scale kernels, scalar (dropout.cpp) and AVX2 (dropout_avx2.cpp);
// src/ops/dropout.cpp picks one from attn::active_isa().
//
//   y[i] = x[i] * (keep_i ? scale : 0),  keep_i = (philox word of element i) >> 8 >= threshold
//
// for elements [i0, i1) of one stream (seed, offset), i0 a multiple of 4. The word of element i is
// word i % 4 of philox4x32(seed, offset + i / 4), as philox_uniform, whose value is
// (word >> 8) / 2^24: so keep_i == (philox_uniform(seed, offset, i) >= p) for
// threshold = ceil(p * 2^24).
//
// With relu, the kernels compute relu(x) * (keep_i ? scale : 0) in the same pass (relu as attn's:
// x > 0 ? x : (NaN ? x : 0)), so that dropout(relu(x)) costs one read and one write instead of two;
// relu_dropout_backward_* is dx = (y > 0 ? dy * scale : 0) from the fused output y alone (y > 0 iff
// x > 0 and the element was kept, since scale >= 1), without regenerating the mask.
#pragma once
#include <cstdint>

namespace attn::kernels {

struct DropoutStream {
  uint64_t seed = 0, offset = 0;
  uint32_t threshold = 0;
};

void dropout_scalar(const float* x, float* y, int64_t i0, int64_t i1, const DropoutStream& s, float scale, bool relu);
void dropout_scalar(const double* x, double* y, int64_t i0, int64_t i1, const DropoutStream& s, double scale,
                    bool relu);
void dropout_avx2(const float* x, float* y, int64_t i0, int64_t i1, const DropoutStream& s, float scale, bool relu);
void dropout_avx2(const double* x, double* y, int64_t i0, int64_t i1, const DropoutStream& s, double scale, bool relu);
void relu_dropout_backward_scalar(const float* y, const float* dy, float* dx, int64_t i0, int64_t i1, float scale);
void relu_dropout_backward_scalar(const double* y, const double* dy, double* dx, int64_t i0, int64_t i1, double scale);
void relu_dropout_backward_avx2(const float* y, const float* dy, float* dx, int64_t i0, int64_t i1, float scale);
void relu_dropout_backward_avx2(const double* y, const double* dy, double* dx, int64_t i0, int64_t i1, double scale);

}  // namespace attn::kernels

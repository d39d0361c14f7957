// Seedable, counter-based random numbers (Philox 4x32-10).
//
//   attn::manual_seed(42);                       // the global generator
//   attn::Generator g(7);  Tensor x = attn::randn({4, 4}, g);
//   uint32_t r[4]; attn::philox4x32(seed, counter, r);   // stateless, for kernels
//
// A Generator is (seed, offset): every draw consumes counters, so a run is reproducible from the
// seed alone and its state is two integers (saved in checkpoints). Kernels that draw in parallel
// (dropout) take a (seed, offset) pair and index the stream by element, so the result does not
// depend on the thread count, and the fused and naive attention paths drop the same elements.
#pragma once
#include <cstdint>
#include <vector>

#include "attn/core/tensor.h"

namespace attn {

// Philox4x32-10: 4 random u32 for (key = seed, counter).
void philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4]);
// Uniform float in [0, 1) from element `index` of stream (seed, offset): the shared definition.
float philox_uniform(uint64_t seed, uint64_t offset, uint64_t index);

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) { seed_ = seed; offset_ = offset; }
  // Reserves n consecutive counters and returns the first.
  uint64_t reserve(uint64_t n) { uint64_t o = offset_; offset_ += n; return o; }
  // Data parallelism: this process holds part `rank` of `parts` equal parts (along the leading,
  // batch dim) of every batch. reserve_batch(n, k), for a draw over this process's part of n
  // elements that takes element i from counter first + i / k (k = 4: dropout's layout, a philox4x32
  // call per 4 elements; k = 1: one counter per element), reserves the whole batch's n * parts and
  // returns the first counter of this part: so each example draws what it draws in one process at the
  // combined batch (exactly when k divides n), and the parts never share counters. (0, 1), the
  // default: reserve_batch(n, k) is reserve(n).
  void set_batch_shard(int64_t rank, int64_t parts) {
    shard_rank_ = uint64_t(rank);
    shard_parts_ = uint64_t(parts);
  }
  uint64_t reserve_batch(uint64_t n, uint64_t k = 1) {
    const uint64_t o = offset_ + shard_rank_ * ((n + k - 1) / k);
    offset_ += n * shard_parts_;
    return o;
  }
  double uniform();            // one U[0,1) draw (53 bits)
  double normal();             // one N(0,1) draw
  uint64_t next_u64();
  int64_t randint(int64_t n);  // uniform in [0, n)

 private:
  uint64_t seed_ = 0;
  uint64_t offset_ = 0;
  uint64_t shard_rank_ = 0, shard_parts_ = 1;
};

Generator& default_generator();
void manual_seed(uint64_t seed);

Tensor rand(const Shape& shape, Generator& g, DType dtype = DType::f32);                 // U[0,1)
Tensor uniform(const Shape& shape, double lo, double hi, Generator& g, DType dtype = DType::f32);
Tensor randn(const Shape& shape, Generator& g, DType dtype = DType::f32);
Tensor normal(const Shape& shape, double mean, double std, Generator& g, DType dtype = DType::f32);
Tensor bernoulli(const Shape& shape, double p, Generator& g, DType dtype = DType::f32);  // 1 with prob p
// bernoulli over a batch-leading shape, its counters from g.reserve_batch (per example, see above).
Tensor bernoulli_batch(const Shape& shape, double p, Generator& g, DType dtype = DType::f32);
Tensor randperm(int64_t n, Generator& g);                                                // i64
// Truncated normal as timm's trunc_normal_: N(mean, std) restricted to [a, b] (absolute bounds),
// by inverse-CDF sampling.
Tensor trunc_normal(const Shape& shape, double mean, double std, double a, double b, Generator& g,
                    DType dtype = DType::f32);

}  // namespace attn

// Internal: a dynamic split of kernel work items across the threads (the fused attention kernels).
//
//   run_items(items, scratch_floats, [&](int64_t it, float* scratch) { kern.fwd(a, it, scratch); });
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "attn/core/parallel.h"
#include "attn/core/tensor.h"

namespace attn {

// Runs fn(item, scratch) for every item, the threads taking the next item from a shared counter:
// causal items are uneven, and on a loaded machine a thread the OS deschedules holds up none of
// the others' items (with a fixed deal the wall time is the slower thread's). Each item writes
// its own outputs and rebuilds the scratch it reads, so the result does not depend on which
// thread ran it.
template <class F>
void run_items(int64_t items, int64_t scratch_floats, F&& fn) {
  if (items <= 0) return;
  const int64_t nt = std::min<int64_t>(get_num_threads(), items);
  std::atomic<int64_t> next{0};
  parallel_for(0, nt, 1, [&](int64_t, int64_t) {
    Tensor scratch = Tensor::empty({scratch_floats});
    float* ps = scratch.data<float>();
    for (int64_t it = next.fetch_add(1, std::memory_order_relaxed); it < items;
         it = next.fetch_add(1, std::memory_order_relaxed))
      fn(it, ps);
  });
}

}  // namespace attn

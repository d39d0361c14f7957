// Live and peak bytes held by tensor storage (every attn::Storage allocation), for tests and
// benchmarks that bound an op's memory.
//
//   attn::reset_peak_memory();                      // peak := live
//   Tensor y = attn::scaled_dot_product_attention(q, k, v).out;
//   int64_t extra = attn::memory_stats().peak_bytes - before.live_bytes;
//
// Counted with relaxed atomics in Storage's constructor and destructor (64-byte-rounded sizes);
// allocations outside Storage (std::vector scratch, oneDNN's own buffers) are not seen.
#pragma once
#include <cstddef>
#include <cstdint>

namespace attn {

struct MemoryStats {
  int64_t live_bytes = 0;    // currently allocated
  int64_t peak_bytes = 0;    // highest live_bytes since the last reset_peak_memory()
  int64_t allocations = 0;   // Storage objects created since start
};

MemoryStats memory_stats();
void reset_peak_memory();

namespace detail {
void note_storage_alloc(size_t bytes);   // called by Storage only
void note_storage_free(size_t bytes);
}  // namespace detail

}  // namespace attn

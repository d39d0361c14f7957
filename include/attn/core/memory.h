// Live and peak bytes held by tensor storage (every attn::Storage allocation), for tests and
// benchmarks that bound an op's memory.
//
//   attn::reset_peak_memory();                      // peak := live
//   Tensor y = attn::scaled_dot_product_attention(q, k, v).out;
//   int64_t extra = attn::memory_stats().peak_bytes - before.live_bytes;
//
// Counted with relaxed atomics in Storage's constructor and destructor (64-byte-rounded sizes);
// allocations outside Storage (std::vector scratch, oneDNN's own buffers) are not seen.
//
// Tensors of 1 MiB and more are mapped from the OS and, when freed, kept in a cache for the next
// tensor of their size class (a training step or an inference pass asks for the same sizes every
// time). release_cached_memory() hands the cache and the heap's free pages back to the OS, like
// torch.cuda.empty_cache(): call it after loading, or between phases that use different shapes.
// Sanitizer builds allocate every tensor with malloc instead, so ASan sees each use after free;
// ATTN_BLOCK_CACHE=0 in the environment does the same in any build.
#pragma once
#include <cstddef>
#include <cstdint>

namespace attn {

struct MemoryStats {
  int64_t live_bytes = 0;    // currently allocated
  int64_t peak_bytes = 0;    // highest live_bytes since the last reset_peak_memory()
  int64_t allocations = 0;   // Storage objects created since start
  int64_t cached_bytes = 0;  // freed blocks kept for reuse (not counted in live_bytes)
};

MemoryStats memory_stats();
void reset_peak_memory();
// Unmaps every cached block and trims the heap (malloc_trim): resident memory drops to what live
// tensors and the rest of the process hold.
void release_cached_memory();
// False in sanitizer builds and under ATTN_BLOCK_CACHE=0, where every tensor comes from malloc.
bool block_cache_enabled();

namespace detail {
void note_storage_alloc(size_t bytes);   // called by Storage only
void note_storage_free(size_t bytes);
void* storage_alloc(size_t bytes);         // 64-byte aligned; bytes a multiple of 64
void storage_free(void* p, size_t bytes);  // the same bytes as allocated
}  // namespace detail

}  // namespace attn

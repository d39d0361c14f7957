// Storage byte counters behind attn::memory_stats() (include/attn/core/memory.h).
#include "attn/core/memory.h"

#include <atomic>

namespace attn {

namespace {
std::atomic<int64_t> g_live{0}, g_peak{0}, g_allocs{0};
}  // namespace

namespace detail {
void note_storage_alloc(size_t bytes) {
  const int64_t now = g_live.fetch_add(int64_t(bytes), std::memory_order_relaxed) + int64_t(bytes);
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  int64_t p = g_peak.load(std::memory_order_relaxed);
  while (now > p && !g_peak.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
  }
}
void note_storage_free(size_t bytes) { g_live.fetch_sub(int64_t(bytes), std::memory_order_relaxed); }
}  // namespace detail

MemoryStats memory_stats() {
  MemoryStats s;
  s.live_bytes = g_live.load(std::memory_order_relaxed);
  s.peak_bytes = g_peak.load(std::memory_order_relaxed);
  s.allocations = g_allocs.load(std::memory_order_relaxed);
  return s;
}

void reset_peak_memory() { g_peak.store(g_live.load(std::memory_order_relaxed), std::memory_order_relaxed); }

}  // namespace attn

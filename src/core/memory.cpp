// Storage memory: the byte counters behind attn::memory_stats() and the block cache that large
// tensors are allocated from (include/attn/core/memory.h; docs/design.md, Memory).
#include "attn/core/memory.h"

#include <sys/mman.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <list>
#include <mutex>

#include "attn/core/env.h"
#include "attn/core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#define ATTN_NO_BLOCK_CACHE 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ATTN_NO_BLOCK_CACHE 1
#endif
#endif

namespace attn {

namespace {
std::atomic<int64_t> g_live{0}, g_peak{0}, g_peak_ever{0}, g_allocs{0}, g_cached{0};

// Blocks of at least kBlockMin bytes come from mmap, rounded up to one of 8 size classes per
// octave (under 12.5% more; pages past the tensor's end are never touched, so they cost address
// space, not memory). A freed block waits in the cache for the next request of its class: a
// training step or an inference pass asks for the same sizes every time, so in steady state no
// memory is mapped, faulted in or returned. The heap (malloc) did this before, but its free
// chunks fragment: after a few ViT-B passes at batch 8 it held 2.5x the bytes a pass needs.
constexpr size_t kBlockMin = size_t(1) << 20;

size_t block_class(size_t n) {
  const int lg = 63 - __builtin_clzll(n);
  const size_t step = size_t(1) << (lg - 3);
  return (n + step - 1) / step * step;
}

struct Block {
  void* p;
  size_t bytes;
};

struct BlockCache {
  std::mutex mu;
  std::list<Block> blocks;   // oldest first; their bytes are g_cached (changed under mu)

  // At most the larger of 512 MiB and 5/4 of the most tensor bytes ever live at once. Exactly the
  // peak was too tight: at the end of a training step the cache holds the forward's activation blocks
  // and the backward's gradient blocks, whose classes differ, and together they can pass the peak
  // (vit_fmnist at batch 128: 605 MB against a peak of 581 MB). Evicting the difference meant 44 MB
  // of fresh pages mapped and faulted in every step (10,800 faults, ~2% of the step).
  static int64_t cap() {
    const int64_t peak = g_peak_ever.load(std::memory_order_relaxed);
    return std::max<int64_t>(int64_t(512) << 20, peak + peak / 4);
  }
  void* take(size_t cls) {
    std::lock_guard<std::mutex> lk(mu);
    for (auto it = blocks.rbegin(); it != blocks.rend(); ++it)
      if (it->bytes == cls) {
        void* p = it->p;
        blocks.erase(std::next(it).base());
        g_cached.fetch_sub(int64_t(cls), std::memory_order_relaxed);
        return p;
      }
    return nullptr;
  }
  void give(void* p, size_t cls) {
    std::list<Block> evicted;
    {
      std::lock_guard<std::mutex> lk(mu);
      blocks.push_back({p, cls});
      int64_t bytes = g_cached.load(std::memory_order_relaxed) + int64_t(cls);
      const int64_t limit = cap();
      while (bytes > limit && !blocks.empty()) {
        bytes -= int64_t(blocks.front().bytes);
        evicted.splice(evicted.end(), blocks, blocks.begin());
      }
      g_cached.store(bytes, std::memory_order_relaxed);
    }
    for (const Block& b : evicted) munmap(b.p, b.bytes);
  }
  void clear() {
    std::list<Block> all;
    {
      std::lock_guard<std::mutex> lk(mu);
      all.swap(blocks);
      g_cached.store(0, std::memory_order_relaxed);
    }
    for (const Block& b : all) munmap(b.p, b.bytes);
  }
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache;   // never destroyed: tensors may outlive static destructors
  return *c;
}

// ATTN_BLOCK_CACHE=0 turns the cache off (every tensor from malloc, as sanitizer builds do).
bool cache_on() {
  static const bool on = env::block_cache();
  return on;
}

[[maybe_unused]] bool cached_size(size_t bytes) { return bytes >= kBlockMin && cache_on(); }
}  // namespace

namespace detail {
void note_storage_alloc(size_t bytes) {
  const int64_t now = g_live.fetch_add(int64_t(bytes), std::memory_order_relaxed) + int64_t(bytes);
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  int64_t p = g_peak.load(std::memory_order_relaxed);
  while (now > p && !g_peak.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
  }
  p = g_peak_ever.load(std::memory_order_relaxed);
  while (now > p && !g_peak_ever.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
  }
}
void note_storage_free(size_t bytes) { g_live.fetch_sub(int64_t(bytes), std::memory_order_relaxed); }

void* storage_alloc(size_t bytes) {
#if !defined(ATTN_NO_BLOCK_CACHE)
  if (cached_size(bytes)) {
    const size_t cls = block_class(bytes);
    if (void* p = cache().take(cls)) return p;
    void* p = mmap(nullptr, cls, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) fail("Storage: could not map ", bytes, " bytes (", g_cached.load(std::memory_order_relaxed),
                                 " bytes cached)");
    return p;
  }
#endif
  void* p = std::aligned_alloc(64, bytes);
  if (!p) fail("Storage: could not allocate ", bytes, " bytes");
  return p;
}

void storage_free(void* p, size_t bytes) {
#if !defined(ATTN_NO_BLOCK_CACHE)
  if (cached_size(bytes)) {
    cache().give(p, block_class(bytes));
    return;
  }
#endif
  std::free(p);
}
}  // namespace detail

MemoryStats memory_stats() {
  MemoryStats s;
  s.live_bytes = g_live.load(std::memory_order_relaxed);
  s.peak_bytes = g_peak.load(std::memory_order_relaxed);
  s.allocations = g_allocs.load(std::memory_order_relaxed);
  s.cached_bytes = g_cached.load(std::memory_order_relaxed);
  return s;
}

void reset_peak_memory() { g_peak.store(g_live.load(std::memory_order_relaxed), std::memory_order_relaxed); }

bool block_cache_enabled() {
#if defined(ATTN_NO_BLOCK_CACHE)
  return false;
#else
  return cache_on();
#endif
}

void release_cached_memory() {
  cache().clear();
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace attn

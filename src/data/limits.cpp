// The process-wide ceilings on input files (attn/data/limits.h).
#include "attn/data/limits.h"

#include <atomic>

#include "attn/core/env.h"
#include "attn/core/error.h"

namespace attn::data {

namespace {

// 0: not read yet (the environment is read at the first use, then kept).
std::atomic<int64_t> g_max_image_pixels{0};
std::atomic<int64_t> g_max_inflated_bytes{0};

int64_t limit_value(std::atomic<int64_t>& slot, std::optional<int64_t> (*from_env)(), int64_t fallback) {
  int64_t v = slot.load(std::memory_order_relaxed);
  if (v > 0) return v;
  const int64_t fresh = from_env().value_or(fallback);
  // A set_ call that raced with this first read wins.
  if (slot.compare_exchange_strong(v, fresh, std::memory_order_relaxed)) return fresh;
  return v;
}

}  // namespace

int64_t max_image_pixels() { return limit_value(g_max_image_pixels, env::max_image_pixels, kDefaultMaxImagePixels); }

void set_max_image_pixels(int64_t pixels) {
  ATTN_CHECK(pixels > 0, "set_max_image_pixels: expected a pixel count > 0, got ", pixels);
  g_max_image_pixels.store(pixels, std::memory_order_relaxed);
}

int64_t max_inflated_bytes() {
  return limit_value(g_max_inflated_bytes, env::max_inflated_bytes, kDefaultMaxInflatedBytes);
}

void set_max_inflated_bytes(int64_t bytes) {
  ATTN_CHECK(bytes > 0, "set_max_inflated_bytes: expected a byte count > 0, got ", bytes);
  g_max_inflated_bytes.store(bytes, std::memory_order_relaxed);
}

}  // namespace attn::data

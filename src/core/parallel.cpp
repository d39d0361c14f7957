#include "attn/core/parallel.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <optional>

#include "attn/core/env.h"

namespace attn {

namespace {
int initial_threads() {
  if (const std::optional<int> n = env::num_threads()) {
    omp_set_num_threads(*n);
    return *n;
  }
  return omp_get_max_threads();
}
int& thread_count() {
  static int n = initial_threads();
  return n;
}
}  // namespace

void set_num_threads(int n) {
  if (n <= 0) return;
  thread_count() = n;
  omp_set_num_threads(n);
}

int get_num_threads() { return thread_count(); }

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = (n + grain - 1) / grain;
  const int nt = int(std::min<int64_t>(get_num_threads(), max_chunks));
  if (nt <= 1 || omp_in_parallel()) { fn(begin, end); return; }
  // An exception must not leave the region (that terminates the process): the first one thrown is
  // kept, the other threads finish their chunks, and it is rethrown here.
  std::exception_ptr first;
  std::atomic<bool> failed{false};
#pragma omp parallel num_threads(nt)
  {
    const int64_t t = omp_get_thread_num();
    const int64_t chunk = (n + nt - 1) / nt;
    const int64_t b = begin + t * chunk, e = std::min(end, b + chunk);
    try {
      if (b < e) fn(b, e);
    } catch (...) {
      if (!failed.exchange(true)) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace attn

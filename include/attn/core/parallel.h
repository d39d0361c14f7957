// One threading runtime for the process: OpenMP, the one Debian's oneDNN is built on.
//
//   attn::set_num_threads(2);                    // or ATTN_NUM_THREADS=2, or --threads 2
//   attn::parallel_for(0, rows, 16, [&](int64_t b, int64_t e) { for (i = b; i < e; ++i) ...; });
//
// Work is split into contiguous chunks by a static schedule that depends only on (range, grain,
// thread count), so results are bit-identical across runs at a fixed thread count.
#pragma once
#include <cstdint>
#include <functional>

namespace attn {

void set_num_threads(int n);
int get_num_threads();
// Runs fn(begin, end) over [begin, end) in chunks of at least `grain` items, in parallel when the
// range is large enough and we are not already inside a parallel region. An exception thrown by fn
// reaches the caller: in parallel, the first one thrown, after every other chunk has run to its end
// (or thrown too).
void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);

}  // namespace attn

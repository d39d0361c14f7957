// parallel_for: an exception thrown inside its OpenMP region (which would terminate the process)
// reaches the caller, the first one thrown, after the other threads finished their chunks; the
// serial and nested paths pass exceptions on as they always did. Also through an op whose scratch
// allocation fails inside its region (scaled_dot_product_attention under an address-space limit).
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "attn/attn.h"
#include "attn/core/parallel.h"
#include "attn/ops/attention.h"
#include "errors.h"

using namespace attn;
using test::error_of;

namespace {

// Sets the thread count for one scope.
struct Threads {
  int old = get_num_threads();
  explicit Threads(int n) { set_num_threads(n); }
  ~Threads() { set_num_threads(old); }
};

}  // namespace

TEST(ParallelFor, AnErrorInOneChunkReachesTheCallerAfterTheOthersFinish) {
  Threads two(2);
  std::vector<std::atomic<int>> ran(4);
  const std::string e = error_of([&] {
    parallel_for(0, 4, 2, [&](int64_t b, int64_t end) {
      if (b == 0) fail("chunk [", b, ", ", end, "): bad input");
      for (int64_t i = b; i < end; ++i) ran[size_t(i)] = 1;
    });
  });
  EXPECT_EQ(e, "chunk [0, 2): bad input");
  EXPECT_EQ(ran[2] + ran[3], 2) << "the other chunk ran to its end";
  // And the pool still works afterwards.
  std::atomic<int64_t> sum{0};
  parallel_for(0, 100, 1, [&](int64_t b, int64_t end) {
    for (int64_t i = b; i < end; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 4950);
}

TEST(ParallelFor, TheFirstOfSeveralErrorsArrivesAndOtherTypesKeepTheirType) {
  Threads two(2);
  const std::string e = error_of([] { parallel_for(0, 2, 1, [](int64_t b, int64_t) { fail("chunk ", b); }); });
  EXPECT_TRUE(e == "chunk 0" || e == "chunk 1") << e;
  EXPECT_THROW(parallel_for(0, 2, 1, [](int64_t b, int64_t) { if (b == 1) throw std::out_of_range("index"); }),
               std::out_of_range);
}

TEST(ParallelFor, SerialAndNestedPathsPassErrorsOn) {
  {
    Threads one(1);   // one thread: fn runs on the caller's thread
    EXPECT_EQ(error_of([] { parallel_for(0, 10, 1, [](int64_t, int64_t) { fail("serial"); }); }), "serial");
  }
  Threads two(2);
  // Too small a range for two chunks: serial.
  EXPECT_EQ(error_of([] { parallel_for(0, 3, 16, [](int64_t, int64_t) { fail("small"); }); }), "small");
  // Inside a region a parallel_for runs serially (one call over the whole range); its error leaves
  // through the outer one.
  EXPECT_EQ(error_of([] {
              parallel_for(0, 2, 1, [](int64_t b, int64_t) {
                parallel_for(0, 8, 1, [b](int64_t ib, int64_t ie) {
                  if (b == 1) fail("inner [", ib, ", ", ie, ")");
                });
              });
            }),
            "inner [0, 8)");
}

// The fused attention allocates each thread's scratch inside its parallel region. Under an address
// space limit that leaves room for the inputs and the output but not for the scratch, the
// allocation's attn::Error reaches the caller (it used to terminate the process). In a death-test
// child: the limit is the child's alone.
TEST(ParallelForDeathTest, AnOpsAllocationFailureInsideItsRegionReachesTheCaller) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan reserves terabytes of address space: no address-space limit under it";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "ASan reserves terabytes of address space: no address-space limit under it";
#endif
#endif
  GTEST_FLAG_SET(death_test_style, "threadsafe");   // the child re-runs this test alone
  const auto attention_over_the_limit = [] {
    set_num_threads(2);
    // Both threads started (and each with a malloc arena) before the limit.
    parallel_for(0, 2, 1, [](int64_t, int64_t) { Tensor::empty({1 << 10}); });
    // q (2, 1, 1, HS), k, v (2, 1, 1, HS): 2 MiB each; the forward's scratch per thread is about
    // 4 x 64 rows x HS floats = 256 MiB.
    const int64_t HS = int64_t(1) << 18;
    Tensor q = Tensor::full({2, 1, 1, HS}, 0.01), k = Tensor::full({2, 1, 1, HS}, 0.01), v = Tensor::ones({2, 1, 1, HS});
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    const rlim_t now = rlim_t(pages) * rlim_t(::sysconf(_SC_PAGESIZE));
    const rlimit lim{now + (64 << 20), RLIM_INFINITY};
    if (::setrlimit(RLIMIT_AS, &lim) != 0) std::_Exit(3);
    SdpaOptions o;
    o.impl = SdpaImpl::fused;
    try {
      scaled_dot_product_attention(q, k, v, Tensor(), o);
    } catch (const Error& e) {
      std::fprintf(stderr, "caught: %s\n", e.what());
      std::_Exit(0);
    }
    std::_Exit(1);   // it ran: the limit did not bite
  };
  EXPECT_EXIT(attention_over_the_limit(), ::testing::ExitedWithCode(0), "caught: Storage: could not (map|allocate)");
}

// The tests' one switch for long tests, ATTN_TEST_SLOW (docs/environment.md): 0 leaves out every test
// whose name contains "Slow" (convergence runs, full-size models; the sanitizer stage sets it), any
// other value or none runs them. tests/support/test_main.cpp applies it as a gtest filter.
//
//   if (!test::slow_tests_enabled()) GTEST_SKIP() << "ATTN_TEST_SLOW=0";   // for a part of a test
#pragma once
#include <cstdlib>
#include <cstring>

namespace attn::test {

inline bool slow_tests_enabled() {
  const char* s = std::getenv("ATTN_TEST_SLOW");
  return !(s && std::strcmp(s, "0") == 0);
}

// ATTN_TEST_SLOW=1 (exactly): also the longest "Slow" tests (minutes each on 2 cores, e.g. swin_s's
// parity at three sizes), which otherwise skip themselves:
//   if (!test::longest_tests_enabled()) GTEST_SKIP() << "ATTN_TEST_SLOW=1 runs it";
inline bool longest_tests_enabled() {
  const char* s = std::getenv("ATTN_TEST_SLOW");
  return s && std::strcmp(s, "1") == 0;
}

}  // namespace attn::test

// Test entry point: 2 threads unless ATTN_NUM_THREADS says otherwise; ATTN_TEST_SLOW=0 skips the
// long convergence tests (used by the sanitizer run) by filtering names containing "Slow". SIGPIPE is
// ignored: a write to a child that has died (the PyTorch reference server, an `attn` process) fails
// with EPIPE, which the test reports, instead of ending the test binary without a word. At the end it
// records the kernel paths the tests ran (tests/support/isa_record.h).
#include <gtest/gtest.h>

#include <csignal>
#include <string>

#include "isa_record.h"
#include "slow.h"

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  ::testing::InitGoogleTest(&argc, argv);
  if (!attn::test::slow_tests_enabled()) {
    std::string f = ::testing::GTEST_FLAG(filter);
    ::testing::GTEST_FLAG(filter) = f + (f.find('-') == std::string::npos ? "-" : ":") + "*Slow*";
  }
  const int rc = RUN_ALL_TESTS();
  attn::test::write_isa_record();   // the kernel paths these tests ran (scripts/isa_coverage.py)
  return rc;
}

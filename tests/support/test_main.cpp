// Test entry point: 2 threads unless ATTN_NUM_THREADS says otherwise; ATTN_TEST_SLOW=0 skips the
// long convergence tests (used by the sanitizer run) by filtering names containing "Slow".
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (const char* s = std::getenv("ATTN_TEST_SLOW"); s && std::string(s) == "0") {
    std::string f = ::testing::GTEST_FLAG(filter);
    ::testing::GTEST_FLAG(filter) = f + (f.find('-') == std::string::npos ? "-" : ":") + "*Slow*";
  }
  return RUN_ALL_TESTS();
}

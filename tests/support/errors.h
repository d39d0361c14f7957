// The message of the attn::Error a call throws, for tests of error messages.
//
//   EXPECT_EQ(test::error_of([] { data::read_image("missing.png"); }), "read_image: cannot open ...");
//   EXPECT_EQ(test::error_of([&] { m.forward(x); }), test::kNoError);
#pragma once
#include <functional>
#include <string>

#include "attn/core/error.h"

namespace attn::test {

// What error_of returns when f does not throw.
inline const std::string kNoError = "<no error>";

// The what() of the attn::Error f throws, or kNoError. Other exceptions pass through.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return kNoError;
}

}  // namespace attn::test

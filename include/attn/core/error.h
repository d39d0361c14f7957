// attn::Error — the one exception type the library throws on bad input.
//
//   ATTN_CHECK(a.dim() == 2, "matmul: expected a 2-D tensor, got shape ", a.shape());
//
// Messages name the operation, what was expected and what was found. The library never calls
// exit/abort on user input; the CLI catches Error, prints what() and exits non-zero.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
#include <cstdint>

namespace attn {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

namespace detail {
inline void stream_one(std::ostringstream& os, const std::vector<int64_t>& v) {
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << ']';
}
template <class T>
void stream_one(std::ostringstream& os, const T& v) { os << v; }
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (stream_one(os, args), ...);
  return os.str();
}
}  // namespace detail

template <class... Args>
[[noreturn]] void fail(const Args&... args) { throw Error(detail::cat(args...)); }

}  // namespace attn

#define ATTN_CHECK(cond, ...)                       \
  do {                                              \
    if (!(cond)) ::attn::fail(__VA_ARGS__);         \
  } while (0)

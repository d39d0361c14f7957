// Tests under resource limits: code run in a forked child (its own limits, its crash its own), a
// file-size limit (RLIMIT_FSIZE: writes past it fail with EFBIG, as on a full disk, also for root)
// and the count of this process's open file descriptors.
//
//   const test::ChildResult r = test::in_child([&] {
//     test::FileSizeLimit limit(1 << 20);     // writes beyond 1 MiB fail (SIGXFSZ ignored)
//     return test::error_of([&] { io::save_safetensors(path, big); });
//   });
//   EXPECT_TRUE(r.exited_ok()) << r.describe();    // r.out: what the function returned
//   const size_t fds = test::open_descriptors();   // before and after failures: nothing leaked
#pragma once
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <string>

namespace attn::test {

// While alive: writes that would make a regular file larger than `bytes` fail with EFBIG (the
// process-wide soft RLIMIT_FSIZE; SIGXFSZ, which would kill the process, ignored). Restores both.
// Print nothing to a file while it holds.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old_);
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    ::sigaction(SIGXFSZ, &ign, &old_action_);
    rlimit lim = old_;
    lim.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &lim);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    ::sigaction(SIGXFSZ, &old_action_, nullptr);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit old_{};
  struct sigaction old_action_ {};
};

struct ChildResult {
  int status = -1;   // waitpid's
  std::string out;   // what the function returned (or "exception: <what>")

  bool exited_ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
  std::string describe() const {
    std::string s = WIFEXITED(status)     ? "exited " + std::to_string(WEXITSTATUS(status))
                    : WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                          : "status " + std::to_string(status);
    return s + ", returned '" + out + "'";
  }
};

// Runs fn in a forked child and returns its result (exit 0) or the what() of what it threw (exit 2).
// The child is a copy of this process with one thread: fn must not start OpenMP work (libgomp's
// threads are not in the child).
inline ChildResult in_child(const std::function<std::string()>& fn) {
  int fds[2];
  ChildResult r;
  if (::pipe(fds) != 0) return r;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    int code = 0;
    std::string out;
    try {
      out = fn();
    } catch (const std::exception& e) {
      out = std::string("exception: ") + e.what();
      code = 2;
    }
    for (size_t put = 0; put < out.size();) {
      const ssize_t w = ::write(fds[1], out.data() + put, out.size() - put);
      if (w <= 0) break;
      put += size_t(w);
    }
    ::_exit(code);   // no atexit handlers, no gtest teardown in the child
  }
  ::close(fds[1]);
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) r.out.append(buf, size_t(n));
  ::close(fds[0]);
  if (pid > 0) ::waitpid(pid, &r.status, 0);
  return r;
}

// The file descriptors this process has open now.
inline size_t open_descriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

}  // namespace attn::test

// A time limit for one test (or one part of it), shorter than the 1800 s every test binary has: a
// hang then fails within seconds, saying what hung, instead of holding the whole binary until ctest
// kills it.
//
//   {
//     test::Watchdog dog(std::chrono::seconds(30), "destroying 20 loaders");
//     ...   // still running after 30 s: the message on stderr, a gtest failure, and the process exits 1
//   }       // done in time: the watchdog stops
//
// A hang cannot be unwound from another thread, so the watchdog ends the process (std::_Exit(1))
// after reporting; ctest shows the message and the test as failed.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace attn::test {

class Watchdog {
 public:
  Watchdog(std::chrono::milliseconds limit, std::string what) : what_(std::move(what)) {
    thread_ = std::thread([this, limit] {
      std::unique_lock<std::mutex> lk(mu_);
      if (cv_.wait_for(lk, limit, [this] { return done_; })) return;
      const double s = std::chrono::duration<double>(limit).count();
      std::fprintf(stderr, "watchdog: %s: still running after %g s (a hang?); ending the test binary\n",
                   what_.c_str(), s);
      std::fflush(stderr);
      ADD_FAILURE() << "watchdog: " << what_ << ": still running after " << s << " s";
      std::_Exit(1);
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace attn::test

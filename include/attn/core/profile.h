// A per-op time profile of the calling thread: where a forward pass spends its time.
//
//   attn::profile::start();                 // records from this thread, from now on
//   model.forward(x);
//   for (const auto& op : attn::profile::stop()) std::printf("%s %lld %.3f\n", op.name, op.calls, op.seconds);
//
// Ops, kernels and GEMMs mark their extent with ATTN_PROFILE("name"). Times are exclusive: a scope
// nested in another (the oneDNN GEMM inside linear, a layer norm inside a fused op) is counted in its
// own row and not in its parent's, so the rows add up to the profiled time. Only the thread that
// called start() records; when no profile runs, a scope costs one relaxed atomic load.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

namespace attn::profile {

struct OpTime {
  const char* name;     // the literal given to ATTN_PROFILE
  int64_t calls = 0;
  double seconds = 0;   // exclusive of nested scopes
};

// Starts recording on the calling thread (clears what an earlier profile recorded).
void start();
// Stops recording and returns the ops, the most time first.
std::vector<OpTime> stop();
// True while a profile records on the calling thread.
bool recording();

namespace detail {
extern std::atomic<bool> g_active;
struct Frame;
Frame* enter(const char* name);
void leave(Frame* f);
}  // namespace detail

class Scope {
 public:
  explicit Scope(const char* name)
      : frame_(detail::g_active.load(std::memory_order_relaxed) ? detail::enter(name) : nullptr) {}
  ~Scope() {
    if (frame_) detail::leave(frame_);
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  detail::Frame* frame_;
};

}  // namespace attn::profile

#define ATTN_PROFILE_CAT2(a, b) a##b
#define ATTN_PROFILE_CAT(a, b) ATTN_PROFILE_CAT2(a, b)
#define ATTN_PROFILE(name) ::attn::profile::Scope ATTN_PROFILE_CAT(attn_profile_scope_, __LINE__)(name)

// The per-op profile (attn/core/profile.h): a stack of open scopes on the recording thread, and
// per name a call count and the exclusive time (a scope's time less that of the scopes inside it).
#include "attn/core/profile.h"

#include <algorithm>
#include <cstring>
#include <thread>

namespace attn::profile {
namespace detail {

std::atomic<bool> g_active{false};

struct Frame {
  const char* name;
  std::chrono::steady_clock::time_point t0;
  double nested = 0;   // seconds spent in scopes inside this one
};

namespace {
using Clock = std::chrono::steady_clock;
std::atomic<std::thread::id> g_owner{};
std::vector<Frame> g_stack;     // open scopes, innermost last (reserved: pointers stay valid)
std::vector<OpTime> g_totals;   // per name, in first-seen order
constexpr size_t kMaxDepth = 64;

OpTime& total_of(const char* name) {
  for (auto& t : g_totals)
    if (t.name == name || std::strcmp(t.name, name) == 0) return t;
  g_totals.push_back({name, 0, 0});
  return g_totals.back();
}
}  // namespace

Frame* enter(const char* name) {
  if (std::this_thread::get_id() != g_owner.load(std::memory_order_relaxed) || g_stack.size() >= kMaxDepth) return nullptr;
  g_stack.push_back({name, Clock::now(), 0});
  return &g_stack.back();
}

void leave(Frame* f) {
  if (g_stack.empty() || f != &g_stack.back()) return;   // a profile started or stopped inside it
  const double s = std::chrono::duration<double>(Clock::now() - f->t0).count();
  OpTime& t = total_of(f->name);
  t.calls += 1;
  t.seconds += s - f->nested;
  g_stack.pop_back();
  if (!g_stack.empty()) g_stack.back().nested += s;
}

}  // namespace detail

void start() {
  detail::g_owner.store(std::this_thread::get_id());
  detail::g_stack.clear();
  detail::g_stack.reserve(detail::kMaxDepth);
  detail::g_totals.clear();
  detail::g_active.store(true, std::memory_order_relaxed);
}

std::vector<OpTime> stop() {
  detail::g_active.store(false, std::memory_order_relaxed);
  detail::g_stack.clear();
  std::vector<OpTime> out = detail::g_totals;
  std::stable_sort(out.begin(), out.end(), [](const OpTime& a, const OpTime& b) { return a.seconds > b.seconds; });
  return out;
}

bool recording() {
  return detail::g_active.load(std::memory_order_relaxed) && std::this_thread::get_id() == detail::g_owner.load();
}

}  // namespace attn::profile

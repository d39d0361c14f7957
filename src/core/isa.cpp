#include "attn/core/isa.h"

#include <cpuid.h>

#include <atomic>

#include "attn/core/env.h"
#include "attn/core/error.h"

namespace attn {

Isa detected_isa() {
  static const Isa isa = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
      return Isa::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::avx2;
    return Isa::scalar;
  }();
  return isa;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "?";
}

static Isa parse_env() {
  const std::optional<Isa> want = env::isa();
  if (!want) return detected_isa();
  if (int(*want) > int(detected_isa()))
    fail("ATTN_ISA=", isa_name(*want), ": this CPU supports at most ", isa_name(detected_isa()));
  return *want;
}

static Isa& active() {
  static Isa a = parse_env();
  return a;
}

Isa active_isa() { return active(); }

void set_isa(Isa isa) {
  ATTN_CHECK(int(isa) <= int(detected_isa()), "set_isa: ", isa_name(isa),
             " requested, but this CPU supports at most ", isa_name(detected_isa()));
  active() = isa;
}

const char* kernel_path_name(KernelPath p) {
  switch (p) {
    case KernelPath::scalar: return "scalar";
    case KernelPath::avx2: return "avx2";
    case KernelPath::avx512: return "avx512";
    case KernelPath::avx512_bf16: return "avx512_bf16";
    case KernelPath::amx: return "amx";
  }
  return "?";
}

namespace {
std::atomic<unsigned> g_paths_run{0};

// CPUID leaf 7: AVX512-BF16 is sub-leaf 1 EAX bit 5, AMX-BF16 sub-leaf 0 EDX bit 22 (AMX-TILE bit 24).
bool cpuid_bit(unsigned subleaf, int reg, unsigned bit) {
  unsigned r[4] = {0, 0, 0, 0};
  if (!__get_cpuid_count(7, subleaf, &r[0], &r[1], &r[2], &r[3])) return false;
  return (r[reg] >> bit) & 1u;
}
}  // namespace

unsigned kernel_paths_run() { return g_paths_run.load(std::memory_order_relaxed); }

bool kernel_path_available(KernelPath p) {
  switch (p) {
    case KernelPath::scalar:
    case KernelPath::avx2:
    case KernelPath::avx512: return int(p) <= int(detected_isa());
    case KernelPath::avx512_bf16: return detected_isa() == Isa::avx512 && cpuid_bit(1, 0, 5);
    case KernelPath::amx: return cpuid_bit(0, 3, 22) && cpuid_bit(0, 3, 24);
  }
  return false;
}

namespace detail {
void note_kernel_path(KernelPath p) {
  const unsigned bit = kernel_path_bit(p);
  // Read first: after the first call of a path this is a read of a shared line, not a write.
  if (!(g_paths_run.load(std::memory_order_relaxed) & bit)) g_paths_run.fetch_or(bit, std::memory_order_relaxed);
}

Isa dispatch_isa() {
  const Isa isa = active_isa();
  note_kernel_path(KernelPath(int(isa)));
  return isa;
}
}  // namespace detail

}  // namespace attn

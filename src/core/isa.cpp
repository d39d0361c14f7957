#include "attn/core/isa.h"

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

}  // namespace attn

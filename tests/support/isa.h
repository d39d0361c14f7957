// Running a test on every instruction-set path this CPU supports, putting the active one back after.
//
//   test::IsaRestore restore;                      // the active ISA again when the test ends
//   for (Isa isa : test::supported_isas()) { set_isa(isa); ... }
//   test::for_each_isa([&](Isa isa) { ... });      // the same in one call
#pragma once
#include <vector>

#include "attn/core/isa.h"

namespace attn::test {

// Puts back the ISA that was active when it was made (also when an assertion ends the test early).
struct IsaRestore {
  Isa saved = active_isa();
  IsaRestore() = default;
  IsaRestore(const IsaRestore&) = delete;
  IsaRestore& operator=(const IsaRestore&) = delete;
  ~IsaRestore() { set_isa(saved); }
};

// The ISAs this CPU runs, scalar first.
inline std::vector<Isa> supported_isas() {
  std::vector<Isa> v;
  for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (int(i) <= int(detected_isa())) v.push_back(i);
  return v;
}

// Calls f(isa) with each supported ISA active in turn; the one active before is restored after.
template <class F>
void for_each_isa(F&& f) {
  IsaRestore restore;
  for (Isa isa : supported_isas()) {
    set_isa(isa);
    f(isa);
  }
}

}  // namespace attn::test

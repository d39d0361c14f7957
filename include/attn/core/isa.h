// Which SIMD path the CPU kernels take: chosen once from the CPU, forceable for tests.
//
//   ATTN_ISA=avx512|avx2|scalar  (environment)   or   attn::set_isa(attn::Isa::avx2);
//
// Forcing a path the CPU lacks is an error. oneDNN has its own switch, ONEDNN_MAX_CPU_ISA.
#pragma once

namespace attn {

enum class Isa { scalar = 0, avx2 = 1, avx512 = 2 };

Isa detected_isa();        // the best the CPU supports
Isa active_isa();          // detected, or as forced by ATTN_ISA / set_isa
void set_isa(Isa isa);     // throws attn::Error if the CPU lacks it
const char* isa_name(Isa isa);

}  // namespace attn

// Which SIMD path the CPU kernels take: chosen once from the CPU, forceable for tests.
//
//   ATTN_ISA=avx512|avx2|scalar  (environment)   or   attn::set_isa(attn::Isa::avx2);
//
// Forcing a path the CPU lacks is an error. oneDNN has its own switch, ONEDNN_MAX_CPU_ISA.
//
// Which kernel paths a process has run, for test coverage (scripts/isa_coverage.py):
//
//   if (attn::kernel_paths_run() & attn::kernel_path_bit(attn::KernelPath::avx2)) ...   // AVX2 kernels ran
//   attn::kernel_path_available(attn::KernelPath::amx);                                 // this CPU has AMX
#pragma once

namespace attn {

enum class Isa { scalar = 0, avx2 = 1, avx512 = 2 };

Isa detected_isa();        // the best the CPU supports
Isa active_isa();          // detected, or as forced by ATTN_ISA / set_isa
void set_isa(Isa isa);     // throws attn::Error if the CPU lacks it
const char* isa_name(Isa isa);

// The kernel paths: attn's own kernels in each Isa (the same numbers), and oneDNN's native bf16 matmul
// (linear() with a bf16 weight, attn/ops/matmul.h) on AVX512-BF16 or on AMX.
enum class KernelPath { scalar = 0, avx2 = 1, avx512 = 2, avx512_bf16 = 3, amx = 4 };
inline constexpr KernelPath kAllKernelPaths[] = {KernelPath::scalar, KernelPath::avx2, KernelPath::avx512,
                                                 KernelPath::avx512_bf16, KernelPath::amx};
constexpr unsigned kernel_path_bit(KernelPath p) { return 1u << unsigned(p); }
const char* kernel_path_name(KernelPath p);   // "scalar", "avx2", "avx512", "avx512_bf16", "amx"
// The paths this process has run so far (kernel_path_bit()s): each attn kernel notes the ISA it was
// dispatched to, the bf16 matmul the ISA of the implementation oneDNN chose.
unsigned kernel_paths_run();
// Whether this CPU has the path: an Isa up to detected_isa(); AVX512-BF16 and AMX-BF16 from cpuid.
bool kernel_path_available(KernelPath p);

namespace detail {
void note_kernel_path(KernelPath p);
// active_isa(), noted as run: what kernel dispatch calls.
Isa dispatch_isa();
}  // namespace detail

}  // namespace attn

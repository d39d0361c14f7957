// Kernel paths (attn/core/isa.h): kernel_paths_run() records the ISA each attn kernel was dispatched
// to, and the ISA of oneDNN's bf16 matmul where it runs natively (AVX512-BF16 or AMX);
// kernel_path_available() agrees with the CPU's flags in /proc/cpuinfo. The record that
// scripts/isa_coverage.py summarises comes from kernel_paths_run().
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "attn/attn.h"
#include "isa.h"

using namespace attn;

namespace {

bool ran(KernelPath p) { return (kernel_paths_run() & kernel_path_bit(p)) != 0; }

// The "flags" line of /proc/cpuinfo, with a space at each end.
std::string cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) return " " + line.substr(line.find(':') + 1) + " ";
  return "";
}
bool has_flag(const std::string& flags, const std::string& f) { return flags.find(" " + f + " ") != std::string::npos; }

}  // namespace

// First in this binary: nothing has run yet.
TEST(KernelPaths, NoneRunBeforeAnyKernel) { EXPECT_EQ(kernel_paths_run(), 0u); }

TEST(KernelPaths, EachIsaOfTheRowKernelsIsRecordedWhenItRuns) {
  const Tensor x = Tensor::randn({4, 33});
  test::IsaRestore restore;
  for (Isa isa : test::supported_isas()) {
    const KernelPath p = KernelPath(int(isa));
    set_isa(isa);
    const bool before = ran(p);
    if (isa == Isa::scalar) EXPECT_FALSE(before) << "scalar ran before it was asked for";
    (void)softmax(x, -1);
    EXPECT_TRUE(ran(p)) << isa_name(isa);
  }
  // AVX-512 bits only where the CPU has it.
  if (detected_isa() != Isa::avx512) EXPECT_FALSE(ran(KernelPath::avx512));
}

TEST(KernelPaths, Bf16MatmulRecordsItsIsaOnlyWhereItRunsNatively) {
  const Tensor x = Tensor::randn({8, 64}), w = Tensor::randn({16, 64}).to(DType::bf16);
  set_bf16_gemm_emulated(true);
  (void)linear(x, w);
  EXPECT_FALSE(ran(KernelPath::avx512_bf16) || ran(KernelPath::amx)) << "the emulated bf16 GEMM is the f32 one";
  set_bf16_gemm_emulated(false);
  (void)linear(x, w);
  const bool native = bf16_gemm_native_available();
  // (oneDNN also has a bf16 matmul on AVX-512 CPUs without BF16 instructions, by emulation: neither path.)
  const bool bf16_cpu = kernel_path_available(KernelPath::avx512_bf16) || kernel_path_available(KernelPath::amx);
  if (!native) EXPECT_FALSE(ran(KernelPath::avx512_bf16) || ran(KernelPath::amx));
  if (native && bf16_cpu) EXPECT_TRUE(ran(KernelPath::avx512_bf16) || ran(KernelPath::amx));
  if (ran(KernelPath::amx)) EXPECT_TRUE(kernel_path_available(KernelPath::amx));
  if (ran(KernelPath::avx512_bf16)) EXPECT_TRUE(kernel_path_available(KernelPath::avx512_bf16));
}

TEST(KernelPaths, AvailabilityAgreesWithTheCpuFlags) {
  const std::string flags = cpu_flags();
  ASSERT_FALSE(flags.empty()) << "no flags line in /proc/cpuinfo";
  EXPECT_TRUE(kernel_path_available(KernelPath::scalar));
  EXPECT_EQ(kernel_path_available(KernelPath::avx2), has_flag(flags, "avx2") && has_flag(flags, "fma"));
  EXPECT_EQ(kernel_path_available(KernelPath::avx512),
            has_flag(flags, "avx512f") && has_flag(flags, "avx512bw") && has_flag(flags, "avx512vl") &&
                has_flag(flags, "avx512dq"));
  EXPECT_EQ(kernel_path_available(KernelPath::avx512_bf16),
            kernel_path_available(KernelPath::avx512) && has_flag(flags, "avx512_bf16"));
  EXPECT_EQ(kernel_path_available(KernelPath::amx), has_flag(flags, "amx_bf16") && has_flag(flags, "amx_tile"));
  for (KernelPath p : kAllKernelPaths) EXPECT_NE(std::string(kernel_path_name(p)), "?");
}

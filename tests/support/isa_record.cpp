#include "isa_record.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "attn/core/isa.h"

namespace attn::test {

void write_isa_record(const std::string& dir) {
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  const std::string name = n > 0 ? std::filesystem::path(std::string(exe, size_t(n))).filename().string()
                                 : "pid" + std::to_string(::getpid());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = dir + "/" + name + ".txt";
  std::ofstream out(path, std::ios::trunc);
  const unsigned run = kernel_paths_run();
  for (KernelPath p : kAllKernelPaths) {
    if (run & kernel_path_bit(p)) out << "ran " << kernel_path_name(p) << "\n";
    if (kernel_path_available(p)) out << "available " << kernel_path_name(p) << "\n";
  }
  if (!out) std::fprintf(stderr, "isa record: cannot write %s\n", path.c_str());
}

void write_isa_record() { write_isa_record(ATTN_ISA_RECORD_DIR); }

}  // namespace attn::test

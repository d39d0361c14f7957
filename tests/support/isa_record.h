// The record of the kernel paths a test binary ran, for scripts/isa_coverage.py (run at the end of
// scripts/test.sh's release test stage): tests/support/test_main.cpp calls write_isa_record when the
// tests have run.
#pragma once
#include <string>

namespace attn::test {

// Writes <dir>/<name of this binary>.txt: "ran <path>" for each path in attn::kernel_paths_run(),
// "available <path>" for each path attn::kernel_path_available() says this CPU has. dir: the build's
// isa-coverage/ folder (the first form). A failure to write is reported on stderr, not as a test failure.
void write_isa_record();
void write_isa_record(const std::string& dir);

}  // namespace attn::test

// Running the `attn` binary from a test: its stdout, stderr and exit code.
//
//   test::CliRun r = test::run_cli(ATTN_CLI_PATH, dir + "/stderr.txt", {"eval", ckpt, "--json"});
//   ASSERT_EQ(r.code, 0) << r.err;
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace attn::test {

// s in single quotes for /bin/sh.
inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct CliRun {
  int code = -1;   // exit status (-1: not started or killed by a signal)
  std::string out, err;
};

// Runs `binary args...` through the shell; stderr goes to `err_path` and is read back.
inline CliRun run_cli(const std::string& binary, const std::string& err_path, const std::vector<std::string>& args) {
  std::string cmd = shell_quote(binary);
  for (const auto& a : args) cmd += " " + shell_quote(a);
  cmd += " 2>" + shell_quote(err_path);
  CliRun r;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) r.out.append(buf, n);
  const int status = ::pclose(f);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_path);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  return r;
}

}  // namespace attn::test

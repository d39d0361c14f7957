// The `attn` binary of this build, for the tests in tests/cli/ (tests/CMakeLists.txt gives them its
// path as ATTN_CLI_PATH and builds it first).
//
//   const test::CliRun r = test::run_attn(dir, {"eval", ckpt, "--json"});   // stderr: dir/stderr.txt
//   ASSERT_EQ(r.code, 0) << r.err;
#pragma once
#include <string>
#include <vector>

#include "cli_run.h"

#ifndef ATTN_CLI_PATH
#error "ATTN_CLI_PATH (the attn binary) is set by tests/CMakeLists.txt"
#endif

namespace attn::test {

// Runs `attn args...`; its stderr is kept in dir/stderr.txt (and returned in err).
inline CliRun run_attn(const std::string& dir, const std::vector<std::string>& args) {
  return run_cli(ATTN_CLI_PATH, dir + "/stderr.txt", args);
}

// `attn train` of a small ViT (`depth` blocks of width 32) for one epoch on 640 Fashion-MNIST images,
// one thread; the checkpoint is dir/run/checkpoint.safetensors.
inline CliRun train_small_vit(const std::string& dir, int depth) {
  const std::string model = R"({"dim":32,"depth":)" + std::to_string(depth) + R"(,"heads":2,"patch_size":7})";
  return run_attn(dir, {"train", "--model", "vit", "--model-config", model, "--epochs", "1", "--batch", "64",
                        "--limit-train", "640", "--limit-eval", "100", "--threads", "1", "--out", dir + "/run"});
}

}  // namespace attn::test

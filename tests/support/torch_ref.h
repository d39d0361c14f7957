// PyTorch references for the tests, computed at test time by Debian's python3-torch.
//
//   auto out = attn::test::torch_ref("elementwise.binary", {{"a", a}, {"b", b}}, {{"op", "add"}});
//   EXPECT_TENSOR_NEAR(mine, out.at("out"), 1e-6);
//
// "module.func" names a function in tests/golden/gen/module.py taking (inputs: dict of tensors,
// args: dict) and returning a dict of tensors. One Python process serves the whole test binary
// (started on first use, through /usr/bin/python3, and again after it has died); results are cached
// on disk under reference_key() (below). A generator whose point is a side effect (a file it writes
// at a path in args) runs through torch_run, which never uses the cache.
//
// A server that dies is a test failure naming the generator (SIGPIPE is ignored: a write to a dead
// server is EPIPE, not the end of the test binary).
#pragma once
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "attn/attn.h"

namespace attn::test {

using Tensors = std::map<std::string, Tensor>;

Tensors torch_ref(const std::string& func, const Tensors& inputs, const nlohmann::json& args = nlohmann::json::object());
// The same without the cache: func runs every time (for generators that write files).
Tensors torch_run(const std::string& func, const Tensors& inputs, const nlohmann::json& args = nlohmann::json::object());

// attn's source tree (an absolute path: tests read its docs and scripts from it).
std::string source_dir();

// The key of a reference in the cache (16 hex digits): a hash of the function name, the arguments, the
// input tensors and reference_key_material(source_dir, args). An empty source_dir is attn's.
std::string reference_key(const std::string& func, const Tensors& inputs, const nlohmann::json& args,
                          const std::string& source_dir = "");
// Everything else a reference depends on, one item a line: reference_versions(); every script the
// server may run (tests/support/ref_server.py, tests/golden/gen/*.py, tools/*.py: path under source_dir
// and a hash of the content); and the data that each absolute path among args' strings names (a
// file: a hash of its bytes; a folder: its files' names, sizes and modification times).
std::string reference_key_material(const std::string& source_dir, const nlohmann::json& args);
// The versions of Python, torch, torchvision, numpy and PIL (tests/support/ref_versions.py; read once
// per process).
const std::string& reference_versions();

// Max |a - b| (as double) and whether every element satisfies |a - b| <= atol + rtol |b|.
// NaNs must match in position; infinities must match exactly. The dtypes and shapes must be equal
// (convert one side with .to() where a test means to compare across dtypes). Two empty tensors
// (no elements) fail too, since a comparison of nothing proves nothing, unless the test says that
// emptiness is what it expects (Empty::expected, e.g. an op applied to a (0, 3) input).
enum class Empty { fails, expected };
struct Compare {
  double max_abs = 0, max_rel = 0;
  bool ok = true;
  std::string detail;
};
Compare compare(const Tensor& actual, const Tensor& expected, double atol, double rtol, Empty empty = Empty::fails);
::testing::AssertionResult near(const Tensor& actual, const Tensor& expected, double atol, double rtol,
                                Empty empty = Empty::fails);

// Central finite differences in f64 of sum(f(x) * w) for a random w, against autograd.
// f must be a function of the listed inputs (which must be f64 leaves).
::testing::AssertionResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                     std::vector<Tensor> inputs, double eps = 1e-6, double atol = 1e-6,
                                     double rtol = 1e-4);

}  // namespace attn::test

// Usable with << for context: EXPECT_TENSOR_NEAR(y, ref, 1e-6, 1e-6) << "op " << op;
#define EXPECT_TENSOR_NEAR(actual, expected, atol, rtol) \
  EXPECT_TRUE(::attn::test::near((actual), (expected), (atol), (rtol))) << #actual << " vs " << #expected << " "
// The same where both may be empty by design (the test's input has no elements).
#define EXPECT_TENSOR_NEAR_OR_EMPTY(got, want, atol, rtol)                                        \
  EXPECT_TRUE(::attn::test::near((got), (want), (atol), (rtol), ::attn::test::Empty::expected)) \
      << #got << " vs " << #want << " "

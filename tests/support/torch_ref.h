// PyTorch references for the tests, computed at test time by Debian's python3-torch.
//
//   auto out = attn::test::torch_ref("elementwise.binary", {{"a", a}, {"b", b}}, {{"op", "add"}});
//   EXPECT_TENSOR_NEAR(mine, out.at("out"), 1e-6);
//
// "module.func" names a function in tests/golden/gen/module.py taking (inputs: dict of tensors,
// args: dict) and returning a dict of tensors. One Python process serves the whole test binary
// (started on first use, through /usr/bin/python3); results are cached on disk by a hash of the
// function name, the script's source, the arguments and the input bytes.
#pragma once
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "attn/attn.h"

namespace attn::test {

using Tensors = std::map<std::string, Tensor>;

Tensors torch_ref(const std::string& func, const Tensors& inputs, const nlohmann::json& args = nlohmann::json::object());

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

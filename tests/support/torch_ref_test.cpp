// The PyTorch reference machinery (tests/support/torch_ref.*). The tests' own comparison (compare, near):
// values within tolerance pass; a value outside, a NaN against a number, another dtype, another shape or
// two empty tensors (unless the test says so) fail, each with a message that says why. What the cache key
// covers, torch_run bypassing the cache, and a reference server that dies (killed between calls, or
// exiting during one) as a failure naming the generator, after which the next call starts a new server.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "attn/attn.h"
#include "errors.h"
#include "files.h"
#include "torch_ref.h"

using namespace attn;
using nlohmann::json;
using test::compare;
using test::Empty;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A copy of the parts of a source tree the key reads, in a fresh folder.
std::string fake_source_tree() {
  const std::string d = test::fresh_tmp_dir("attn_torch_ref_test", "src");
  test::write_bytes(d + "/tests/support/ref_server.py", "# server\n");
  test::write_bytes(d + "/tests/golden/gen/a.py", "import helper\n");
  test::write_bytes(d + "/tools/helper.py", "SCALE = 1\n");
  return d;
}

}  // namespace

TEST(ReferenceKey, CoversVersionsScriptsToolsAndData) {
  const std::string& v = test::reference_versions();
  for (const char* pkg : {"python ", "torch ", "torchvision ", "numpy ", "PIL "})
    EXPECT_TRUE(has(v, std::string("\n") + pkg) || v.rfind(pkg, 0) == 0) << pkg << " missing from:\n" << v;
  EXPECT_FALSE(has(v, "missing")) << v;

  const std::string src = fake_source_tree();
  const std::string data = test::fresh_tmp_dir("attn_torch_ref_test", "data");
  test::write_bytes(data + "/in.bin", "abc");
  const json args = {{"file", data + "/in.bin"}, {"nested", {{"dir", data}}}, {"name", "not/a/path"}};
  const test::Tensors none;
  const std::string k0 = test::reference_key("a.f", none, args, src);
  const std::string m = test::reference_key_material(src, args);
  EXPECT_TRUE(has(m, v)) << m;
  EXPECT_TRUE(has(m, "script tools/helper.py ")) << m;
  EXPECT_TRUE(has(m, "script tests/golden/gen/a.py ")) << m;
  EXPECT_TRUE(has(m, "file " + data + "/in.bin ")) << m;
  EXPECT_TRUE(has(m, "folder " + data + "\n  in.bin 3 ")) << m;
  EXPECT_EQ(test::reference_key("a.f", none, args, src), k0) << "the same tree and data give the same key";

  test::write_bytes(src + "/tools/helper.py", "SCALE = 2\n");   // a helper the generator imports
  const std::string k1 = test::reference_key("a.f", none, args, src);
  EXPECT_NE(k1, k0) << "tools/*.py";
  test::write_bytes(src + "/tests/golden/gen/a.py", "import helper  \n");
  const std::string k2 = test::reference_key("a.f", none, args, src);
  EXPECT_NE(k2, k1) << "tests/golden/gen/*.py";
  test::write_bytes(data + "/in.bin", "abd");   // same size, new bytes
  const std::string k3 = test::reference_key("a.f", none, args, src);
  EXPECT_NE(k3, k2) << "a data file named in args";
  test::write_bytes(data + "/more.bin", "x");   // a new file in a folder named in args
  EXPECT_NE(test::reference_key("a.f", none, args, src), k3) << "a data folder named in args";
  std::filesystem::remove_all(src);
  std::filesystem::remove_all(data);
}

TEST(TorchRun, NeverComesFromTheCache) {
  const int64_t first = int64_t(test::torch_run("ref_checks.calls", {}).at("calls").item());
  EXPECT_EQ(int64_t(test::torch_run("ref_checks.calls", {}).at("calls").item()), first + 1);
}

// Before SIGPIPE was ignored, the write to the killed server ended the test binary without a message.
TEST(ReferenceServer, KilledBetweenCallsIsAFailureNamingTheGenerator) {
  const pid_t pid = pid_t(test::torch_run("ref_checks.pid", {}).at("pid").item());
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT), 0);   // dead (still to be reaped)
  const Tensor x = Tensor::arange(4, DType::f32);
  const std::string e = test::error_of([&] { test::torch_run("ref_checks.echo", {{"x", x}}); });
  EXPECT_TRUE(has(e, "torch_ref(ref_checks.echo): cannot send the request to the Python reference server (Broken pipe)"))
      << e;
  EXPECT_TRUE(has(e, "killed by signal 9")) << e;
  // The next call starts a new server.
  EXPECT_EQ(test::torch_run("ref_checks.echo", {{"x", x}}).at("x").to_vector<float>(), x.to_vector<float>());
  EXPECT_NE(pid_t(test::torch_run("ref_checks.pid", {}).at("pid").item()), pid);
}

TEST(ReferenceServer, ExitDuringACallIsAFailureNamingTheGenerator) {
  const std::string e = test::error_of([] { test::torch_run("ref_checks.exit", {}, {{"status", 3}}); });
  EXPECT_TRUE(has(e, "torch_ref(ref_checks.exit): the Python reference server exited with status 3")) << e;
  const Tensor x = Tensor::arange(3, DType::f32);
  EXPECT_EQ(test::torch_run("ref_checks.echo", {{"x", x}}).at("x").to_vector<float>(), x.to_vector<float>());
}

TEST(Compare, ValuesWithinToleranceAndNot) {
  const Tensor a = Tensor::from_vector<float>({1.f, 2.f, NAN, INFINITY}, {4});
  EXPECT_TRUE(compare(a, a.clone(), 0, 0).ok);
  const Tensor b = Tensor::from_vector<float>({1.f, 2.001f, NAN, INFINITY}, {4});
  EXPECT_TRUE(compare(a, b, 1e-2, 0).ok);
  const auto c = compare(a, b, 1e-4, 0);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.detail.find("first mismatch at flat index 1"), std::string::npos) << c.detail;
  EXPECT_FALSE(compare(a, Tensor::from_vector<float>({1.f, 2.f, 3.f, INFINITY}, {4}), 1, 1).ok) << "NaN vs 3";
  EXPECT_FALSE(compare(a, Tensor::from_vector<float>({1.f, 2.f, NAN, -INFINITY}, {4}), 1, 1).ok) << "inf vs -inf";
}

TEST(Compare, DtypesMustAgree) {
  const Tensor f = Tensor::from_vector<float>({1.f, 2.f}, {2});
  const auto c = compare(f, f.to(DType::f64), 1, 1);
  EXPECT_FALSE(c.ok) << "the same values in f32 and f64";
  EXPECT_EQ(c.detail, "dtype f32 vs expected f64 (shapes [2] and [2])");
  EXPECT_FALSE(compare(f.to(DType::i64), f, 1, 1).ok) << "i64 vs f32";
  EXPECT_FALSE(test::near(f.to(DType::u8), f, 1, 1)) << "near() too";
  EXPECT_TRUE(compare(f.to(DType::i64), f.to(DType::i64), 0, 0).ok);
}

TEST(Compare, ShapesMustAgree) {
  const Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({3, 2}), c = Tensor::zeros({6});
  EXPECT_EQ(compare(a, b, 1, 1).detail, "shape [2, 3] vs expected [3, 2]");
  EXPECT_FALSE(compare(a, c, 1, 1).ok);
  EXPECT_FALSE(compare(Tensor::zeros({1}), Tensor::scalar(0.0), 1, 1).ok) << "(1) vs a 0-d scalar";
}

TEST(Compare, TwoEmptyTensorsFailUnlessExpected) {
  const Tensor e = Tensor::zeros({0, 3});
  const auto c = compare(e, e.clone(), 0, 0);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.detail.find("both tensors are empty (shape [0, 3]): nothing was compared"), std::string::npos)
      << c.detail;
  EXPECT_FALSE(test::near(e, e, 0, 0));
  EXPECT_TRUE(compare(e, e.clone(), 0, 0, Empty::expected).ok);
  EXPECT_TRUE(test::near(e, e, 0, 0, Empty::expected));
  EXPECT_TENSOR_NEAR_OR_EMPTY(e, e, 0, 0);
  // Expected emptiness does not excuse another shape or dtype.
  EXPECT_FALSE(compare(e, Tensor::zeros({3, 0}), 0, 0, Empty::expected).ok);
  EXPECT_FALSE(compare(e, Tensor::zeros({0, 3}, DType::f64), 0, 0, Empty::expected).ok);
  EXPECT_FALSE(compare(e, Tensor::zeros({1, 3}), 0, 0, Empty::expected).ok);
  // A 0-d scalar has one element: not empty.
  EXPECT_TRUE(compare(Tensor::scalar(1.0), Tensor::scalar(1.0), 0, 0).ok);
}

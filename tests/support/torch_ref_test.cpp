// The PyTorch reference machinery (tests/support/torch_ref.*): what the cache key covers, torch_run
// bypassing the cache, and a reference server that dies (killed between calls, or exiting during one)
// as a failure naming the generator, after which the next call starts a new server.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <string>

#include "errors.h"
#include "files.h"
#include "torch_ref.h"

using namespace attn;
using nlohmann::json;

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

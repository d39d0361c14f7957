#include "torch_ref.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>

namespace attn::test {

namespace {

std::string source_dir() { return ATTN_SOURCE_DIR; }

std::string cache_dir() {
  if (const char* e = std::getenv("ATTN_REF_CACHE")) return e;
  return ATTN_REF_CACHE_DIR;
}

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) { h ^= c; h *= 1099511628211ull; }
  return h;
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The Python server: one process for this test binary.
struct Server {
  pid_t pid = -1;
  FILE* to = nullptr;
  FILE* from = nullptr;
  void start() {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) fail("torch_ref: pipe failed");
    pid = fork();
    if (pid == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[1]);
      close(out[0]);
      std::string script = source_dir() + "/tests/support/ref_server.py";
      std::string gen = source_dir() + "/tests/golden/gen";
      // The sanitizer runtime must not leak into Python.
      unsetenv("LD_PRELOAD");
      setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
      execl("/usr/bin/python3", "python3", script.c_str(), gen.c_str(), (char*)nullptr);
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to = fdopen(in[1], "w");
    from = fdopen(out[0], "r");
  }
  std::string call(const std::string& line) {
    if (pid < 0) start();
    fputs(line.c_str(), to);
    fputc('\n', to);
    fflush(to);
    std::string reply;
    int c;
    while ((c = fgetc(from)) != EOF && c != '\n') reply.push_back(char(c));
    if (c == EOF) fail("torch_ref: the Python reference server exited (is python3-torch installed? "
                       "run the README's test command)");
    return reply;
  }
  ~Server() {
    if (to) fclose(to);
    if (from) fclose(from);
    if (pid > 0) waitpid(pid, nullptr, 0);
  }
};

Server& server() {
  static Server s;
  return s;
}

std::mutex g_mu;

}  // namespace

Tensors torch_ref(const std::string& func, const Tensors& inputs, const nlohmann::json& args) {
  std::lock_guard<std::mutex> lk(g_mu);
  io::TensorList list(inputs.begin(), inputs.end());
  const std::string blob = io::serialize_safetensors(list);
  // Every golden script counts (they import shared helpers, e.g. timm_layers.py), in name order.
  std::string src = read_all(source_dir() + "/tests/support/ref_server.py");
  {
    std::vector<std::string> scripts;
    for (const auto& e : std::filesystem::directory_iterator(source_dir() + "/tests/golden/gen"))
      if (e.path().extension() == ".py") scripts.push_back(e.path().string());
    std::sort(scripts.begin(), scripts.end());
    for (const auto& p : scripts) src += read_all(p);
  }
  uint64_t h = fnv1a(func);
  h = fnv1a(src, h);
  h = fnv1a(args.dump(), h);
  h = fnv1a(blob, h);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
  const std::string dir = cache_dir();
  ::mkdir(dir.c_str(), 0755);
  const std::string out_path = dir + "/" + func + "-" + hex + ".safetensors";
  if (::access(out_path.c_str(), R_OK) != 0) {
    const std::string in_path = dir + "/in-" + std::to_string(::getpid()) + ".safetensors";
    io::write_file_atomic(in_path, blob);
    const std::string tmp_out = out_path + ".part" + std::to_string(::getpid());
    nlohmann::json req = {{"func", func}, {"in", in_path}, {"out", tmp_out}, {"args", args}};
    std::string reply = server().call(req.dump());
    ::unlink(in_path.c_str());
    ATTN_CHECK(reply == "ok", "torch_ref(", func, "): ", reply);
    ATTN_CHECK(std::rename(tmp_out.c_str(), out_path.c_str()) == 0, "torch_ref: rename failed");
  }
  io::SafetensorsFile f = io::load_safetensors(out_path);
  Tensors out;
  for (auto& [k, t] : f.tensors) out[k] = t;
  return out;
}

namespace {

// Why two tensors cannot be compared element by element ("" when they can).
std::string incomparable(const Tensor& actual, const Tensor& expected, Empty empty) {
  if (actual.dtype() != expected.dtype())
    return std::string("dtype ") + dtype_name(actual.dtype()) + " vs expected " + dtype_name(expected.dtype()) +
           " (shapes " + shape_str(actual.shape()) + " and " + shape_str(expected.shape()) + ")";
  if (actual.shape() != expected.shape())
    return "shape " + shape_str(actual.shape()) + " vs expected " + shape_str(expected.shape());
  if (actual.numel() == 0 && empty == Empty::fails)
    return "both tensors are empty (shape " + shape_str(actual.shape()) +
           "): nothing was compared (pass Empty::expected where the test expects no elements)";
  return "";
}

}  // namespace

Compare compare(const Tensor& actual, const Tensor& expected, double atol, double rtol, Empty empty) {
  Compare c;
  if (std::string why = incomparable(actual, expected, empty); !why.empty()) {
    c.ok = false;
    c.detail = std::move(why);
    return c;
  }
  std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  int64_t bad = -1;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a[i], y = e[i];
    bool good;
    if (std::isnan(y) || std::isnan(x)) good = std::isnan(x) && std::isnan(y);
    else if (std::isinf(y) || std::isinf(x)) good = x == y;
    else {
      const double d = std::abs(x - y);
      c.max_abs = std::max(c.max_abs, d);
      if (y != 0) c.max_rel = std::max(c.max_rel, d / std::abs(y));
      good = d <= atol + rtol * std::abs(y);
    }
    if (!good && bad < 0) bad = int64_t(i);
  }
  std::ostringstream os;
  os << "shape " << shape_str(actual.shape()) << ", max abs diff " << c.max_abs << ", max rel diff "
     << c.max_rel;
  if (bad >= 0) {
    c.ok = false;
    os << "; first mismatch at flat index " << bad << ": got " << a[bad] << ", expected " << e[bad]
       << " (atol " << atol << ", rtol " << rtol << ")";
  }
  c.detail = os.str();
  return c;
}

::testing::AssertionResult near(const Tensor& actual, const Tensor& expected, double atol, double rtol,
                                Empty empty) {
  if (!actual.defined() || !expected.defined())
    return ::testing::AssertionFailure() << (actual.defined() ? "expected" : "actual") << " is undefined";
  Compare c = compare(actual, expected, atol, rtol, empty);
  if (c.ok) return ::testing::AssertionSuccess() << c.detail;
  return ::testing::AssertionFailure() << c.detail;
}

::testing::AssertionResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                     std::vector<Tensor> inputs, double eps, double atol, double rtol) {
  Generator g(1234);
  for (auto& x : inputs) {
    if (!x.defined()) continue;
    if (x.dtype() != DType::f64)
      return ::testing::AssertionFailure() << "gradcheck: inputs must be f64, got " << dtype_name(x.dtype());
    x = x.detach().contiguous().clone();
    x.requires_grad_(true);
  }
  Tensor y0 = f(inputs);
  Tensor w = randn(y0.shape(), g, DType::f64);
  sum(y0 * w).backward();
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor& x = inputs[k];
    if (!x.defined() || !x.requires_grad()) continue;
    Tensor an = x.grad();
    double* px = x.data<double>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      double numeric;
      {
        NoGradGuard ng;
        const double orig = px[i];
        px[i] = orig + eps;
        double fp = sum(f(inputs) * w).item();
        px[i] = orig - eps;
        double fm = sum(f(inputs) * w).item();
        px[i] = orig;
        numeric = (fp - fm) / (2 * eps);
      }
      const double analytic = an.defined() ? an.contiguous().data<double>()[i] : 0.0;
      if (std::abs(numeric - analytic) > atol + rtol * std::abs(numeric))
        return ::testing::AssertionFailure() << "gradcheck: input " << k << " (shape "
                                             << shape_str(x.shape()) << ") element " << i
                                             << ": numeric " << numeric << ", autograd " << analytic;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace attn::test

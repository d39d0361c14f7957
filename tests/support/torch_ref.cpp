#include "torch_ref.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>

namespace attn::test {

std::string source_dir() { return ATTN_SOURCE_DIR; }

namespace {

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

std::string hex64(uint64_t h) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
  return hex;
}

// "exited with status 3", "killed by signal 9 (Killed)".
std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "ended (wait status " + std::to_string(status) + ")";
}

// The environment of a Python child, made before fork (the child of a threaded process may only
// call async-signal-safe functions: dup2, close, execve): no sanitizer runtime, OMP_WAIT_POLICY=PASSIVE.
struct ChildEnv {
  std::vector<std::string> vars;
  std::vector<char*> envp;
  ChildEnv() {
    for (char** e = environ; *e; ++e) {
      const std::string v = *e;
      if (v.rfind("LD_PRELOAD=", 0) == 0 || v.rfind("OMP_WAIT_POLICY=", 0) == 0) continue;
      vars.push_back(v);
    }
    vars.push_back("OMP_WAIT_POLICY=PASSIVE");
    for (auto& v : vars) envp.push_back(v.data());
    envp.push_back(nullptr);
  }
};

// Starts /usr/bin/python3 with `args`, its stdin from in_fd (-1: inherited) and stdout to out_fd;
// the child closes close_fds (the pipes' original descriptors) once they are on 0 and 1.
pid_t spawn_python(int in_fd, int out_fd, std::vector<int> close_fds, const std::vector<std::string>& args) {
  ChildEnv env;
  std::vector<std::string> argv_s = {"python3"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    if (in_fd >= 0) dup2(in_fd, 0);
    dup2(out_fd, 1);
    for (int fd : close_fds) close(fd);
    execve("/usr/bin/python3", argv.data(), env.envp.data());
    _exit(127);
  }
  if (pid < 0) fail("torch_ref: fork failed: ", std::strerror(errno));
  return pid;
}

// stdout of `/usr/bin/python3 script`; an attn::Error if it does not exit with 0.
std::string run_python_script(const std::string& script) {
  int out[2];
  if (pipe(out) != 0) fail("torch_ref: pipe failed: ", std::strerror(errno));
  const pid_t pid = spawn_python(-1, out[1], {out[0], out[1]}, {script});
  close(out[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buf, size_t(n));
  }
  close(out[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  ATTN_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "torch_ref: /usr/bin/python3 ", script, " ",
             describe_status(status), " (is python3-torch installed? run the README's test command)");
  return text;
}

// The Python server: one process for this test binary, started again after it has died.
struct Server {
  pid_t pid = -1;
  FILE* to = nullptr;
  FILE* from = nullptr;
  void start() {
    // A write to a server that has died must come back as EPIPE (a clear failure below), not kill
    // the test binary (tests/support/test_main.cpp ignores SIGPIPE too).
    std::signal(SIGPIPE, SIG_IGN);
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) fail("torch_ref: pipe failed");
    pid = spawn_python(in[0], out[1], {in[0], in[1], out[0], out[1]},
                       {source_dir() + "/tests/support/ref_server.py", source_dir() + "/tests/golden/gen"});
    close(in[0]);
    close(out[1]);
    to = fdopen(in[1], "w");
    from = fdopen(out[0], "r");
  }
  // Closes the pipes and reaps the process: what became of it, for the caller's message.
  std::string stop() {
    if (to) fclose(to);
    if (from) fclose(from);
    to = from = nullptr;
    int status = 0;
    std::string what = "gone";
    if (pid > 0) {
      pid_t r;
      while ((r = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {}
      if (r == pid) what = describe_status(status);
    }
    pid = -1;
    return what;
  }
  std::string call(const std::string& func, const std::string& line) {
    if (pid < 0) start();
    errno = 0;
    if (fputs(line.c_str(), to) < 0 || fputc('\n', to) == EOF || fflush(to) != 0) {
      const std::string why = std::strerror(errno);
      const std::string what = stop();
      fail("torch_ref(", func, "): cannot send the request to the Python reference server (", why, "): it has ",
           what, "; its messages, if any, are on stderr above (the next call starts a new one)");
    }
    std::string reply;
    int c;
    while ((c = fgetc(from)) != EOF && c != '\n') reply.push_back(char(c));
    if (c == EOF) {
      const std::string what = stop();
      fail("torch_ref(", func, "): the Python reference server ", what, " while computing it (is python3-torch "
           "installed? run the README's test command; its messages, if any, are on stderr above)");
    }
    return reply;
  }
  ~Server() { stop(); }
};

Server& server() {
  static Server s;
  return s;
}

std::mutex g_mu;

// What the key hashes besides the call: see reference_key_material in torch_ref.h.
void add_scripts(std::string& m, const std::string& src) {
  std::vector<std::string> scripts = {src + "/tests/support/ref_server.py"};
  for (const char* dir : {"/tests/golden/gen", "/tools"}) {
    if (!std::filesystem::is_directory(src + dir)) continue;
    for (const auto& e : std::filesystem::directory_iterator(src + dir))
      if (e.path().extension() == ".py") scripts.push_back(e.path().string());
  }
  std::sort(scripts.begin() + 1, scripts.end());
  for (const auto& p : scripts)
    m += "script " + p.substr(src.size() + 1) + " " + hex64(fnv1a(read_all(p))) + "\n";
}

// Every string in j (recursively) that is an absolute path to an existing file or folder.
void collect_paths(const nlohmann::json& j, std::vector<std::string>& out) {
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    std::error_code ec;
    if (!s.empty() && s[0] == '/' && std::filesystem::exists(s, ec)) out.push_back(s);
  } else if (j.is_structured()) {
    for (const auto& v : j) collect_paths(v, out);
  }
}

void add_data(std::string& m, const nlohmann::json& args) {
  std::vector<std::string> paths;
  collect_paths(args, paths);
  for (const auto& p : paths) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(p, ec)) {
      m += "file " + p + " " + hex64(fnv1a(read_all(p))) + "\n";
    } else if (std::filesystem::is_directory(p, ec)) {
      std::vector<std::string> entries;
      for (const auto& e : std::filesystem::directory_iterator(p, ec)) {
        if (!e.is_regular_file(ec)) continue;
        const auto mtime = e.last_write_time(ec).time_since_epoch().count();
        entries.push_back(e.path().filename().string() + " " + std::to_string(e.file_size(ec)) + " " +
                          std::to_string(mtime));
      }
      std::sort(entries.begin(), entries.end());
      m += "folder " + p + "\n";
      for (const auto& e : entries) m += "  " + e + "\n";
    }
  }
}

}  // namespace

const std::string& reference_versions() {
  static const std::string v = run_python_script(source_dir() + "/tests/support/ref_versions.py");
  return v;
}

std::string reference_key_material(const std::string& src, const nlohmann::json& args) {
  std::string m = reference_versions();
  add_scripts(m, src);
  add_data(m, args);
  return m;
}

std::string reference_key(const std::string& func, const Tensors& inputs, const nlohmann::json& args,
                          const std::string& src) {
  io::TensorList list(inputs.begin(), inputs.end());
  uint64_t h = fnv1a(func);
  h = fnv1a(reference_key_material(src.empty() ? source_dir() : src, args), h);
  h = fnv1a(args.dump(), h);
  h = fnv1a(io::serialize_safetensors(list), h);
  return hex64(h);
}

namespace {

// Runs func in the server: its outputs are written to out_path.
void compute(const std::string& func, const Tensors& inputs, const nlohmann::json& args, const std::string& out_path) {
  io::TensorList list(inputs.begin(), inputs.end());
  const std::string dir = cache_dir();
  ::mkdir(dir.c_str(), 0755);
  const std::string in_path = dir + "/in-" + std::to_string(::getpid()) + ".safetensors";
  io::write_file_atomic(in_path, io::serialize_safetensors(list));
  nlohmann::json req = {{"func", func}, {"in", in_path}, {"out", out_path}, {"args", args}};
  std::string reply;
  try {
    reply = server().call(func, req.dump());
  } catch (...) {
    ::unlink(in_path.c_str());
    throw;
  }
  ::unlink(in_path.c_str());
  ATTN_CHECK(reply == "ok", "torch_ref(", func, "): ", reply);
}

Tensors read_outputs(const std::string& path) {
  io::SafetensorsFile f = io::load_safetensors(path);
  Tensors out;
  for (auto& [k, t] : f.tensors) out[k] = t;
  return out;
}

}  // namespace

Tensors torch_ref(const std::string& func, const Tensors& inputs, const nlohmann::json& args) {
  std::lock_guard<std::mutex> lk(g_mu);
  const std::string dir = cache_dir();
  ::mkdir(dir.c_str(), 0755);
  const std::string out_path = dir + "/" + func + "-" + reference_key(func, inputs, args) + ".safetensors";
  if (::access(out_path.c_str(), R_OK) != 0) {
    const std::string tmp_out = out_path + ".part" + std::to_string(::getpid());
    compute(func, inputs, args, tmp_out);
    ATTN_CHECK(std::rename(tmp_out.c_str(), out_path.c_str()) == 0, "torch_ref: rename failed");
  }
  return read_outputs(out_path);
}

Tensors torch_run(const std::string& func, const Tensors& inputs, const nlohmann::json& args) {
  std::lock_guard<std::mutex> lk(g_mu);
  const std::string out_path = cache_dir() + "/run-" + std::to_string(::getpid()) + ".safetensors";
  compute(func, inputs, args, out_path);
  Tensors out = read_outputs(out_path);
  ::unlink(out_path.c_str());
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

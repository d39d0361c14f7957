// Files for tests: a fresh temporary directory, a whole file read back, bytes written to a path.
//
//   const std::string dir = test::fresh_tmp_dir("attn_image_test", "png");   // empty, per process
//   test::write_bytes(dir + "/a/b.png", data::encode_png(img));             // makes a/ first
//   EXPECT_EQ(test::slurp(dir + "/a/b.png").size(), bytes.size());
#pragma once
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace attn::test {

// An empty directory <tmp>/<prefix>_<name>_<pid> (removed first if it exists).
inline std::string fresh_tmp_dir(const std::string& prefix, const std::string& name) {
  std::string d = std::filesystem::temp_directory_path().string() + "/" + prefix + "_" + name + "_" +
                  std::to_string(::getpid());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// This test binary's scratch directory, <tmp>/<prefix>_files_<pid>: made empty on the first call
// (the prefix of that call names it).
inline const std::string& scratch_dir(const std::string& prefix) {
  static const std::string dir = fresh_tmp_dir(prefix, "files");
  return dir;
}

// The bytes of a file ("" when it cannot be read).
inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes n bytes to path (replacing it), creating its directory first.
inline void write_bytes(const std::string& path, const void* p, size_t n) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir);
  std::ofstream(path, std::ios::binary).write(static_cast<const char*>(p), std::streamsize(n));
}
inline void write_bytes(const std::string& path, std::string_view bytes) {
  write_bytes(path, bytes.data(), bytes.size());
}
inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  write_bytes(path, bytes.data(), bytes.size());
}

}  // namespace attn::test

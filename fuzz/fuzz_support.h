// Helpers shared by the fuzz targets (fuzz/*_fuzz.cpp): the input as a file for the APIs that take a
// path, and the bound on the model sizes a harness builds.
//
//   MemFile f(data, size);                    // f.path(): "/proc/self/fd/N", an anonymous memory file
//   attn::io::load_safetensors(f.path());
//   if (!small_config(cfg, 512)) return 0;    // a config that asks for a huge model is not built
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace attn::fuzz {

// `data` in an anonymous in-memory file (memfd_create), opened by path through /proc/self/fd: the
// file-reading code paths (open, fstat, pread) run exactly as on a disk file, without touching disk.
class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size, const char* name = "attn-fuzz") {
    fd_ = ::memfd_create(name, MFD_CLOEXEC);
    if (fd_ < 0) __builtin_trap();
    for (size_t done = 0; done < size;) {
      const ssize_t w = ::write(fd_, data + done, size - done);
      if (w <= 0) __builtin_trap();
      done += size_t(w);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// Whether every number in `j` is at most `max_abs` in magnitude and every array holds at most
// `max_items` elements. A model config outside this is a legitimate request for a large model (it
// only costs memory and time, which is the caller's to spend), so the harnesses leave it unbuilt:
// what they look for is a config that is small and still crashes, or is wrong and not refused.
inline bool small_config(const nlohmann::json& j, double max_abs, size_t max_items = 16, int depth = 0) {
  if (depth > 8) return false;
  if (j.is_number()) {
    const double v = j.get<double>();
    return v == v && v <= max_abs && v >= -max_abs;
  }
  if (j.is_array() && j.size() > max_items) return false;
  if (j.is_array() || j.is_object())
    for (const auto& v : j)
      if (!small_config(v, max_abs, max_items, depth + 1)) return false;
  return true;
}

}  // namespace attn::fuzz

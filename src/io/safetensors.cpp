#include "attn/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <utility>
#include <nlohmann/json.hpp>

namespace attn::io {

const Tensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& [k, t] : tensors)
    if (k == name) return &t;
  return nullptr;
}

namespace {

struct DTypeInfo {
  DType dtype;      // as stored in attn after loading
  size_t file_size; // bytes per element in the file
  bool f16;         // needs widening from IEEE half
};

bool parse_dtype(const std::string& s, DTypeInfo& out) {
  if (s == "F32") out = {DType::f32, 4, false};
  else if (s == "F64") out = {DType::f64, 8, false};
  else if (s == "BF16") out = {DType::bf16, 2, false};
  else if (s == "F16") out = {DType::f32, 2, true};
  else if (s == "I32") out = {DType::i32, 4, false};
  else if (s == "I64") out = {DType::i64, 8, false};
  else if (s == "U8" || s == "BOOL") out = {DType::u8, 1, false};
  else if (s == "I8") out = {DType::i8, 1, false};
  else return false;
  return true;
}

const char* file_dtype(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::bf16: return "BF16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::u8: return "U8";
    case DType::i8: return "I8";
  }
  return "?";
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, u;
  if (exp == 0) {
    if (mant == 0) u = sign;
    else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) { mant <<= 1; --exp; }
      mant &= 0x3ff;
      u = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

namespace {

// The header (JSON) of a file whose data block has `body_size` bytes: the entries sorted by data
// offset, checked to tile the data block exactly. Messages start with `where`.
void parse_header(const char* hp, uint64_t n, uint64_t body_size, const std::string& where, Metadata& metadata,
                  std::vector<SafetensorsEntry>& entries) {
  using nlohmann::json;
  json header = json::parse(hp, hp + n, nullptr, /*allow_exceptions=*/false);
  ATTN_CHECK(!header.is_discarded(), where, "header is not valid JSON");
  ATTN_CHECK(header.is_object(), where, "header is JSON but not an object");
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      ATTN_CHECK(v.is_object(), where, "__metadata__ must be an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        ATTN_CHECK(m.value().is_string(), where, "__metadata__ value for '", m.key(),
                   "' is not a string");
        metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    ATTN_CHECK(v.is_object(), where, "entry '", name, "' is not an object");
    ATTN_CHECK(v.contains("dtype") && v["dtype"].is_string(), where, "entry '", name, "' has no dtype string");
    ATTN_CHECK(v.contains("shape") && v["shape"].is_array(), where, "entry '", name, "' has no shape array");
    ATTN_CHECK(v.contains("data_offsets") && v["data_offsets"].is_array() && v["data_offsets"].size() == 2,
               where, "entry '", name, "' needs data_offsets [begin, end]");
    SafetensorsEntry e;
    e.name = name;
    const std::string dt = v["dtype"].get<std::string>();
    DTypeInfo info{};
    ATTN_CHECK(parse_dtype(dt, info), where, "entry '", name, "' has unsupported dtype '", dt,
               "' (expected F32, F64, BF16, F16, I32, I64, U8 or BOOL)");
    e.dtype = info.dtype;
    e.f16 = info.f16;
    uint64_t numel = 1;
    for (const json& d : v["shape"]) {
      ATTN_CHECK(d.is_number_unsigned() || (d.is_number_integer() && d.get<int64_t>() >= 0), where,
                 "entry '", name, "' has a shape entry that is not a non-negative integer");
      const uint64_t dd = d.get<uint64_t>();
      ATTN_CHECK(dd == 0 || numel <= (uint64_t(1) << 62) / dd, where, "entry '", name, "' shape is too large");
      numel *= dd;
      e.shape.push_back(int64_t(dd));
    }
    for (const json& o : v["data_offsets"])
      ATTN_CHECK(o.is_number_unsigned() || (o.is_number_integer() && o.get<int64_t>() >= 0), where,
                 "entry '", name, "' data_offsets must be non-negative integers");
    e.begin = v["data_offsets"][0].get<uint64_t>();
    e.end = v["data_offsets"][1].get<uint64_t>();
    ATTN_CHECK(e.begin <= e.end && e.end <= body_size, where, "entry '", name, "' data_offsets [",
               e.begin, ", ", e.end, "] lie outside the data block of ", body_size, " bytes");
    ATTN_CHECK(numel <= (uint64_t(1) << 60) / info.file_size && e.end - e.begin == numel * info.file_size,
               where, "entry '", name, "' has ", e.end - e.begin, " bytes of data, but dtype ", dt,
               " and shape ", e.shape, " need ", numel * info.file_size);
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  for (const SafetensorsEntry& e : entries) {
    ATTN_CHECK(e.begin == pos, where, "entry '", e.name, "' starts at byte ", e.begin, " but the previous "
               "entry ends at ", pos, " (offsets must be contiguous and non-overlapping)");
    pos = e.end;
  }
  ATTN_CHECK(pos == body_size, where, "data block is ", body_size, " bytes but the entries cover ", pos);
}

// The 8-byte header length of a file of `size` bytes whose first min(size, 8) bytes are `first`.
uint64_t header_length(const uint8_t* first, uint64_t size, const std::string& where) {
  ATTN_CHECK(size >= 8, where, "file is ", size, " bytes, too short for the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | first[i];
  ATTN_CHECK(n <= size - 8, where, "header length ", n, " runs past the end of the file (", size,
             " bytes)");
  ATTN_CHECK(n >= 2, where, "header length ", n, " is too short for a JSON object");
  return n;
}

// An entry's tensor from its file bytes `src` (widening F16).
void fill(Tensor& t, const SafetensorsEntry& e, const uint8_t* src) {
  if (e.f16) {
    float* d = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      d[i] = half_to_float(h);
    }
  } else if (e.end > e.begin) {
    std::memcpy(t.raw_data(), src, e.end - e.begin);
  }
}

}  // namespace

SafetensorsFile parse_safetensors(const uint8_t* data, size_t size, const std::string& what) {
  const std::string where = "safetensors '" + what + "': ";
  const uint64_t n = header_length(data, size, where);
  const uint8_t* body = data + 8 + n;
  SafetensorsFile out;
  std::vector<SafetensorsEntry> entries;
  parse_header(reinterpret_cast<const char*>(data + 8), n, size - 8 - n, where, out.metadata, entries);
  for (const SafetensorsEntry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    fill(t, e, body + e.begin);
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

namespace {
// pread until `n` bytes are in or the file ends; false on a short read or an error (errno kept).
bool read_at(int fd, void* dst, size_t n, uint64_t offset) {
  auto* p = static_cast<uint8_t*>(dst);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, off_t(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r == 0) errno = 0;
      return false;
    }
    p += r;
    n -= size_t(r);
    offset += uint64_t(r);
  }
  return true;
}
}  // namespace

SafetensorsReader::SafetensorsReader(const std::string& path) : path_(path) {
  std::error_code ec;
  ATTN_CHECK(!std::filesystem::is_directory(path, ec), "safetensors: expected a file, but '", path,
             "' is a directory");
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ATTN_CHECK(fd_ >= 0, "safetensors: cannot open '", path, "': ", std::strerror(errno));
  try {
    struct stat st {};
    ATTN_CHECK(::fstat(fd_, &st) == 0, "safetensors: read of '", path, "' failed");
    const uint64_t size = uint64_t(std::max<off_t>(st.st_size, 0));
    const std::string where = "safetensors '" + path + "': ";
    uint8_t first[8] = {};
    ATTN_CHECK(read_at(fd_, first, size_t(std::min<uint64_t>(size, 8)), 0), "safetensors: read of '", path,
               "' failed");
    const uint64_t n = header_length(first, size, where);
    std::string header(size_t(n), '\0');
    ATTN_CHECK(read_at(fd_, header.data(), header.size(), 8), "safetensors: read of '", path, "' failed");
    data_start_ = 8 + n;
    parse_header(header.data(), n, size - 8 - n, where, metadata_, entries_);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

SafetensorsReader::~SafetensorsReader() {
  if (fd_ >= 0) ::close(fd_);
}

SafetensorsReader::SafetensorsReader(SafetensorsReader&& o) noexcept
    : path_(std::move(o.path_)), fd_(std::exchange(o.fd_, -1)), data_start_(o.data_start_),
      metadata_(std::move(o.metadata_)), entries_(std::move(o.entries_)) {}

const SafetensorsEntry* SafetensorsReader::find(const std::string& name) const {
  for (const SafetensorsEntry& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

Tensor SafetensorsReader::read(size_t i) const {
  ATTN_CHECK(i < entries_.size(), "safetensors '", path_, "': expected an entry index below ", entries_.size(),
             ", got ", i);
  ATTN_CHECK(fd_ >= 0, "safetensors '", path_, "': the reader was moved from");
  const SafetensorsEntry& e = entries_[i];
  Tensor t = Tensor::empty(e.shape, e.dtype);
  const size_t nb = size_t(e.end - e.begin);
  if (nb == 0) return t;
  if (e.f16) {
    std::vector<uint8_t> buf(nb);
    ATTN_CHECK(read_at(fd_, buf.data(), nb, data_start_ + e.begin), "safetensors '", path_, "': read of entry '",
               e.name, "' (", nb, " bytes at ", data_start_ + e.begin, ") failed: ",
               errno ? std::strerror(errno) : "the file is shorter than its header says (changed while open?)");
    fill(t, e, buf.data());
  } else {
    ATTN_CHECK(read_at(fd_, t.raw_data(), nb, data_start_ + e.begin), "safetensors '", path_,
               "': read of entry '", e.name, "' (", nb, " bytes at ", data_start_ + e.begin, ") failed: ",
               errno ? std::strerror(errno) : "the file is shorter than its header says (changed while open?)");
  }
  return t;
}

Tensor SafetensorsReader::read(const std::string& name) const {
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].name == name) return read(i);
  fail("safetensors '", path_, "': expected an entry '", name, "', but the file has none by that name");
}

SafetensorsFile load_safetensors(const std::string& path) {
  // Header first, then each tensor straight into its own storage: no copy of the whole file is held.
  SafetensorsReader r(path);
  SafetensorsFile out;
  out.metadata = r.metadata();
  out.tensors.reserve(r.entries().size());
  for (size_t i = 0; i < r.entries().size(); ++i) out.tensors.emplace_back(r.entries()[i].name, r.read(i));
  return out;
}

namespace {
// The 8-byte length and the JSON header of `tensors`; `contig` gets their contiguous data, in order.
std::string safetensors_prefix(const TensorList& tensors, const Metadata& metadata, std::vector<Tensor>& contig) {
  using nlohmann::ordered_json;
  ordered_json header = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json m = ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = m;
  }
  uint64_t off = 0;
  contig.clear();
  for (const auto& [name, t] : tensors) {
    ATTN_CHECK(name != "__metadata__", "safetensors: '__metadata__' cannot name a tensor");
    ATTN_CHECK(!header.contains(name), "safetensors: tensor name '", name, "' appears twice");
    Tensor c = t.detach().contiguous();
    const uint64_t nb = uint64_t(c.numel()) * c.element_size();
    header[name] = {{"dtype", file_dtype(c.dtype())}, {"shape", c.shape()}, {"data_offsets", {off, off + nb}}};
    off += nb;
    contig.push_back(c);
  }
  std::string h = header.dump();
  while (h.size() % 8) h.push_back(' ');
  std::string out(8, '\0');
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[i] = char((n >> (8 * i)) & 0xff);
  out += h;
  return out;
}

size_t nbytes(const Tensor& c) { return size_t(c.numel()) * c.element_size(); }

// A file descriptor closed when it goes out of scope (every failure path included).
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { close(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void reset(int fd) {
    close();
    fd_ = fd;
  }
  // Closes now; the error number of a failing close (0: none).
  int close() {
    if (fd_ < 0) return 0;
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

// A temporary file beside `path`, named path + ".tmp." + 6 random characters, created exclusively (as
// mkstemp does, but with mode 0644 minus the umask, as any other file the library writes). Removed
// when it goes out of scope unless kept (renamed into place).
class TempFile {
 public:
  explicit TempFile(const std::string& path) {
    static constexpr char kChars[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    static std::atomic<uint64_t> counter{0};
    std::random_device rd;
    const uint64_t salt = (uint64_t(rd()) << 32) ^ rd() ^ uint64_t(::getpid());
    for (int attempt = 0;; ++attempt) {
      uint64_t x = salt + counter.fetch_add(1, std::memory_order_relaxed) * 0x9E3779B97F4A7C15ull;
      std::string name = path + kAtomicTempInfix;
      for (int i = 0; i < 6; ++i, x /= 62) name += kChars[x % 62];
      const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd >= 0) {
        name_ = std::move(name);
        fd_.reset(fd);
        return;
      }
      const int err = errno;
      if (err != EEXIST || attempt >= 100)
        fail("write '", path, "': cannot create '", name, "': ", std::strerror(err));
    }
  }
  ~TempFile() {
    fd_.close();
    if (!kept_) ::unlink(name_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& name() const { return name_; }
  Fd& fd() { return fd_; }
  void keep() { kept_ = true; }

 private:
  std::string name_;
  Fd fd_;
  bool kept_ = false;
};

// fsync of the directory holding `path`, so that a rename into it survives a power loss.
void sync_directory(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ATTN_CHECK(fd.get() >= 0, "write '", path, "': cannot open its directory '", dir, "' to sync it: ",
             std::strerror(errno));
  // EINVAL: the file system cannot sync a directory (nothing to do there).
  if (::fsync(fd.get()) != 0 && errno != EINVAL)
    fail("write '", path, "': the file is in place, but syncing its directory '", dir, "' failed: ",
         std::strerror(errno));
}

// Writes through `fill(write)` into a new temporary beside `path` (a unique name: two writers to one
// path never share one), fsyncs it, renames it over `path` and fsyncs the directory. On any failure
// the temporary is removed, its descriptor closed, and `path` left as it was.
void write_atomic(const std::string& path, const std::function<void(const std::function<void(const void*, size_t)>&)>& fill) {
  TempFile tmp(path);
  size_t done = 0;
  auto write = [&](const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    size_t put = 0;
    while (put < n) {
      ssize_t w = ::write(tmp.fd().get(), p + put, n - put);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail("write '", path, "': write failed after ", done + put, " bytes: ", std::strerror(errno));
      put += size_t(w);
    }
    done += n;
  };
  fill(write);
  if (::fsync(tmp.fd().get()) != 0) fail("write '", path, "': flush failed: ", std::strerror(errno));
  if (const int err = tmp.fd().close()) fail("write '", path, "': flush failed: ", std::strerror(err));
  if (std::rename(tmp.name().c_str(), path.c_str()) != 0)
    fail("write '", path, "': rename failed: ", std::strerror(errno));
  tmp.keep();
  sync_directory(path);
}
}  // namespace

std::string serialize_safetensors(const TensorList& tensors, const Metadata& metadata) {
  std::vector<Tensor> contig;
  std::string out = safetensors_prefix(tensors, metadata, contig);
  size_t total = out.size();
  for (const Tensor& c : contig) total += nbytes(c);
  out.reserve(total);
  for (const Tensor& c : contig) out.append(static_cast<const char*>(c.raw_data()), nbytes(c));
  return out;
}



std::vector<std::string> unfinished_writes(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const std::string prefix = p.filename().string() + kAtomicTempInfix;
  std::vector<std::string> out;
  std::error_code ec;
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() == prefix.size() + 6 && name.starts_with(prefix)) out.push_back((p.parent_path() / name).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void remove_unfinished_writes(const std::string& path) {
  for (const std::string& t : unfinished_writes(path)) ::unlink(t.c_str());
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  write_atomic(path, [&](const auto& write) { write(bytes.data(), bytes.size()); });
}

// Streamed: the header, then each tensor's bytes straight from its storage (no file-sized buffer).
void save_safetensors(const std::string& path, const TensorList& tensors, const Metadata& metadata) {
  std::vector<Tensor> contig;
  const std::string prefix = safetensors_prefix(tensors, metadata, contig);
  write_atomic(path, [&](const auto& write) {
    write(prefix.data(), prefix.size());
    for (const Tensor& c : contig) write(c.raw_data(), nbytes(c));
  });
}

}  // namespace attn::io

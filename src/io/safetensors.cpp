#include "attn/io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
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

SafetensorsFile parse_safetensors(const uint8_t* data, size_t size, const std::string& what) {
  using nlohmann::json;
  const std::string where = "safetensors '" + what + "': ";
  ATTN_CHECK(size >= 8, where, "file is ", size, " bytes, too short for the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
  ATTN_CHECK(n <= size - 8, where, "header length ", n, " runs past the end of the file (", size,
             " bytes)");
  ATTN_CHECK(n >= 2, where, "header length ", n, " is too short for a JSON object");
  const char* hp = reinterpret_cast<const char*>(data + 8);
  json header = json::parse(hp, hp + n, nullptr, /*allow_exceptions=*/false);
  ATTN_CHECK(!header.is_discarded(), where, "header is not valid JSON");
  ATTN_CHECK(header.is_object(), where, "header is JSON but not an object");
  const uint8_t* body = data + 8 + n;
  const uint64_t body_size = size - 8 - n;

  SafetensorsFile out;
  struct Entry { std::string name; DTypeInfo info; Shape shape; uint64_t begin, end; };
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      ATTN_CHECK(v.is_object(), where, "__metadata__ must be an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        ATTN_CHECK(m.value().is_string(), where, "__metadata__ value for '", m.key(),
                   "' is not a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    ATTN_CHECK(v.is_object(), where, "entry '", name, "' is not an object");
    ATTN_CHECK(v.contains("dtype") && v["dtype"].is_string(), where, "entry '", name, "' has no dtype string");
    ATTN_CHECK(v.contains("shape") && v["shape"].is_array(), where, "entry '", name, "' has no shape array");
    ATTN_CHECK(v.contains("data_offsets") && v["data_offsets"].is_array() && v["data_offsets"].size() == 2,
               where, "entry '", name, "' needs data_offsets [begin, end]");
    Entry e;
    e.name = name;
    const std::string dt = v["dtype"].get<std::string>();
    ATTN_CHECK(parse_dtype(dt, e.info), where, "entry '", name, "' has unsupported dtype '", dt,
               "' (expected F32, F64, BF16, F16, I32, I64, U8 or BOOL)");
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
    ATTN_CHECK(numel <= (uint64_t(1) << 60) / e.info.file_size && e.end - e.begin == numel * e.info.file_size,
               where, "entry '", name, "' has ", e.end - e.begin, " bytes of data, but dtype ", dt,
               " and shape ", e.shape, " need ", numel * e.info.file_size);
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  for (const Entry& e : entries) {
    ATTN_CHECK(e.begin == pos, where, "entry '", e.name, "' starts at byte ", e.begin, " but the previous "
               "entry ends at ", pos, " (offsets must be contiguous and non-overlapping)");
    pos = e.end;
  }
  ATTN_CHECK(pos == body_size, where, "data block is ", body_size, " bytes but the entries cover ", pos);

  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.info.dtype);
    const uint8_t* src = body + e.begin;
    if (e.info.f16) {
      float* d = t.data<float>();
      for (int64_t i = 0; i < t.numel(); ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        d[i] = half_to_float(h);
      }
    } else if (e.end > e.begin) {
      std::memcpy(t.raw_data(), src, e.end - e.begin);
    }
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

SafetensorsFile load_safetensors(const std::string& path) {
  std::error_code ec;
  ATTN_CHECK(!std::filesystem::is_directory(path, ec), "safetensors: expected a file, but '", path,
             "' is a directory");
  std::ifstream f(path, std::ios::binary);
  ATTN_CHECK(f.good(), "safetensors: cannot open '", path, "': ", std::strerror(errno));
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  f.seekg(0);
  std::string buf(size_t(std::max<std::streamoff>(size, 0)), '\0');
  f.read(buf.data(), size);
  ATTN_CHECK(f.good() || size == 0, "safetensors: read of '", path, "' failed");
  return parse_safetensors(reinterpret_cast<const uint8_t*>(buf.data()), buf.size(), path);
}

std::string serialize_safetensors(const TensorList& tensors, const Metadata& metadata) {
  using nlohmann::ordered_json;
  ordered_json header = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json m = ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = m;
  }
  uint64_t off = 0;
  std::vector<Tensor> contig;
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
  out.reserve(out.size() + off);
  for (const Tensor& c : contig)
    out.append(static_cast<const char*>(c.raw_data()), size_t(c.numel()) * c.element_size());
  return out;
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ATTN_CHECK(fd >= 0, "write '", path, "': cannot create '", tmp, "': ", std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      fail("write '", path, "': write failed after ", done, " bytes: ", std::strerror(err));
    }
    done += size_t(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail("write '", path, "': flush failed: ", std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail("write '", path, "': rename failed: ", std::strerror(err));
  }
}

void save_safetensors(const std::string& path, const TensorList& tensors, const Metadata& metadata) {
  write_file_atomic(path, serialize_safetensors(tensors, metadata));
}

}  // namespace attn::io

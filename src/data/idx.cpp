// IDX reader/writer: header validation, bounded gzip inflation (zlib), big-endian decoding.
#include "attn/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "attn/data/limits.h"

namespace attn::data {
namespace {

constexpr size_t kMaxHeader = 4 + 4 * 255;

std::string hex_bytes(const uint8_t* p, size_t n) {
  std::string s;
  char buf[4];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", unsigned(p[i]));
    if (i) s += ' ';
    s += buf;
  }
  return s;
}

struct TypeInfo {
  size_t size;   // bytes per element in the file
  DType dtype;   // what it loads as
};

bool type_info(uint8_t code, TypeInfo& t) {
  switch (code) {
    case 0x08: t = {1, DType::u8}; return true;
    case 0x09: t = {1, DType::i32}; return true;
    case 0x0B: t = {2, DType::i32}; return true;
    case 0x0C: t = {4, DType::i32}; return true;
    case 0x0D: t = {4, DType::f32}; return true;
    case 0x0E: t = {8, DType::f64}; return true;
    default: return false;
  }
}

inline uint32_t be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}
inline uint64_t be64(const uint8_t* p) { return (uint64_t(be32(p)) << 32) | be32(p + 4); }

// Inflates a gzip buffer on demand, never producing more than asked for.
class Inflater {
 public:
  Inflater(const uint8_t* data, size_t size, const std::string& what) : in_(data), left_(size), what_(what) {
    std::memset(&zs_, 0, sizeof zs_);
    if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK) fail("IDX file ", what_, ": gzip: could not initialise zlib");
  }
  ~Inflater() { inflateEnd(&zs_); }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  // Grows `out` until it holds `want` bytes or the compressed stream ends.
  void fill(std::vector<uint8_t>& out, size_t want) {
    while (out.size() < want && !ended_) {
      const size_t have = out.size();
      const size_t cap = std::min(want, std::max<size_t>(have * 2, size_t(1) << 16));
      out.resize(cap);
      while (out.size() > have && produced_ < cap && !ended_) step(out, cap);
      out.resize(produced_);
    }
  }

 private:
  void step(std::vector<uint8_t>& out, size_t cap) {
    if (zs_.avail_in == 0 && left_ > 0) {
      const size_t n = std::min<size_t>(left_, UINT_MAX);
      zs_.next_in = const_cast<Bytef*>(in_);
      zs_.avail_in = uInt(n);
      in_ += n;
      left_ -= n;
    }
    const size_t room = std::min<size_t>(cap - produced_, UINT_MAX);
    zs_.next_out = out.data() + produced_;
    zs_.avail_out = uInt(room);
    const int rc = inflate(&zs_, Z_NO_FLUSH);
    produced_ += room - zs_.avail_out;
    if (rc == Z_STREAM_END) {
      // Another gzip member may follow; anything else is garbage.
      const size_t rest = zs_.avail_in + left_;
      if (rest == 0) { ended_ = true; return; }
      auto byte_at = [&](size_t k) { return k < zs_.avail_in ? zs_.next_in[k] : in_[k - zs_.avail_in]; };
      const uint8_t b0 = byte_at(0), b1 = rest >= 2 ? byte_at(1) : 0;
      if (rest >= 2 && b0 == 0x1f && b1 == 0x8b) {
        if (inflateReset(&zs_) != Z_OK) fail("IDX file ", what_, ": gzip corrupt: could not reset the stream");
        return;
      }
      fail("IDX file ", what_, ": gzip corrupt: trailing garbage after the gzip stream (", rest,
           rest == 1 ? " byte)" : " bytes)");
    }
    if (rc == Z_OK) return;
    if (rc == Z_BUF_ERROR && zs_.avail_in == 0 && left_ == 0)
      fail("IDX file ", what_, ": gzip corrupt: unexpected end of the compressed stream");
    if (rc == Z_MEM_ERROR) fail("IDX file ", what_, ": gzip: out of memory");
    fail("IDX file ", what_, ": gzip corrupt: ", zs_.msg ? zs_.msg : "invalid compressed data");
  }

  z_stream zs_;
  const uint8_t* in_;
  size_t left_;
  size_t produced_ = 0;
  bool ended_ = false;
  const std::string& what_;
};

struct Header {
  TypeInfo type;
  uint8_t code = 0;
  Shape shape;
  size_t header_bytes = 0;
  size_t data_bytes = 0;
};

// Validates the magic; returns the header length the dimensions need.
size_t check_magic(const uint8_t* p, size_t n, const std::string& what, Header& h) {
  if (n < 4) fail("IDX file ", what, ": truncated header: expected at least 4 bytes, found ", n);
  if (p[0] != 0 || p[1] != 0)
    fail("IDX file ", what, ": bad magic: expected the bytes 00 00 <type> <ndims>, found ", hex_bytes(p, 4));
  if (!type_info(p[2], h.type))
    fail("IDX file ", what, ": unknown type code ", "0x", hex_bytes(p + 2, 1),
         " (expected 0x08 u8, 0x09 i8, 0x0b i16, 0x0c i32, 0x0d f32 or 0x0e f64)");
  h.code = p[2];
  return 4 + 4 * size_t(p[3]);
}

void parse_dims(const uint8_t* p, size_t n, const std::string& what, Header& h) {
  const size_t ndims = p[3];
  h.header_bytes = 4 + 4 * ndims;
  if (n < h.header_bytes)
    fail("IDX file ", what, ": truncated header: expected ", h.header_bytes, " bytes for ", ndims,
         " dimensions, found ", n);
  h.shape.resize(ndims);
  for (size_t d = 0; d < ndims; ++d) h.shape[d] = int64_t(be32(p + 4 + 4 * d));
  // The strides (products of the sizes, zeros counted as ones) must fit as well as the byte count,
  // so an empty tensor with huge other sizes is refused too, as torch refuses it.
  uint64_t span = h.type.size;
  bool overflow = false;
  for (size_t d = 0; d < ndims && !overflow; ++d)
    overflow = __builtin_mul_overflow(span, uint64_t(std::max<int64_t>(h.shape[d], 1)), &span);
  const bool empty = std::find(h.shape.begin(), h.shape.end(), int64_t(0)) != h.shape.end();
  const uint64_t total = empty ? 0 : span;
  // The data plus the header must be addressable; tensors index with int64.
  const uint64_t limit = uint64_t(std::numeric_limits<int64_t>::max()) - kMaxHeader - 1;
  if (overflow || span > limit || span > std::numeric_limits<size_t>::max() - kMaxHeader - 1)
    fail("IDX file ", what, ": sizes ", h.shape, " of ", h.type.size, "-byte elements overflow");
  h.data_bytes = size_t(total);
}

Tensor decode(const Header& h, const uint8_t* src) {
  Tensor t = Tensor::empty(h.shape, h.type.dtype);
  const size_t n = size_t(shape_numel(h.shape));
  switch (h.code) {
    case 0x08: if (n) std::memcpy(t.data<uint8_t>(), src, n); break;
    case 0x09: {
      int32_t* o = t.data<int32_t>();
      for (size_t i = 0; i < n; ++i) o[i] = int32_t(int8_t(src[i]));
      break;
    }
    case 0x0B: {
      int32_t* o = t.data<int32_t>();
      for (size_t i = 0; i < n; ++i) o[i] = int32_t(int16_t(uint16_t((uint16_t(src[2 * i]) << 8) | src[2 * i + 1])));
      break;
    }
    case 0x0C: {
      int32_t* o = t.data<int32_t>();
      for (size_t i = 0; i < n; ++i) o[i] = int32_t(be32(src + 4 * i));
      break;
    }
    case 0x0D: {
      float* o = t.data<float>();
      for (size_t i = 0; i < n; ++i) {
        const uint32_t u = be32(src + 4 * i);
        std::memcpy(o + i, &u, 4);
      }
      break;
    }
    case 0x0E: {
      double* o = t.data<double>();
      for (size_t i = 0; i < n; ++i) {
        const uint64_t u = be64(src + 8 * i);
        std::memcpy(o + i, &u, 8);
      }
      break;
    }
  }
  return t;
}

void check_data_size(const Header& h, size_t found, const std::string& what) {
  if (found < h.data_bytes)
    fail("IDX file ", what, ": truncated data: expected ", h.data_bytes, " bytes of data, found ", found);
  if (found > h.data_bytes)
    fail("IDX file ", what, ": trailing data: expected ", h.data_bytes, " bytes of data, found ", found);
}

Tensor parse_plain(const uint8_t* data, size_t size, const std::string& what) {
  Header h;
  check_magic(data, size, what, h);
  parse_dims(data, size, what, h);
  check_data_size(h, size - h.header_bytes, what);
  return decode(h, data + h.header_bytes);
}

// Before inflating the data: what the header claims must be able to come out of `size` compressed
// bytes (deflate inflates at most 1032:1, gzip members only add overhead), and stay within the
// inflated-size ceiling.
void check_inflatable(const Header& h, size_t size, const std::string& what) {
  const uint64_t total = uint64_t(h.header_bytes) + h.data_bytes;   // parse_dims keeps this < 2^63
  const unsigned __int128 can = (unsigned __int128)size * 1032u;
  if (total > can)
    fail("IDX file ", what, ": gzip corrupt: the header claims ", h.data_bytes, " bytes of data (sizes ", h.shape,
         " of ", h.type.size, "-byte elements), more than ", size,
         " compressed bytes can inflate to (deflate inflates at most 1032:1): truncated or not this file's header");
  const int64_t limit = max_inflated_bytes();
  if (total > uint64_t(limit))
    fail("IDX file ", what, ": the header claims ", h.data_bytes, " bytes of data (sizes ", h.shape, " of ",
         h.type.size, "-byte elements), over the inflated-size limit of ", limit,
         " bytes (ATTN_MAX_INFLATED_BYTES); raise it with ATTN_MAX_INFLATED_BYTES=<bytes> or "
         "attn::data::set_max_inflated_bytes(<bytes>)");
}

Tensor parse_gzip(const uint8_t* data, size_t size, const std::string& what) {
  Inflater inf(data, size, what);
  std::vector<uint8_t> buf;
  inf.fill(buf, 4);
  Header h;
  const size_t need = check_magic(buf.data(), buf.size(), what, h);
  inf.fill(buf, need);
  parse_dims(buf.data(), buf.size(), what, h);
  check_inflatable(h, size, what);
  // One byte more than the header asks for tells trailing data from the end of the stream; the
  // inflater never produces more.
  inf.fill(buf, h.header_bytes + h.data_bytes + 1);
  if (buf.size() > h.header_bytes + h.data_bytes)
    fail("IDX file ", what, ": trailing data: expected ", h.data_bytes,
         " bytes of data, found more (the gzip stream goes on past them)");
  check_data_size(h, buf.size() - h.header_bytes, what);
  return decode(h, buf.data() + h.header_bytes);
}

void put_be32(std::string& s, uint32_t v) {
  s += char(v >> 24);
  s += char((v >> 16) & 0xff);
  s += char((v >> 8) & 0xff);
  s += char(v & 0xff);
}

}  // namespace

Tensor parse_idx(const uint8_t* data, size_t size, const std::string& what) {
  if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) return parse_gzip(data, size, what);
  return parse_plain(data, size, what);
}

Tensor read_idx(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail("IDX file ", path, ": cannot open: ", std::strerror(errno));
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  for (;;) {
    const size_t n = std::fread(chunk, 1, sizeof chunk, f);
    bytes.insert(bytes.end(), chunk, chunk + n);
    if (n < sizeof chunk) break;
  }
  const bool bad = std::ferror(f);
  const int err = errno;
  std::fclose(f);
  if (bad) fail("IDX file ", path, ": cannot read: ", std::strerror(err));
  return parse_idx(bytes.data(), bytes.size(), path);
}

std::string serialize_idx(const Tensor& t) {
  uint8_t code = 0;
  switch (t.dtype()) {
    case DType::u8: code = 0x08; break;
    case DType::i32: code = 0x0C; break;
    case DType::f32: code = 0x0D; break;
    case DType::f64: code = 0x0E; break;
    default: fail("serialize_idx: expected a u8, i32, f32 or f64 tensor, got ", dtype_name(t.dtype()));
  }
  ATTN_CHECK(t.dim() <= 255, "serialize_idx: expected at most 255 dimensions, got ", t.dim());
  for (int64_t d : t.shape())
    ATTN_CHECK(d <= int64_t(UINT32_MAX), "serialize_idx: sizes must be below 2^32, got shape ", t.shape());
  std::string s;
  s += char(0);
  s += char(0);
  s += char(code);
  s += char(t.dim());
  for (int64_t d : t.shape()) put_be32(s, uint32_t(d));
  Tensor c = t.contiguous();
  const size_t n = size_t(c.numel()), es = c.element_size();
  const uint8_t* p = static_cast<const uint8_t*>(c.raw_data());
  s.reserve(s.size() + n * es);
  for (size_t i = 0; i < n; ++i)
    for (size_t b = 0; b < es; ++b) s += char(p[i * es + (es - 1 - b)]);  // little -> big endian
  return s;
}

}  // namespace attn::data

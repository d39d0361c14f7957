// IDX reader: round trips, every type code against numpy's big-endian parse, gzip (single and
// multi-member, written by Python's gzip module), bounded inflation, and every error message.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include "attn/attn.h"
#include "attn/data/idx.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::torch_ref;

namespace {

Tensor bytes_tensor(const std::string& s) {
  std::vector<uint8_t> v(s.begin(), s.end());
  return Tensor::from_vector<uint8_t>(v, {int64_t(v.size())});
}
std::string tensor_bytes(const Tensor& t) {
  const auto v = t.to_vector<uint8_t>();
  return std::string(v.begin(), v.end());
}

Tensor parse(const std::string& s, const std::string& what = "<buffer>") {
  return data::parse_idx(reinterpret_cast<const uint8_t*>(s.data()), s.size(), what);
}

std::string header(uint8_t code, const std::vector<uint32_t>& dims) {
  std::string s = {char(0), char(0), char(code), char(dims.size())};
  for (uint32_t d : dims) {
    s += char(d >> 24);
    s += char((d >> 16) & 0xff);
    s += char((d >> 8) & 0xff);
    s += char(d & 0xff);
  }
  return s;
}

std::string gzip(const std::string& raw, int members = 1) {
  return tensor_bytes(torch_ref("data.gzip", {{"bytes", bytes_tensor(raw)}}, {{"members", members}}).at("out"));
}

Tensor numpy_ref(const std::string& raw) { return torch_ref("data.idx_numpy", {{"bytes", bytes_tensor(raw)}}).at("out"); }

// Exact equality, NaNs in the same places.
// A shape with no elements ({0, 4}) is round-tripped on purpose: there, both sides empty is the answer.
void expect_same(const Tensor& a, const Tensor& b, const std::string& ctx) {
  ASSERT_EQ(a.dtype(), b.dtype()) << ctx;
  EXPECT_TENSOR_NEAR_OR_EMPTY(a, b, 0.0, 0.0) << ctx;
}

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/attn_idx_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string p = path + "/" + name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
};

}  // namespace

TEST(Idx, RoundTripsEveryWritableDtypeAgainstNumpy) {
  Generator g(3);
  const std::vector<Shape> shapes = {{7}, {3, 5}, {2, 3, 4}, {1, 1, 2, 3}, {0, 4}};
  for (const Shape& shape : shapes) {
    for (DType dt : {DType::u8, DType::i32, DType::f32, DType::f64}) {
      Tensor t;
      if (dt == DType::u8 || dt == DType::i32) t = (randn(shape, g, DType::f64) * 1000.0).to(dt);
      else t = randn(shape, g, dt) * 1e3;
      const std::string raw = data::serialize_idx(t);
      const std::string ctx = std::string(dtype_name(dt)) + " " + shape_str(shape);
      expect_same(parse(raw), t, ctx);
      expect_same(parse(raw), numpy_ref(raw), ctx);
      expect_same(parse(gzip(raw)), t, ctx + " gzip");
    }
  }
}

TEST(Idx, SpecialFloatValuesSurvive) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor t = Tensor::from_vector<float>({0.f, -0.f, inf, -inf, NAN, 3.4e38f, 1e-45f, -1.5f}, {8});
  const std::string raw = data::serialize_idx(t);
  expect_same(parse(raw), numpy_ref(raw), "f32 specials");
  Tensor d = Tensor::from_vector<double>({0.0, -0.0, double(inf), -double(inf), NAN, 1.7e308, 5e-324}, {7});
  const std::string rawd = data::serialize_idx(d);
  expect_same(parse(rawd), numpy_ref(rawd), "f64 specials");
  expect_same(parse(rawd), d, "f64 specials round trip");
}

TEST(Idx, NarrowSignedTypesWidenToI32) {
  // i8 (0x09) and i16 (0x0B) bytes covering the extremes; numpy reads them big-endian.
  std::string i8 = header(0x09, {2, 5});
  for (int v : {-128, -1, 0, 1, 127, 100, -100, 55, -55, 7}) i8 += char(int8_t(v));
  expect_same(parse(i8), numpy_ref(i8), "i8");
  EXPECT_EQ(parse(i8).dtype(), DType::i32);

  std::string i16 = header(0x0B, {3, 3});
  for (int v : {-32768, -1, 0, 1, 32767, 256, -256, 12345, -12345}) {
    i16 += char(uint16_t(int16_t(v)) >> 8);
    i16 += char(uint16_t(int16_t(v)) & 0xff);
  }
  expect_same(parse(i16), numpy_ref(i16), "i16");
  expect_same(parse(gzip(i16)), numpy_ref(i16), "i16 gzip");

  std::string i32 = header(0x0C, {2});
  for (uint8_t b : {0x80, 0x00, 0x00, 0x00, 0x7f, 0xff, 0xff, 0xff}) i32 += char(b);
  expect_same(parse(i32), numpy_ref(i32), "i32 extremes");
}

TEST(Idx, ZeroDimensionsAndEmptySizes) {
  // No dimensions: a 0-d tensor of one element.
  std::string scalar = header(0x08, {}) + char(42);
  Tensor s = parse(scalar);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item(), 42.0);
  // A zero size makes the data empty; the other sizes may be large while the strides fit int64.
  Tensor e = parse(header(0x0E, {0xFFFFFFFFu, 0, 0xFFFFu}));
  EXPECT_EQ(e.shape(), (Shape{4294967295, 0, 65535}));
  EXPECT_EQ(e.numel(), 0);
  // ... and not when they do not (found by idx_fuzz: the strides overflowed).
  EXPECT_EQ(error_of([] { parse(header(0x08, {0, 0xFFFFFFFFu, 0xFFFFFFFFu})); }),
            "IDX file <buffer>: sizes [0, 4294967295, 4294967295] of 1-byte elements overflow");
}

TEST(Idx, GzipMultiMemberAndFiles) {
  Generator g(5);
  Tensor t = (rand({4, 9, 11}, g) * 255.0).to(DType::u8);
  const std::string raw = data::serialize_idx(t);
  for (int members : {2, 3, 7}) expect_same(parse(gzip(raw, members)), t, "members " + std::to_string(members));
  TempDir dir;
  expect_same(data::read_idx(dir.write("plain-idx3-ubyte", raw)), t, "plain file");
  expect_same(data::read_idx(dir.write("compressed.gz", gzip(raw))), t, "gz file");
  // Compression is detected by content, not by name.
  expect_same(data::read_idx(dir.write("misnamed", gzip(raw))), t, "gz file without .gz");
}

TEST(Idx, HeaderErrors) {
  EXPECT_EQ(error_of([] { parse(""); }), "IDX file <buffer>: truncated header: expected at least 4 bytes, found 0");
  EXPECT_EQ(error_of([] { parse(std::string("\0\0\x08", 3)); }),
            "IDX file <buffer>: truncated header: expected at least 4 bytes, found 3");
  EXPECT_EQ(error_of([] { parse(std::string("\x01\0\x08\x01", 4)); }),
            "IDX file <buffer>: bad magic: expected the bytes 00 00 <type> <ndims>, found 01 00 08 01");
  EXPECT_EQ(error_of([] { parse(std::string("\0\xff\x08\x01", 4), "x.idx"); }),
            "IDX file x.idx: bad magic: expected the bytes 00 00 <type> <ndims>, found 00 ff 08 01");
  EXPECT_EQ(error_of([] { parse(header(0x0A, {3}) + "abc"); }),
            "IDX file <buffer>: unknown type code 0x0a (expected 0x08 u8, 0x09 i8, 0x0b i16, 0x0c i32, 0x0d f32 or "
            "0x0e f64)");
  EXPECT_EQ(error_of([] { parse(header(0x08, {1, 2, 3}).substr(0, 10)); }),
            "IDX file <buffer>: truncated header: expected 16 bytes for 3 dimensions, found 10");
  EXPECT_EQ(error_of([] { parse(header(0x0E, {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu})); }),
            "IDX file <buffer>: sizes [4294967295, 4294967295, 4294967295] of 8-byte elements overflow");
  // 2^31 * 2^31 * 2 bytes = 2^63: one past what int64 can index.
  EXPECT_EQ(error_of([] { parse(header(0x0B, {0x80000000u, 0x80000000u})); }),
            "IDX file <buffer>: sizes [2147483648, 2147483648] of 2-byte elements overflow");
}

TEST(Idx, DataLengthErrors) {
  EXPECT_EQ(error_of([] { parse(header(0x08, {2, 3}) + "abcde", "x.idx"); }),
            "IDX file x.idx: truncated data: expected 6 bytes of data, found 5");
  EXPECT_EQ(error_of([] { parse(header(0x08, {2, 3}) + "abcdefg", "x.idx"); }),
            "IDX file x.idx: trailing data: expected 6 bytes of data, found 7");
  EXPECT_EQ(error_of([] { parse(header(0x0D, {0x10000u, 0x10000u}) + "abcd"); }),
            "IDX file <buffer>: truncated data: expected 17179869184 bytes of data, found 4")
      << "sizes that fit but are not there";
  EXPECT_EQ(error_of([&] { parse(gzip(header(0x08, {2, 3}) + "abcde")); }),
            "IDX file <buffer>: truncated data: expected 6 bytes of data, found 5");
  EXPECT_EQ(error_of([&] { parse(gzip(header(0x08, {2, 3}) + "abcdefg")); }),
            "IDX file <buffer>: trailing data: expected 6 bytes of data, found more (the gzip stream goes on past "
            "them)");
}

TEST(Idx, InflatesNoMoreThanTheHeaderAsks) {
  // 10 bytes announced, 32 MiB of zeros behind them: a decompression bomb. Inflation stops at
  // 11 data bytes.
  const std::string raw = header(0x08, {10}) + std::string(size_t(32) << 20, '\0');
  const std::string gz = gzip(raw);
  ASSERT_LT(gz.size(), size_t(1) << 20);
  EXPECT_EQ(error_of([&] { parse(gz); }),
            "IDX file <buffer>: trailing data: expected 10 bytes of data, found more (the gzip stream goes on past "
            "them)");
}

TEST(Idx, GzipErrors) {
  const std::string raw = header(0x08, {3, 5}) + "0123456789abcde";
  const std::string gz = gzip(raw);
  EXPECT_EQ(error_of([&] { parse(gz.substr(0, gz.size() - 6)); }),
            "IDX file <buffer>: gzip corrupt: unexpected end of the compressed stream");
  EXPECT_EQ(error_of([&] { parse(gz.substr(0, 12)); }),
            "IDX file <buffer>: gzip corrupt: unexpected end of the compressed stream");
  EXPECT_EQ(error_of([&] { parse(gz.substr(0, 2)); }),
            "IDX file <buffer>: gzip corrupt: unexpected end of the compressed stream");
  std::string bad_crc = gz;
  bad_crc[bad_crc.size() - 6] ^= 0x55;   // inside the CRC-32 trailer
  EXPECT_EQ(error_of([&] { parse(bad_crc); }), "IDX file <buffer>: gzip corrupt: incorrect data check");
  std::string bad_len = gz;
  bad_len[bad_len.size() - 2] ^= 0x01;   // inside ISIZE
  EXPECT_EQ(error_of([&] { parse(bad_len); }), "IDX file <buffer>: gzip corrupt: incorrect length check");
  std::string bad_method = gz;
  bad_method[2] = 7;
  EXPECT_EQ(error_of([&] { parse(bad_method); }), "IDX file <buffer>: gzip corrupt: unknown compression method");
  EXPECT_EQ(error_of([&] { parse(gz + "xyz"); }),
            "IDX file <buffer>: gzip corrupt: trailing garbage after the gzip stream (3 bytes)");
  EXPECT_EQ(error_of([&] { parse(gz + "\x1f"); }),
            "IDX file <buffer>: gzip corrupt: trailing garbage after the gzip stream (1 byte)");
  EXPECT_EQ(error_of([&] { parse(gzip("\x01\x02\x03\x04")); }),
            "IDX file <buffer>: bad magic: expected the bytes 00 00 <type> <ndims>, found 01 02 03 04");
  EXPECT_EQ(error_of([&] { parse(gzip("")); }),
            "IDX file <buffer>: truncated header: expected at least 4 bytes, found 0");
}

TEST(Idx, FileErrors) {
  EXPECT_EQ(error_of([] { data::read_idx("/nonexistent/attn/x-idx1-ubyte"); }),
            "IDX file /nonexistent/attn/x-idx1-ubyte: cannot open: No such file or directory");
  TempDir dir;
  EXPECT_EQ(error_of([&] { data::read_idx(dir.path); }), "IDX file " + dir.path + ": cannot read: Is a directory");
  const std::string p = dir.write("short.gz", gzip(header(0x08, {4}) + "abc"));
  EXPECT_EQ(error_of([&] { data::read_idx(p); }),
            "IDX file " + p + ": truncated data: expected 4 bytes of data, found 3");
}

TEST(Idx, SerializeRejectsWhatIdxCannotHold) {
  EXPECT_EQ(error_of([] { data::serialize_idx(Tensor::zeros({2}, DType::i64)); }),
            "serialize_idx: expected a u8, i32, f32 or f64 tensor, got i64");
}

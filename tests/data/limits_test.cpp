// attn/data/limits.h: image, gzip IDX and SWORD files that claim more than they can hold, or more
// than the configured ceilings, are refused before anything is allocated or inflated, with an error
// that names the limit, the size claimed, the ceiling and how to raise it.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <zlib.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "attn/attn.h"
#include "attn/core/memory.h"
#include "attn/data/idx.h"
#include "attn/data/image.h"
#include "attn/data/limits.h"
#include "attn/data/sword.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::torch_ref;

namespace {

// Restores both ceilings when a test is done with them.
struct ScopedLimits {
  int64_t pixels = data::max_image_pixels(), inflated = data::max_inflated_bytes();
  ~ScopedLimits() {
    data::set_max_image_pixels(pixels);
    data::set_max_inflated_bytes(inflated);
  }
};

int64_t peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return int64_t(u.ru_maxrss) / 1024;
}

// Tensor storage allocated so far (every Tensor::empty counts, touched or not).
int64_t tensor_allocations() { return memory_stats().allocations; }

void put_be32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int k = 0; k < 4; ++k) b[at + size_t(k)] = uint8_t(v >> (24 - 8 * k));
}

std::vector<uint8_t> zlib_bytes(const std::vector<uint8_t>& raw, int window_bits = 15) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 9, Z_DEFLATED, window_bits, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::vector<uint8_t> out(deflateBound(&zs, uLong(raw.size())) + 64);
  zs.next_in = const_cast<Bytef*>(raw.data());
  zs.avail_in = uInt(raw.size());
  zs.next_out = out.data();
  zs.avail_out = uInt(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}
std::vector<uint8_t> gzip_bytes(const std::vector<uint8_t>& raw) { return zlib_bytes(raw, 15 + 16); }

void png_chunk(std::vector<uint8_t>& png, const char* type, const std::vector<uint8_t>& data) {
  const size_t at = png.size();
  png.resize(at + 4);
  put_be32(png, at, uint32_t(data.size()));
  png.insert(png.end(), type, type + 4);
  png.insert(png.end(), data.begin(), data.end());
  const uLong head = crc32(0, reinterpret_cast<const Bytef*>(type), 4);
  const uint32_t crc = uint32_t(crc32(head, data.data(), uInt(data.size())));
  png.resize(png.size() + 4);
  put_be32(png, png.size() - 4, crc);
}

// A real 1 x 1 RGB PNG whose IHDR then claims w x h (its CRC fixed): ~70 bytes.
std::vector<uint8_t> png_claiming(uint32_t w, uint32_t h) {
  std::vector<uint8_t> png = data::encode_png(Tensor::zeros({1, 1, 3}, DType::u8));
  put_be32(png, 16, w);
  put_be32(png, 20, h);
  put_be32(png, 29, uint32_t(crc32(0, png.data() + 12, 17)));
  return png;
}

// A 16 x 16 JPEG written by PIL (mode "RGB" or "L"), then with its frame header's size set to w x h.
std::vector<uint8_t> jpeg_claiming(uint16_t w, uint16_t h, const std::string& mode = "RGB") {
  Tensor px = Tensor::full({16, 16, 3}, 100.0, DType::u8);
  const Tensor bytes = torch_ref("images.encode", {{"pixels", px}}, {{"format", "JPEG"}, {"mode", mode}}).at("bytes");
  std::vector<uint8_t> jpg = bytes.to_vector<uint8_t>();
  size_t sof = 2;
  while (sof + 9 < jpg.size() && !(jpg[sof] == 0xFF && jpg[sof + 1] == 0xC0)) ++sof;
  EXPECT_LT(sof + 9, jpg.size());
  jpg[sof + 5] = uint8_t(h >> 8), jpg[sof + 6] = uint8_t(h);
  jpg[sof + 7] = uint8_t(w >> 8), jpg[sof + 8] = uint8_t(w);
  return jpg;
}

std::string idx_header(uint8_t code, const std::vector<uint32_t>& dims) {
  std::string s = {0, 0, char(code), char(dims.size())};
  for (uint32_t d : dims)
    for (int k = 0; k < 4; ++k) s += char(d >> (24 - 8 * k));
  return s;
}

Tensor parse_idx_bytes(const std::vector<uint8_t>& b, const std::string& what = "x.gz") {
  return data::parse_idx(b.data(), b.size(), what);
}

std::vector<uint8_t> as_bytes(const std::string& s) { return {s.begin(), s.end()}; }

}  // namespace

// The environment sets the defaults, read at the first use in the process: this test runs first.
TEST(Limits, EnvironmentSetsTheDefaults) {
  setenv("ATTN_MAX_IMAGE_PIXELS", "4096", 1);
  setenv("ATTN_MAX_INFLATED_BYTES", "65536", 1);
  EXPECT_EQ(data::max_image_pixels(), 4096);
  EXPECT_EQ(data::max_inflated_bytes(), 65536);
  unsetenv("ATTN_MAX_IMAGE_PIXELS");
  unsetenv("ATTN_MAX_INFLATED_BYTES");
  EXPECT_EQ(data::max_image_pixels(), 4096) << "read once";
  data::set_max_image_pixels(data::kDefaultMaxImagePixels);
  data::set_max_inflated_bytes(data::kDefaultMaxInflatedBytes);
}

TEST(Limits, DefaultsAndSetters) {
  ScopedLimits keep;
  EXPECT_EQ(data::kDefaultMaxImagePixels, int64_t(8192) * 8192);
  EXPECT_EQ(data::kDefaultMaxInflatedBytes, int64_t(1) << 30);
  data::set_max_image_pixels(1234);
  EXPECT_EQ(data::max_image_pixels(), 1234);
  data::set_max_inflated_bytes(99);
  EXPECT_EQ(data::max_inflated_bytes(), 99);
  EXPECT_EQ(error_of([] { data::set_max_image_pixels(0); }),
            "set_max_image_pixels: expected a pixel count > 0, got 0");
  EXPECT_EQ(error_of([] { data::set_max_inflated_bytes(-5); }),
            "set_max_inflated_bytes: expected a byte count > 0, got -5");
}

TEST(Limits, ImageOverThePixelCeilingIsRefusedBeforeAllocating) {
  // 10000 x 10000 = 10^8 pixels: under the former ceiling of 2^27, over today's 2^26.
  const std::vector<uint8_t> png = png_claiming(10000, 10000);
  const std::vector<uint8_t> jpg = jpeg_claiming(60000, 60000);
  const int64_t before = tensor_allocations();
  EXPECT_EQ(error_of([&] { data::decode_image(png.data(), png.size(), 0, "big.png"); }),
            "image: 'big.png' is 10000 x 10000 = 100000000 pixels, over the image pixel limit of 67108864 "
            "(ATTN_MAX_IMAGE_PIXELS); raise it with ATTN_MAX_IMAGE_PIXELS=<pixels> or "
            "attn::data::set_max_image_pixels(<pixels>)");
  EXPECT_EQ(error_of([&] { data::decode_image(jpg.data(), jpg.size(), 3, "big.jpg"); }),
            "image: 'big.jpg' is 60000 x 60000 = 3600000000 pixels, over the image pixel limit of 67108864 "
            "(ATTN_MAX_IMAGE_PIXELS); raise it with ATTN_MAX_IMAGE_PIXELS=<pixels> or "
            "attn::data::set_max_image_pixels(<pixels>)");
  EXPECT_EQ(tensor_allocations(), before) << "a refused image allocated tensor storage";

  // The ceiling is the process's (set_max_image_pixels) unless a call passes its own.
  ScopedLimits keep;
  const std::vector<uint8_t> small = data::encode_png(Tensor::zeros({20, 24, 1}, DType::u8));
  data::set_max_image_pixels(100);
  EXPECT_EQ(error_of([&] { data::decode_image(small.data(), small.size(), 0, "s.png"); }),
            "image: 's.png' is 24 x 20 = 480 pixels, over the image pixel limit of 100 (ATTN_MAX_IMAGE_PIXELS); "
            "raise it with ATTN_MAX_IMAGE_PIXELS=<pixels> or attn::data::set_max_image_pixels(<pixels>)");
  EXPECT_EQ(data::decode_image(small.data(), small.size(), 0, "s.png", 480).shape(), (Shape{20, 24, 1}));
  data::set_max_image_pixels(480);
  EXPECT_EQ(data::decode_image(small.data(), small.size()).shape(), (Shape{20, 24, 1}));
  EXPECT_EQ(error_of([&] { data::decode_image(small.data(), small.size(), 0, "s.png", 479); }),
            "image: 's.png' is 24 x 20 = 480 pixels, over the limit of 479 pixels that this call allows (its "
            "max_pixels argument)");
  EXPECT_EQ(error_of([&] { data::decode_image(small.data(), small.size(), 0, "s.png", -1); }),
            "image: expected max_pixels >= 0 (0: data::max_image_pixels()), got -1");
}

TEST(Limits, PngThatCannotHoldItsPixelsIsRefusedBeforeAllocating) {
  // 8192 x 8192 RGB needs 201 MB of inflated rows; 69 bytes inflate to 71 KB at most.
  const std::vector<uint8_t> png = png_claiming(8192, 8192);
  const int64_t before = tensor_allocations();
  EXPECT_EQ(error_of([&] { data::decode_image(png.data(), png.size(), 0, "bomb.png"); }),
            "image: cannot decode 'bomb.png': PNG: its header claims 8192 x 8192 pixels, whose data (201334784 bytes "
            "inflated) cannot come from a file of " + std::to_string(png.size()) +
            " bytes (zlib inflates at most 1032:1): the file is truncated or corrupt");
  EXPECT_EQ(tensor_allocations(), before);
}

TEST(Limits, PngTextChunksAreNotKept) {
  // 100 zTXt chunks of 1 MiB each (1 KB compressed): libpng would inflate and keep all of them.
  const std::vector<uint8_t> ztxt_body = [] {
    std::vector<uint8_t> b = {'k', 0, 0};   // keyword "k", compression method 0
    const std::vector<uint8_t> z = zlib_bytes(std::vector<uint8_t>(size_t(1) << 20, 'a'));
    b.insert(b.end(), z.begin(), z.end());
    return b;
  }();
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  png_chunk(png, "IHDR", {0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0});   // 1 x 1, 8-bit gray
  for (int i = 0; i < 100; ++i) png_chunk(png, "zTXt", ztxt_body);
  png_chunk(png, "IDAT", zlib_bytes({0, 77}));   // filter byte, one pixel
  png_chunk(png, "IEND", {});
  const int64_t peak = peak_rss_mb();
  const Tensor img = data::decode_image(png.data(), png.size());
  EXPECT_EQ(img.to_vector<uint8_t>(), std::vector<uint8_t>{77});
  EXPECT_LT(peak_rss_mb() - peak, 50) << "the text chunks were inflated and kept";
}

TEST(Limits, TruncatedJpegCostsOnlyTheRowsItHolds) {
  // A 16 x 16 file claiming 8192 x 8192 (within the ceiling), decoded to gray: the RGB scratch buffer
  // (201 MB) must not be zero-filled before the data runs out after the first rows.
  const std::vector<uint8_t> jpg = jpeg_claiming(8192, 8192);
  const int64_t peak = peak_rss_mb();
  const std::string msg = error_of([&] { data::decode_image(jpg.data(), jpg.size(), 1, "t.jpg"); });
  EXPECT_EQ(msg.rfind("image: cannot decode 't.jpg': JPEG: ", 0), 0u) << msg;
  EXPECT_LT(peak_rss_mb() - peak, 100);
}

TEST(Limits, JpegComponentsAreCheckedBeforeDecoding) {
  // A gray JPEG whose frame header lists a second component that no scan uses.
  std::vector<uint8_t> jpg = jpeg_claiming(16, 16, "L");
  size_t sof = 2;
  while (!(jpg[sof] == 0xFF && jpg[sof + 1] == 0xC0)) ++sof;
  ASSERT_EQ(jpg[sof + 9], 1) << "one component";
  jpg[sof + 3] = uint8_t(jpg[sof + 3] + 3);   // segment length
  jpg[sof + 9] = 2;
  const std::vector<uint8_t> second = {2, 0x11, 0};   // id 2, sampling 1x1, table 0
  jpg.insert(jpg.begin() + long(sof + 13), second.begin(), second.end());
  EXPECT_EQ(error_of([&] { data::decode_image(jpg.data(), jpg.size(), 0, "two.jpg"); }),
            "image: cannot decode 'two.jpg': JPEG: 2 components, expected 1 (gray), 3 (YCbCr or RGB) or 4 (CMYK or "
            "YCCK)");
}

TEST(Limits, GzipIdxClaimingMoreThanItCanInflateIsRefusedBeforeInflating) {
  // 2^40 bytes announced by a 35-byte file.
  const std::vector<uint8_t> tiny = gzip_bytes(as_bytes(idx_header(0x08, {1u << 20, 1u << 20})));
  EXPECT_EQ(error_of([&] { parse_idx_bytes(tiny); }),
            "IDX file x.gz: gzip corrupt: the header claims 1099511627776 bytes of data (sizes [1048576, 1048576] of "
            "1-byte elements), more than " + std::to_string(tiny.size()) +
            " compressed bytes can inflate to (deflate inflates at most 1032:1): truncated or not this file's header");
  // A bomb: 16 MiB of zeros behind the same header (16 KB compressed) is not inflated at all.
  std::vector<uint8_t> raw = as_bytes(idx_header(0x08, {1u << 20, 1u << 20}));
  raw.resize(raw.size() + (size_t(16) << 20));
  const std::vector<uint8_t> bomb = gzip_bytes(raw);
  const int64_t peak = peak_rss_mb();
  EXPECT_EQ(error_of([&] { parse_idx_bytes(bomb); }).substr(0, 70),
            "IDX file x.gz: gzip corrupt: the header claims 1099511627776 bytes of ");
  EXPECT_LT(peak_rss_mb() - peak, 8);
}

TEST(Limits, GzipIdxOverTheInflatedCeilingIsRefused) {
  ScopedLimits keep;
  std::vector<uint8_t> raw = as_bytes(idx_header(0x08, {2000}));
  raw.resize(raw.size() + 2000, 7);
  const std::vector<uint8_t> gz = gzip_bytes(raw);
  EXPECT_EQ(parse_idx_bytes(gz).numel(), 2000);
  data::set_max_inflated_bytes(1000);
  EXPECT_EQ(error_of([&] { parse_idx_bytes(gz); }),
            "IDX file x.gz: the header claims 2000 bytes of data (sizes [2000] of 1-byte elements), over the "
            "inflated-size limit of 1000 bytes (ATTN_MAX_INFLATED_BYTES); raise it with "
            "ATTN_MAX_INFLATED_BYTES=<bytes> or attn::data::set_max_inflated_bytes(<bytes>)");
  // An uncompressed file is already as large as its data: no ceiling applies.
  EXPECT_EQ(parse_idx_bytes(raw, "x.idx").numel(), 2000);
  // A stream longer than its header says stops one byte past it.
  data::set_max_inflated_bytes(int64_t(1) << 30);
  std::vector<uint8_t> longer = as_bytes(idx_header(0x08, {10}));
  longer.resize(longer.size() + 100);
  EXPECT_EQ(error_of([&] { parse_idx_bytes(gzip_bytes(longer)); }),
            "IDX file x.gz: trailing data: expected 10 bytes of data, found more (the gzip stream goes on past them)");
}

TEST(Limits, SwordBlocksAreBoundedBeforeInflating) {
  ScopedLimits keep;
  auto put32 = [](std::string& s, uint32_t v) {
    for (int k = 0; k < 4; ++k) s += char((v >> (8 * k)) & 0xFF);
  };
  // One block of 10 compressed bytes that claims `claimed` bytes; no entries.
  auto module_claiming = [&](uint32_t claimed) {
    data::ZTextTestament t;
    t.bzz = std::string(10, 'z');
    put32(t.bzs, 0);
    put32(t.bzs, 10);
    put32(t.bzs, claimed);
    return error_of([&] { data::SwordModule::from_bytes(t, {}, "m"); });
  };
  EXPECT_EQ(module_claiming(10320), test::kNoError);
  EXPECT_EQ(module_claiming(10321), "m ot.bzs: block 0 claims 10321 bytes uncompressed from 10 compressed bytes, more "
                                    "than zlib can produce (deflate inflates at most 1032:1)");
  data::set_max_inflated_bytes(5000);
  EXPECT_EQ(module_claiming(5000), test::kNoError);
  EXPECT_EQ(module_claiming(5001), "m ot.bzs: block 0 claims 5001 bytes uncompressed, over the inflated-size limit of "
                                   "5000 bytes (ATTN_MAX_INFLATED_BYTES); raise it with "
                                   "ATTN_MAX_INFLATED_BYTES=<bytes> or attn::data::set_max_inflated_bytes(<bytes>)");
}

// PNG/JPEG decoding (libpng, libjpeg-turbo), PIL conversions, PNG encoding and PIL resampling;
// see attn/data/image.h.
//
// libpng and libjpeg report errors by longjmp. Each library call sequence runs in a small
// "phase" function whose first statement is the setjmp and which holds only trivially
// destructible locals, so a longjmp never skips a C++ destructor; the callers own every buffer
// and the library state, and turn a failed phase into attn::Error.
#include "attn/data/image.h"

#include <png.h>
#include <cstdio>   // jpeglib.h needs FILE
#include <jpeglib.h>
#include <jerror.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>

#include "attn/data/limits.h"

namespace attn::data {
namespace {

// ---- channel conversion (PIL's Convert.c) ----

inline uint8_t l24(uint8_t r, uint8_t g, uint8_t b) {
  return uint8_t((uint32_t(r) * 19595u + uint32_t(g) * 38470u + uint32_t(b) * 7471u + 0x8000u) >> 16);
}

// src: n pixels of sc channels (1 L, 2 LA, 3 RGB, 4 RGBA) -> dst of dc channels.
void convert_pixels(const uint8_t* src, int sc, uint8_t* dst, int dc, int64_t n) {
  if (sc == dc) {
    std::memcpy(dst, src, size_t(n) * size_t(sc));
    return;
  }
  for (int64_t i = 0; i < n; ++i, src += sc, dst += dc) {
    uint8_t r, g, b, a = 255, l;
    if (sc <= 2) {
      r = g = b = l = src[0];
      if (sc == 2) a = src[1];
    } else {
      r = src[0], g = src[1], b = src[2];
      if (sc == 4) a = src[3];
      l = l24(r, g, b);
    }
    switch (dc) {
      case 1: dst[0] = l; break;
      case 2: dst[0] = l; dst[1] = a; break;
      case 3: dst[0] = r; dst[1] = g; dst[2] = b; break;
      default: dst[0] = r; dst[1] = g; dst[2] = b; dst[3] = a; break;
    }
  }
}

void check_channels(int64_t channels, const char* op, bool allow_zero) {
  ATTN_CHECK((allow_zero && channels == 0) || (channels >= 1 && channels <= 4), op, ": expected channels ",
             allow_zero ? "0 (as stored), " : "", "1, 2, 3 or 4, got ", channels);
}

// The pixel ceiling of one decode: the max_pixels argument, or the process-wide limit.
struct PixelLimit {
  int64_t pixels;
  bool from_argument;
};

PixelLimit pixel_limit(int64_t max_pixels) {
  ATTN_CHECK(max_pixels >= 0, "image: expected max_pixels >= 0 (0: data::max_image_pixels()), got ", max_pixels);
  return max_pixels > 0 ? PixelLimit{max_pixels, true} : PixelLimit{max_image_pixels(), false};
}

// Before any buffer is allocated: the header's size against the ceiling.
void check_pixels(int64_t w, int64_t h, const PixelLimit& limit, const std::string& name) {
  ATTN_CHECK(w > 0 && h > 0, "image: cannot decode '", name, "': empty image of ", w, " x ", h, " pixels");
  if (w <= limit.pixels / h) return;
  const uint64_t claimed = uint64_t(w) * uint64_t(h);   // both < 2^32
  if (limit.from_argument)
    fail("image: '", name, "' is ", w, " x ", h, " = ", claimed, " pixels, over the limit of ", limit.pixels,
         " pixels that this call allows (its max_pixels argument)");
  fail("image: '", name, "' is ", w, " x ", h, " = ", claimed, " pixels, over the image pixel limit of ",
       limit.pixels, " (ATTN_MAX_IMAGE_PIXELS); raise it with ATTN_MAX_IMAGE_PIXELS=<pixels> or "
       "attn::data::set_max_image_pixels(<pixels>)");
}

// A scratch buffer that is not zero-filled: its pages cost memory only once rows are decoded into it.
std::unique_ptr<uint8_t[]> uninit_pixels(int64_t h, int64_t w, int64_t c) {
  return std::unique_ptr<uint8_t[]>(new uint8_t[size_t(h) * size_t(w) * size_t(c)]);
}

// ---- JPEG ----

struct JpegError {
  jpeg_error_mgr pub;
  jmp_buf jump;
  char msg[JMSG_LENGTH_MAX];
};

extern "C" void attn_jpeg_error_exit(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->msg);
  std::longjmp(e->jump, 1);
}

// Warnings about damaged data are errors here (PIL refuses truncated files too); harmless ones
// (extra bytes between markers, odd JFIF versions) are ignored.
extern "C" void attn_jpeg_emit_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return;   // trace messages
  const int code = cinfo->err->msg_code;
  if (code == JWRN_EXTRANEOUS_DATA || code == JWRN_JFIF_MAJOR || code == JWRN_ADOBE_XFORM ||
      code == JWRN_BOGUS_PROGRESSION || code == JWRN_BOGUS_ICC)
    return;
  attn_jpeg_error_exit(cinfo);
}

// Bounds the work a crafted progressive file can cause (libjpeg-turbo's own fuzzers do the same).
struct JpegProgress {
  jpeg_progress_mgr pub;
  int max_scans;
};
extern "C" void attn_jpeg_progress(j_common_ptr cinfo) {
  auto* p = reinterpret_cast<JpegProgress*>(cinfo->progress);
  if (cinfo->is_decompressor) {
    auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
    if (d->input_scan_number > p->max_scans) {
      std::snprintf(reinterpret_cast<JpegError*>(cinfo->err)->msg, JMSG_LENGTH_MAX,
                    "more than %d progressive scans", p->max_scans);
      std::longjmp(reinterpret_cast<JpegError*>(cinfo->err)->jump, 1);
    }
  }
}

struct JpegState {
  jpeg_decompress_struct cinfo;
  JpegError err;
  JpegProgress progress;
  long max_memory = 0;   // libjpeg's own buffers (its whole-image coefficient arrays above all)
  bool created = false;
};

// Phase 1: create, read the header, choose the output colour space, start decompressing.
bool jpeg_phase_header(JpegState* st, const uint8_t* data, size_t size) {
  if (setjmp(st->err.jump)) return false;
  jpeg_create_decompress(&st->cinfo);
  st->created = true;
  st->cinfo.mem->max_memory_to_use = st->max_memory;
  st->progress.pub.progress_monitor = attn_jpeg_progress;
  st->progress.max_scans = 500;
  st->cinfo.progress = &st->progress.pub;
  jpeg_mem_src(&st->cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&st->cinfo, TRUE);
  switch (st->cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE: st->cinfo.out_color_space = JCS_GRAYSCALE; break;
    case JCS_CMYK:
    case JCS_YCCK: st->cinfo.out_color_space = JCS_CMYK; break;
    default: st->cinfo.out_color_space = JCS_RGB; break;
  }
  return true;
}

bool jpeg_phase_start(JpegState* st) {
  if (setjmp(st->err.jump)) return false;
  jpeg_start_decompress(&st->cinfo);
  return true;
}

// Phase 2: decode every scanline into rows[0..height).
bool jpeg_phase_body(JpegState* st, uint8_t* out, size_t row_bytes) {
  if (setjmp(st->err.jump)) return false;
  while (st->cinfo.output_scanline < st->cinfo.output_height) {
    JSAMPROW row = out + size_t(st->cinfo.output_scanline) * row_bytes;
    if (jpeg_read_scanlines(&st->cinfo, &row, 1) != 1) {
      std::snprintf(st->err.msg, JMSG_LENGTH_MAX, "no scanline returned");
      return false;
    }
  }
  jpeg_finish_decompress(&st->cinfo);
  return true;
}

void jpeg_destroy(JpegState* st) {
  if (!st->created) return;
  if (setjmp(st->err.jump)) return;   // destroy does not fail, but stay safe
  jpeg_destroy_decompress(&st->cinfo);
  st->created = false;
}

// PIL's CMYK -> RGB on Adobe-inverted samples (PIL reads 4-channel JPEGs as "CMYK;I").
inline uint8_t muldiv255(int a, int b) {
  const int t = a * b + 128;
  return uint8_t(((t >> 8) + t) >> 8);
}

Tensor decode_jpeg(const uint8_t* data, size_t size, int64_t channels, const std::string& name,
                   const PixelLimit& limit) {
  JpegState st{};
  // A progressive (or multi-scan) file keeps every DCT coefficient: 2 bytes per sample, 4 samples
  // per pixel at most; libjpeg-turbo's allocator refuses to go past this (no backing store).
  constexpr int64_t kSlack = int64_t(64) << 20;
  const int64_t per_pixel = std::min<int64_t>(limit.pixels, (std::numeric_limits<long>::max() - kSlack) / 8);
  st.max_memory = long(per_pixel * 8 + kSlack);
  st.cinfo.err = jpeg_std_error(&st.err.pub);
  st.err.pub.error_exit = attn_jpeg_error_exit;
  st.err.pub.emit_message = attn_jpeg_emit_message;
  st.err.msg[0] = 0;
  struct Guard {
    JpegState* s;
    ~Guard() { jpeg_destroy(s); }
  } guard{&st};
  auto failed = [&]() -> Error {
    return Error(detail::cat("image: cannot decode '", name, "': JPEG: ", st.err.msg));
  };
  if (!jpeg_phase_header(&st, data, size)) throw failed();
  check_pixels(st.cinfo.image_width, st.cinfo.image_height, limit, name);
  const int components = st.cinfo.num_components;
  ATTN_CHECK(components == 1 || components == 3 || components == 4, "image: cannot decode '", name, "': JPEG: ",
             components, " components, expected 1 (gray), 3 (YCbCr or RGB) or 4 (CMYK or YCCK)");
  if (!jpeg_phase_start(&st)) throw failed();
  const int64_t w = st.cinfo.output_width, h = st.cinfo.output_height;
  const int nc = st.cinfo.output_components;
  ATTN_CHECK(nc == 1 || nc == 3 || nc == 4, "image: cannot decode '", name, "': JPEG: unsupported ", nc,
             " output components");
  // Natural channels: gray 1, colour 3 (CMYK is converted to RGB as PIL's convert("RGB")).
  const int natural = nc == 1 ? 1 : 3;
  const int want = channels == 0 ? natural : int(channels);
  std::unique_ptr<uint8_t[]> raw;
  uint8_t* dst = nullptr;
  Tensor out = Tensor::empty({h, w, want}, DType::u8);
  const bool direct = nc == want && nc != 4;   // CMYK always goes through the RGB conversion
  if (direct) {
    dst = out.data<uint8_t>();
  } else {
    raw = uninit_pixels(h, w, nc);
    dst = raw.get();
  }
  if (!jpeg_phase_body(&st, dst, size_t(w) * size_t(nc))) throw failed();
  if (direct) return out;
  const int64_t n = h * w;
  if (nc == 4) {
    // Adobe-inverted CMYK -> RGB (PIL: "CMYK;I" then cmyk2rgb), in place (pixel i's RGB lands at or
    // before its CMYK), then to the channels asked for.
    uint8_t* px = raw.get();
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* p = px + size_t(i) * 4;
      const int c = 255 - p[0], m = 255 - p[1], y = 255 - p[2], k = 255 - p[3];
      const int nk = 255 - k;
      uint8_t* q = px + size_t(i) * 3;
      q[0] = uint8_t(std::clamp(nk - int(muldiv255(c, nk)), 0, 255));
      q[1] = uint8_t(std::clamp(nk - int(muldiv255(m, nk)), 0, 255));
      q[2] = uint8_t(std::clamp(nk - int(muldiv255(y, nk)), 0, 255));
    }
    convert_pixels(px, 3, out.data<uint8_t>(), want, n);
  } else {
    convert_pixels(raw.get(), nc, out.data<uint8_t>(), want, n);
  }
  return out;
}

// ---- PNG ----

struct PngState {
  png_structp png = nullptr;
  png_infop info = nullptr;
  const uint8_t* data = nullptr;
  size_t size = 0, pos = 0;
  char msg[256];
};

extern "C" void attn_png_error(png_structp png, png_const_charp msg) {
  auto* st = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(st->msg, sizeof st->msg, "%s", msg ? msg : "unknown error");
  png_longjmp(png, 1);
}
extern "C" void attn_png_warning(png_structp, png_const_charp) {}

extern "C" void attn_png_read(png_structp png, png_bytep out, png_size_t n) {
  auto* st = static_cast<PngState*>(png_get_io_ptr(png));
  if (n > st->size - st->pos) png_error(png, "file is truncated");
  std::memcpy(out, st->data + st->pos, n);
  st->pos += n;
}

// The largest chunk libpng may allocate (libpng's default): the kept chunks are IHDR, PLTE, tRNS
// (all small) and IDAT, which it streams.
constexpr png_alloc_size_t kPngChunkMallocMax = 8000000;

// Phase 1: signature, header chunks. Only the chunks decoding needs are kept (IHDR, PLTE, tRNS,
// IDAT, IEND); text, ICC profiles and the rest are skipped unread: a file of many small zTXt chunks
// would otherwise inflate each to up to kPngChunkMallocMax.
bool png_phase_header(PngState* st, png_uint_32* w, png_uint_32* h, int* color, int* depth) {
  if (setjmp(png_jmpbuf(st->png))) return false;
  png_set_read_fn(st->png, st, attn_png_read);
  png_set_user_limits(st->png, 0x7fffffffu, 0x7fffffffu);   // check_pixels names the limit instead
  png_set_chunk_malloc_max(st->png, kPngChunkMallocMax);
  png_set_keep_unknown_chunks(st->png, PNG_HANDLE_CHUNK_NEVER, nullptr, -1);
  png_read_info(st->png, st->info);
  *w = png_get_image_width(st->png, st->info);
  *h = png_get_image_height(st->png, st->info);
  *color = png_get_color_type(st->png, st->info);
  *depth = png_get_bit_depth(st->png, st->info);
  return true;
}

// The pixel data is one zlib stream, and deflate inflates at most 1032:1: a file must be large enough
// for the rows its header claims (each row its filter byte and its packed samples; an interlaced
// image needs more). Checked before anything is allocated.
void check_png_holds(int64_t w, int64_t h, int color, int depth, size_t size, const std::string& name) {
  const int samples = color == PNG_COLOR_TYPE_GRAY_ALPHA ? 2
                      : color == PNG_COLOR_TYPE_RGB      ? 3
                      : color == PNG_COLOR_TYPE_RGB_ALPHA ? 4
                                                          : 1;   // gray, palette
  using u128 = unsigned __int128;
  const u128 row = (u128(w) * u128(samples) * u128(depth) + 7) / 8 + 1;
  const u128 need = row * u128(h), can = u128(size) * 1032u;
  if (need <= can) return;
  const uint64_t claimed = need > u128(UINT64_MAX) ? UINT64_MAX : uint64_t(need);
  fail("image: cannot decode '", name, "': PNG: its header claims ", w, " x ", h, " pixels, whose data (", claimed,
       " bytes inflated) cannot come from a file of ", size,
       " bytes (zlib inflates at most 1032:1): the file is truncated or corrupt");
}

bool png_phase_transforms(PngState* st, int* channels, int* passes) {
  if (setjmp(png_jmpbuf(st->png))) return false;
  const int color = png_get_color_type(st->png, st->info);
  const int depth = png_get_bit_depth(st->png, st->info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(st->png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(st->png);
  if (png_get_valid(st->png, st->info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(st->png);
  if (depth == 16) png_set_strip_16(st->png);
  *passes = png_set_interlace_handling(st->png);   // 7 for Adam7, else 1
  png_read_update_info(st->png, st->info);
  *channels = png_get_channels(st->png, st->info);
  if (png_get_bit_depth(st->png, st->info) != 8) png_error(st->png, "unsupported bit depth after expansion");
  return true;
}

// Every row of every pass into `dst` (what png_read_image does, without its array of row pointers:
// 8 bytes a row, more than a 1-pixel-wide image's pixels).
bool png_phase_body(PngState* st, uint8_t* dst, size_t row_bytes, png_uint_32 h, int passes) {
  if (setjmp(png_jmpbuf(st->png))) return false;
  for (int pass = 0; pass < passes; ++pass)
    for (png_uint_32 y = 0; y < h; ++y) png_read_row(st->png, dst + size_t(y) * row_bytes, nullptr);
  return true;
}

Tensor decode_png(const uint8_t* data, size_t size, int64_t channels, const std::string& name,
                  const PixelLimit& limit) {
  PngState st;
  st.data = data;
  st.size = size;
  st.msg[0] = 0;
  st.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &st, attn_png_error, attn_png_warning);
  ATTN_CHECK(st.png, "image: cannot decode '", name, "': PNG: out of memory");
  st.info = png_create_info_struct(st.png);
  struct Guard {
    PngState* s;
    ~Guard() { png_destroy_read_struct(&s->png, s->info ? &s->info : nullptr, nullptr); }
  } guard{&st};
  ATTN_CHECK(st.info, "image: cannot decode '", name, "': PNG: out of memory");
  auto failed = [&]() -> Error { return Error(detail::cat("image: cannot decode '", name, "': PNG: ", st.msg)); };
  png_uint_32 w = 0, h = 0;
  int color = 0, depth = 0;
  if (!png_phase_header(&st, &w, &h, &color, &depth)) throw failed();
  check_pixels(int64_t(w), int64_t(h), limit, name);
  check_png_holds(int64_t(w), int64_t(h), color, depth, size, name);
  int nc = 0, passes = 1;
  if (!png_phase_transforms(&st, &nc, &passes)) throw failed();
  ATTN_CHECK(nc >= 1 && nc <= 4, "image: cannot decode '", name, "': PNG: unsupported ", nc, " channels");
  const int want = channels == 0 ? nc : int(channels);
  Tensor out = Tensor::empty({int64_t(h), int64_t(w), want}, DType::u8);
  std::unique_ptr<uint8_t[]> raw;
  uint8_t* dst = out.data<uint8_t>();
  if (nc != want) {
    raw = uninit_pixels(h, w, nc);
    dst = raw.get();
  }
  if (!png_phase_body(&st, dst, size_t(w) * size_t(nc), h, passes)) throw failed();
  if (nc != want) convert_pixels(raw.get(), nc, out.data<uint8_t>(), want, int64_t(w) * int64_t(h));
  return out;
}

struct PngWriteState {
  std::vector<uint8_t>* out = nullptr;
  char msg[256];
};

extern "C" void attn_png_write_error(png_structp png, png_const_charp msg) {
  auto* st = static_cast<PngWriteState*>(png_get_error_ptr(png));
  std::snprintf(st->msg, sizeof st->msg, "%s", msg ? msg : "unknown error");
  png_longjmp(png, 1);
}
extern "C" void attn_png_write(png_structp png, png_bytep data, png_size_t n) {
  auto* st = static_cast<PngWriteState*>(png_get_io_ptr(png));
  try {
    st->out->insert(st->out->end(), data, data + n);
  } catch (...) {
    png_error(png, "out of memory");
  }
}
extern "C" void attn_png_flush(png_structp) {}

bool png_phase_write(png_structp png, png_infop info, PngWriteState* st, png_uint_32 w, png_uint_32 h, int color,
                     png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_write_fn(png, st, attn_png_write, attn_png_flush);
  png_set_IHDR(png, info, w, h, 8, color, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  png_write_image(png, rows);
  png_write_end(png, nullptr);
  return true;
}

Tensor check_hwc_u8(const Tensor& img, const char* op) {
  ATTN_CHECK(img.defined() && img.dim() == 3 && img.dtype() == DType::u8 && img.size(2) >= 1 && img.size(2) <= 4,
             op, ": expected a u8 (H, W, C) image with C in 1..4, got ",
             img.defined() ? dtype_name(img.dtype()) : "undefined", " of shape ",
             img.defined() ? img.shape() : Shape{});
  return img.contiguous();
}

// ---- resampling (PIL's Resample.c) ----

constexpr int kPrecisionBits = 32 - 8 - 2;

double filter_support(Resample f) { return f == Resample::bicubic ? 2.0 : 1.0; }
double filter_eval(Resample f, double x) {
  if (x < 0.0) x = -x;
  if (f == Resample::bilinear) return x < 1.0 ? 1.0 - x : 0.0;
  constexpr double a = -0.5;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

struct Coeffs {
  int ksize = 0;
  std::vector<int> bounds;     // (xmin, count) per output position
  std::vector<double> k;       // ksize per output position, normalised to sum 1
};

Coeffs precompute_coeffs(int64_t in_size, int64_t out_size, Resample f) {
  Coeffs c;
  const double scale = double(float(in_size)) / double(out_size);   // PIL: (double)(in1 - in0) / outSize
  double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = filter_support(f) * filterscale;
  c.ksize = int(std::ceil(support)) * 2 + 1;
  c.bounds.resize(size_t(out_size) * 2);
  c.k.assign(size_t(out_size) * size_t(c.ksize), 0.0);
  for (int64_t xx = 0; xx < out_size; ++xx) {
    const double center = (double(xx) + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = int(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = int(center + support + 0.5);
    if (xmax > in_size) xmax = int(in_size);
    xmax -= xmin;
    double* k = &c.k[size_t(xx) * size_t(c.ksize)];
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      const double w = filter_eval(f, (double(x + xmin) - center + 0.5) * ss);
      k[x] = w;
      ww += w;
    }
    for (int x = 0; x < xmax; ++x)
      if (ww != 0.0) k[x] /= ww;
    c.bounds[size_t(xx) * 2] = xmin;
    c.bounds[size_t(xx) * 2 + 1] = xmax;
  }
  return c;
}

std::vector<int32_t> fixed_point(const Coeffs& c) {
  std::vector<int32_t> kk(c.k.size());
  for (size_t i = 0; i < c.k.size(); ++i) {
    const double v = c.k[i] * double(1 << kPrecisionBits);
    kk[i] = c.k[i] < 0 ? int32_t(-0.5 + v) : int32_t(0.5 + v);
  }
  return kk;
}

inline uint8_t clip8(int32_t v) {
  if (v >= (1 << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return uint8_t(v >> kPrecisionBits);
}

// u8 (H, W, C) as PIL's 8-bit two-pass resampling.
Tensor resize_u8(const Tensor& img, int64_t oh, int64_t ow, Resample f) {
  const int64_t h = img.size(0), w = img.size(1), c = img.size(2);
  const uint8_t* src = img.data<uint8_t>();
  const bool need_h = ow != w, need_v = oh != h;
  Coeffs ch = precompute_coeffs(w, ow, f), cv = precompute_coeffs(h, oh, f);
  std::vector<int32_t> kh = fixed_point(ch), kv = fixed_point(cv);
  // The rows the vertical pass reads.
  const int64_t y_first = cv.bounds[0];
  const int64_t y_last = cv.bounds[size_t(oh - 1) * 2] + cv.bounds[size_t(oh - 1) * 2 + 1];
  std::vector<uint8_t> tmp;
  const uint8_t* vin = src;    // input of the vertical pass, row 0 = source row `voff`
  int64_t vw = w, voff = 0;
  if (need_h) {
    const int64_t rows = y_last - y_first;
    tmp.resize(size_t(rows) * size_t(ow) * size_t(c));
    for (int64_t y = 0; y < rows; ++y) {
      const uint8_t* in_row = src + size_t(y + y_first) * size_t(w) * size_t(c);
      uint8_t* out_row = tmp.data() + size_t(y) * size_t(ow) * size_t(c);
      for (int64_t xx = 0; xx < ow; ++xx) {
        const int xmin = ch.bounds[size_t(xx) * 2], xcount = ch.bounds[size_t(xx) * 2 + 1];
        const int32_t* k = &kh[size_t(xx) * size_t(ch.ksize)];
        for (int64_t ci = 0; ci < c; ++ci) {
          int32_t ss = 1 << (kPrecisionBits - 1);
          for (int x = 0; x < xcount; ++x) ss += int32_t(in_row[size_t(x + xmin) * size_t(c) + size_t(ci)]) * k[x];
          out_row[size_t(xx) * size_t(c) + size_t(ci)] = clip8(ss);
        }
      }
    }
    vin = tmp.data();
    vw = ow;
    voff = y_first;
  }
  Tensor out = Tensor::empty({oh, ow, c}, DType::u8);
  uint8_t* dst = out.data<uint8_t>();
  if (!need_v) {
    // Rows [0, h) of the horizontal result (y_first = 0 and y_last = h when heights agree).
    std::memcpy(dst, vin, size_t(oh) * size_t(ow) * size_t(c));
    return out;
  }
  for (int64_t yy = 0; yy < oh; ++yy) {
    const int ymin = cv.bounds[size_t(yy) * 2] - int(voff), ycount = cv.bounds[size_t(yy) * 2 + 1];
    const int32_t* k = &kv[size_t(yy) * size_t(cv.ksize)];
    for (int64_t xx = 0; xx < ow * c; ++xx) {
      int32_t ss = 1 << (kPrecisionBits - 1);
      for (int y = 0; y < ycount; ++y) ss += int32_t(vin[size_t(y + ymin) * size_t(vw) * size_t(c) + size_t(xx)]) * k[y];
      dst[size_t(yy) * size_t(ow) * size_t(c) + size_t(xx)] = clip8(ss);
    }
  }
  return out;
}

// f32 (C, H, W) as PIL's mode "F" resampling (double sums, stored as float after each pass).
Tensor resize_f32(const Tensor& img, int64_t oh, int64_t ow, Resample f) {
  const int64_t c = img.size(0), h = img.size(1), w = img.size(2);
  const float* src = img.data<float>();
  const bool need_h = ow != w, need_v = oh != h;
  Coeffs ch = precompute_coeffs(w, ow, f), cv = precompute_coeffs(h, oh, f);
  const int64_t y_first = cv.bounds[0];
  const int64_t y_last = cv.bounds[size_t(oh - 1) * 2] + cv.bounds[size_t(oh - 1) * 2 + 1];
  Tensor out = Tensor::empty({c, oh, ow}, DType::f32);
  float* dst = out.data<float>();
  std::vector<float> tmp;
  for (int64_t ci = 0; ci < c; ++ci) {
    const float* plane = src + size_t(ci) * size_t(h) * size_t(w);
    const float* vin = plane;
    int64_t vw = w, voff = 0;
    if (need_h) {
      const int64_t rows = y_last - y_first;
      tmp.assign(size_t(rows) * size_t(ow), 0.0f);
      for (int64_t y = 0; y < rows; ++y)
        for (int64_t xx = 0; xx < ow; ++xx) {
          const int xmin = ch.bounds[size_t(xx) * 2], xcount = ch.bounds[size_t(xx) * 2 + 1];
          const double* k = &ch.k[size_t(xx) * size_t(ch.ksize)];
          double ss = 0.0;
          for (int x = 0; x < xcount; ++x) ss += double(plane[size_t(y + y_first) * size_t(w) + size_t(x + xmin)]) * k[x];
          tmp[size_t(y) * size_t(ow) + size_t(xx)] = float(ss);
        }
      vin = tmp.data();
      vw = ow;
      voff = y_first;
    }
    float* dplane = dst + size_t(ci) * size_t(oh) * size_t(ow);
    if (!need_v) {
      std::memcpy(dplane, vin, size_t(oh) * size_t(ow) * sizeof(float));
      continue;
    }
    for (int64_t yy = 0; yy < oh; ++yy) {
      const int ymin = cv.bounds[size_t(yy) * 2] - int(voff), ycount = cv.bounds[size_t(yy) * 2 + 1];
      const double* k = &cv.k[size_t(yy) * size_t(cv.ksize)];
      for (int64_t xx = 0; xx < ow; ++xx) {
        double ss = 0.0;
        for (int y = 0; y < ycount; ++y) ss += double(vin[size_t(y + ymin) * size_t(vw) + size_t(xx)]) * k[y];
        dplane[size_t(yy) * size_t(ow) + size_t(xx)] = float(ss);
      }
    }
  }
  return out;
}

// PIL's ImagingScaleAffine: source index = int(a/2 + k a) accumulated, a = in / out.
std::vector<int64_t> nearest_index(int64_t in, int64_t out) {
  std::vector<int64_t> idx(static_cast<size_t>(out));
  const double a = double(in) / double(out);
  double xo = a * 0.5;
  for (int64_t x = 0; x < out; ++x) {
    idx[size_t(x)] = std::min<int64_t>(in - 1, int64_t(xo));
    xo += a;
  }
  return idx;
}

}  // namespace

ImageFormat sniff_image_format(const uint8_t* data, size_t size) {
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size >= 8 && std::memcmp(data, kPng, 8) == 0) return ImageFormat::png;
  if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return ImageFormat::jpeg;
  return ImageFormat::unknown;
}

Tensor decode_image(const uint8_t* data, size_t size, int64_t channels, const std::string& name, int64_t max_pixels) {
  check_channels(channels, "image", true);
  const PixelLimit limit = pixel_limit(max_pixels);
  ATTN_CHECK(size > 0, "image: cannot decode '", name, "': the file is empty");
  switch (sniff_image_format(data, size)) {
    case ImageFormat::png: return decode_png(data, size, channels, name, limit);
    case ImageFormat::jpeg: return decode_jpeg(data, size, channels, name, limit);
    default: fail("image: cannot decode '", name, "': not a PNG or JPEG file");
  }
}

Tensor read_image(const std::string& path, int64_t channels, int64_t max_pixels) {
  std::ifstream f(path, std::ios::binary);
  ATTN_CHECK(f.good(), "image: cannot open '", path, "'");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ATTN_CHECK(!f.bad(), "image: cannot read '", path, "'");
  return decode_image(bytes.data(), bytes.size(), channels, path, max_pixels);
}

Tensor convert_channels(const Tensor& img, int64_t channels) {
  check_channels(channels, "convert_channels", false);
  Tensor src = check_hwc_u8(img, "convert_channels");
  const int64_t h = src.size(0), w = src.size(1), c = src.size(2);
  Tensor out = Tensor::empty({h, w, channels}, DType::u8);
  convert_pixels(src.data<uint8_t>(), int(c), out.data<uint8_t>(), int(channels), h * w);
  return out;
}

Tensor to_chw_f32(const Tensor& img) {
  ATTN_CHECK(img.defined() && img.dim() == 3 && img.dtype() == DType::u8,
             "to_chw_f32: expected a u8 (H, W, C) image, got ", img.defined() ? dtype_name(img.dtype()) : "undefined",
             " of shape ", img.defined() ? img.shape() : Shape{});
  Tensor src = img.contiguous();
  const int64_t h = src.size(0), w = src.size(1), c = src.size(2);
  Tensor out = Tensor::empty({c, h, w}, DType::f32);
  const uint8_t* s = src.data<uint8_t>();
  float* d = out.data<float>();
  for (int64_t ci = 0; ci < c; ++ci)
    for (int64_t i = 0; i < h * w; ++i) d[ci * h * w + i] = float(s[i * c + ci]) / 255.0f;
  return out;
}

Tensor to_hwc_u8(const Tensor& img) {
  ATTN_CHECK(img.defined() && img.dim() == 3 && img.dtype() == DType::f32,
             "to_hwc_u8: expected an f32 (C, H, W) image, got ", img.defined() ? dtype_name(img.dtype()) : "undefined",
             " of shape ", img.defined() ? img.shape() : Shape{});
  Tensor src = img.contiguous();
  const int64_t c = src.size(0), h = src.size(1), w = src.size(2);
  Tensor out = Tensor::empty({h, w, c}, DType::u8);
  const float* s = src.data<float>();
  uint8_t* d = out.data<uint8_t>();
  for (int64_t ci = 0; ci < c; ++ci)
    for (int64_t i = 0; i < h * w; ++i) {
      const float v = s[ci * h * w + i];
      d[i * c + ci] = std::isnan(v) ? 0 : uint8_t(std::lround(double(std::clamp(v, 0.0f, 1.0f)) * 255.0));
    }
  return out;
}

std::vector<uint8_t> encode_png(const Tensor& img) {
  Tensor src = check_hwc_u8(img, "encode_png");
  const int64_t h = src.size(0), w = src.size(1), c = src.size(2);
  ATTN_CHECK(h > 0 && w > 0 && h <= 0x7fffffff && w <= 0x7fffffff,
             "encode_png: expected a non-empty image of at most 2^31 - 1 rows and columns, got shape ", src.shape());
  static const int kColor[5] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                                PNG_COLOR_TYPE_RGB_ALPHA};
  std::vector<uint8_t> out;
  PngWriteState st;
  st.out = &out;
  st.msg[0] = 0;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &st, attn_png_write_error, attn_png_warning);
  ATTN_CHECK(png, "encode_png: out of memory");
  png_infop info = png_create_info_struct(png);
  struct Guard {
    png_structp* p;
    png_infop* i;
    ~Guard() { png_destroy_write_struct(p, *i ? i : nullptr); }
  } guard{&png, &info};
  ATTN_CHECK(info, "encode_png: out of memory");
  std::vector<png_bytep> rows(static_cast<size_t>(h));
  uint8_t* base = src.data<uint8_t>();
  for (int64_t y = 0; y < h; ++y) rows[size_t(y)] = base + size_t(y) * size_t(w) * size_t(c);
  if (!png_phase_write(png, info, &st, png_uint_32(w), png_uint_32(h), kColor[c], rows.data()))
    fail("encode_png: libpng: ", st.msg);
  return out;
}

void write_png(const std::string& path, const Tensor& img) {
  std::vector<uint8_t> bytes = encode_png(img);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    ATTN_CHECK(f.good(), "write_png: cannot open '", tmp, "' for writing");
    f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    f.flush();
    ATTN_CHECK(f.good(), "write_png: cannot write '", tmp, "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail("write_png: cannot rename '", tmp, "' to '", path, "'");
  }
}

Resample parse_resample(const std::string& name) {
  if (name == "nearest") return Resample::nearest;
  if (name == "bilinear") return Resample::bilinear;
  if (name == "bicubic") return Resample::bicubic;
  fail("resize: unknown filter '", name, "' (known: nearest, bilinear, bicubic)");
}

Tensor resize(const Tensor& img, int64_t height, int64_t width, Resample filter) {
  ATTN_CHECK(img.defined() && img.dim() == 3 && (img.dtype() == DType::u8 || img.dtype() == DType::f32),
             "resize: expected a u8 (H, W, C) or f32 (C, H, W) image, got ",
             img.defined() ? dtype_name(img.dtype()) : "undefined", " of shape ", img.defined() ? img.shape() : Shape{});
  ATTN_CHECK(height > 0 && width > 0, "resize: expected a positive output size, got ", Shape{height, width});
  const bool u8 = img.dtype() == DType::u8;
  Tensor src = img.contiguous();
  const int64_t h = u8 ? src.size(0) : src.size(1), w = u8 ? src.size(1) : src.size(2);
  ATTN_CHECK(h > 0 && w > 0, "resize: expected a non-empty image, got shape ", src.shape());
  if (h == height && w == width) return src.clone();
  if (filter == Resample::nearest) {
    const std::vector<int64_t> yi = nearest_index(h, height), xi = nearest_index(w, width);
    if (u8) {
      const int64_t c = src.size(2);
      Tensor out = Tensor::empty({height, width, c}, DType::u8);
      const uint8_t* s = src.data<uint8_t>();
      uint8_t* d = out.data<uint8_t>();
      for (int64_t y = 0; y < height; ++y)
        for (int64_t x = 0; x < width; ++x)
          std::memcpy(d + (y * width + x) * c, s + (yi[size_t(y)] * w + xi[size_t(x)]) * c, size_t(c));
      return out;
    }
    const int64_t c = src.size(0);
    Tensor out = Tensor::empty({c, height, width}, DType::f32);
    const float* s = src.data<float>();
    float* d = out.data<float>();
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t y = 0; y < height; ++y)
        for (int64_t x = 0; x < width; ++x)
          d[(ci * height + y) * width + x] = s[(ci * h + yi[size_t(y)]) * w + xi[size_t(x)]];
    return out;
  }
  return u8 ? resize_u8(src, height, width, filter) : resize_f32(src, height, width, filter);
}

}  // namespace attn::data

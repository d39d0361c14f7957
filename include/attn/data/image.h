// Images in and out: PNG (libpng) and JPEG (libjpeg-turbo) decoding with PIL's conversions, PNG
// writing, and PIL's antialiased resampling (as torchvision's Resize on PIL images).
//
//   Tensor img = attn::data::read_image("cat.jpg", 3);          // u8 (H, W, 3), as
//                                                                // PIL.Image.open(...).convert("RGB")
//   Tensor x = attn::data::to_chw_f32(img);                      // f32 (3, H, W) in [0, 1] (ToTensor)
//   Tensor small = attn::data::resize(img, 28, 28);              // PIL bilinear, antialiased
//   attn::data::write_png("out.png", small);                     // u8 (H, W, C), C in 1..4
//
// Channels (PIL modes): 1 = L, 2 = LA, 3 = RGB, 4 = RGBA; 0 = as stored (gray -> 1, gray+alpha -> 2,
// RGB -> 3, RGBA or palette with transparency -> 4, CMYK JPEG -> 3). Conversions are PIL's
// Image.convert: RGB -> L is (19595 R + 38470 G + 7471 B + 0x8000) >> 16, alpha is dropped (not
// composited), L -> RGB replicates, added alpha is 255. Palettes expand to RGB first (as PIL's P -> L).
//
// Decoding matches PIL bit for bit on 8-bit files: JPEG with libjpeg's defaults (ISLOW DCT, fancy
// upsampling, the same libjpeg-turbo PIL links), CMYK JPEGs as Adobe-inverted CMYK -> RGB as PIL's
// cmyk2rgb; PNG sub-8-bit gray scaled to 0..255, palette/tRNS expanded, no gamma applied.
// Differences from PIL: 16-bit PNGs keep the high byte of each sample (PIL does that for RGB but
// clips 16-bit gray to 255), and RGBA is resampled per channel (PIL premultiplies alpha).
//
// Errors: a missing, empty, truncated or corrupt file, or one that is neither PNG nor JPEG, throws
// attn::Error naming the file and libpng's / libjpeg's reason, e.g.
//   "image: cannot decode 'x.jpg': JPEG: Premature end of JPEG file". Never aborts.
//
// Hostile files (docs/design.md, "Input files"): an image whose header claims more pixels (width x
// height) than max_pixels is refused before any buffer is allocated, e.g.
//   "image: 'x.png' is 60000 x 60000 = 3600000000 pixels, over the image pixel limit of 67108864
//    (ATTN_MAX_IMAGE_PIXELS); raise it with ATTN_MAX_IMAGE_PIXELS=<pixels> or
//    attn::data::set_max_image_pixels(<pixels>)".
// max_pixels 0 (the default) means data::max_image_pixels() (attn/data/limits.h: 2^26, 8192 x 8192,
// unless raised). A PNG must also be able to hold its pixels: its pixel data is one zlib stream,
// which inflates at most 1032:1, so a header that needs more than 1032 x the file's size is refused
// as corrupt. Libpng keeps only the chunks decoding needs (IHDR, PLTE, tRNS, IDAT, IEND: text,
// ICC and other ancillary chunks are skipped unread, and no chunk over 8 MB is allocated); JPEGs
// must have 1, 3 or 4 components and libjpeg's buffers are capped (attn/data/limits.h). Scratch
// buffers are not zero-filled, so a truncated file costs memory only for the rows that decoded.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attn/core/tensor.h"

namespace attn::data {

enum class ImageFormat { unknown, png, jpeg };
// From the first bytes (PNG signature / JPEG SOI marker).
ImageFormat sniff_image_format(const uint8_t* data, size_t size);

// Decodes a PNG or JPEG file to u8 (H, W, C); channels as above (0, 1, 2, 3 or 4). max_pixels: the
// most pixels accepted for this call, 0 for data::max_image_pixels().
Tensor read_image(const std::string& path, int64_t channels = 0, int64_t max_pixels = 0);
// The same from memory; `name` is what error messages call the data.
Tensor decode_image(const uint8_t* data, size_t size, int64_t channels = 0, const std::string& name = "<memory>",
                    int64_t max_pixels = 0);

// PIL's Image.convert between L (1), LA (2), RGB (3) and RGBA (4) on u8 (H, W, C) images.
Tensor convert_channels(const Tensor& img, int64_t channels);

// u8 (H, W, C) -> f32 (C, H, W) in [0, 1] (x / 255, torchvision's ToTensor).
Tensor to_chw_f32(const Tensor& img);
// f32 (C, H, W) -> u8 (H, W, C): round(clamp(x, 0, 1) * 255); NaN -> 0.
Tensor to_hwc_u8(const Tensor& img);

// PNG encoding of a u8 (H, W, C) image, C in 1..4 (gray, gray+alpha, RGB, RGBA), 8-bit.
std::vector<uint8_t> encode_png(const Tensor& img);
// Writes encode_png(img) to `path` (atomically: a temporary file renamed over it).
void write_png(const std::string& path, const Tensor& img);

// ---- resampling (PIL's Image.resize, always antialiased when shrinking) ----
enum class Resample { nearest, bilinear, bicubic };
Resample parse_resample(const std::string& name);   // "nearest" | "bilinear" | "bicubic"
// u8 (H, W, C): PIL's 8-bit path (fixed-point coefficients, 22 fraction bits; the horizontal
// pass, rounded to u8, then the vertical pass) — equal to PIL's result.
// f32 (C, H, W): PIL's mode "F" path (double accumulation), per channel; for heat maps.
// nearest: PIL's affine nearest sampling (source index floor((x + 0.5) * in / out)).
Tensor resize(const Tensor& img, int64_t height, int64_t width, Resample filter = Resample::bilinear);

}  // namespace attn::data

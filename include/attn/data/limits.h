// Ceilings on what an input file can make attn allocate. Every reader of untrusted bytes checks
// the sizes a file claims against what the file can hold (a PNG's pixels against its compressed
// bytes, a gzip IDX file's data against deflate's ratio) and against these ceilings BEFORE it
// allocates or inflates anything; a file over a ceiling throws an attn::Error naming the limit,
// the size the file claims, the ceiling and how to raise it.
//
//   attn::data::set_max_image_pixels(int64_t(1) << 28);        // accept images up to 16384 x 16384
//   attn::data::set_max_inflated_bytes(int64_t(4) << 30);      // gzip IDX data up to 4 GiB
//   int64_t px = attn::data::max_image_pixels();                // what holds now
//
// The defaults come from the environment (ATTN_MAX_IMAGE_PIXELS, ATTN_MAX_INFLATED_BYTES; see
// docs/environment.md), read at the first use; a set_ call wins over them. Both are process-wide
// and may be changed at any time (atomics): a decode running meanwhile uses the value it read.
//
// What the ceilings bound (docs/design.md, "Input files"):
//   images: an image of P pixels costs at most ~4 P bytes of output plus, for a channel conversion,
//     ~4 P of scratch (untouched until pixels arrive), and for a progressive / multi-scan JPEG
//     libjpeg's coefficient buffers, capped at 8 bytes per pixel of the ceiling. With the default
//     2^26 pixels: ~0.25 GB of output per image, per decoder running at once (DataLoader workers).
//   compressed streams: a gzip IDX file's inflated data (plus the tensor it decodes to) and one
//     inflated SWORD block held at a time per module.
#pragma once
#include <cstdint>

namespace attn::data {

// 8192 x 8192 pixels: every photo and scan a vision model is trained on, with room to spare;
// PIL's decompression-bomb limit is 89.5 M pixels (it refuses twice that).
inline constexpr int64_t kDefaultMaxImagePixels = int64_t(1) << 26;
// 1 GiB: the largest IDX data in use (EMNIST ByClass training images, 547 MB) fits twice.
inline constexpr int64_t kDefaultMaxInflatedBytes = int64_t(1) << 30;

// The most pixels (width x height) an image may have (ATTN_MAX_IMAGE_PIXELS, else the default).
int64_t max_image_pixels();
void set_max_image_pixels(int64_t pixels);   // > 0
// The most bytes one compressed stream may inflate to (ATTN_MAX_INFLATED_BYTES, else the default).
int64_t max_inflated_bytes();
void set_max_inflated_bytes(int64_t bytes);  // > 0

}  // namespace attn::data

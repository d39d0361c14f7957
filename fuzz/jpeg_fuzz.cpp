// libFuzzer target for data::decode_image on JPEG input (libjpeg-turbo behind setjmp/longjmp error
// handling; damaged-data warnings are errors; at most 500 progressive scans), with the pixel
// ceiling users get (data::max_image_pixels(): 2^26 unless ATTN_MAX_IMAGE_PIXELS raises it).
//
//   scripts/fuzz.sh jpeg_fuzz            # or: build-fuzz/fuzz/jpeg_fuzz fuzz/corpus/jpeg_fuzz
//
// An attn::Error is the expected outcome for malformed input. Anything else is a finding: a
// sanitizer report, a crash, a leak, another exception, or a broken property:
//   * a decoded image is (H, W, C) u8 with C 1 or 3 and every byte readable;
//   * decoding the same bytes as L equals convert_channels(decoded as RGB, 1) (PIL's convert).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "attn/core/error.h"
#include "attn/data/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  attn::Tensor img;
  try {
    img = attn::data::decode_image(data, size, 0, "<fuzz>");
  } catch (const attn::Error&) {
    return 0;
  }
  if (img.dim() != 3 || !(img.size(2) == 1 || img.size(2) == 3 || img.size(2) == 2 || img.size(2) == 4)) __builtin_trap();
  const auto* p = static_cast<const uint8_t*>(img.raw_data());
  uint8_t acc = 0;
  for (int64_t i = 0; i < img.numel(); ++i) acc ^= p[i];
  volatile uint8_t sink = acc;
  (void)sink;
  attn::Tensor rgb = attn::data::decode_image(data, size, 3, "<fuzz>");
  attn::Tensor gray = attn::data::decode_image(data, size, 1, "<fuzz>");
  attn::Tensor want = attn::data::convert_channels(rgb, 1);
  if (gray.shape() != want.shape() || std::memcmp(gray.raw_data(), want.raw_data(), size_t(want.numel())) != 0)
    __builtin_trap();
  return 0;
}

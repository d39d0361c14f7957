// libFuzzer target for data::decode_image on PNG input (libpng behind setjmp/longjmp error handling),
// with the pixel ceiling users get (data::max_image_pixels(): 2^26 unless ATTN_MAX_IMAGE_PIXELS
// raises it; a PNG's rows must also fit 1032 x its size, so fuzzed files stay small).
//
//   scripts/fuzz.sh png_fuzz             # or: build-fuzz/fuzz/png_fuzz fuzz/corpus/png_fuzz
//
// An attn::Error is the expected outcome for malformed input. Anything else is a finding: a
// sanitizer report, a crash, a leak, another exception, or a broken property:
//   * a decoded image is (H, W, C) u8 with C in 1..4 and every byte readable;
//   * decoding the same bytes as RGB gives the same height and width, and equals
//     convert_channels(decoded, 3);
//   * encode_png(decoded) decodes back to exactly the decoded pixels.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "attn/core/error.h"
#include "attn/data/image.h"

namespace {

bool same(const attn::Tensor& a, const attn::Tensor& b) {
  if (a.shape() != b.shape()) return false;
  return std::memcmp(a.raw_data(), b.raw_data(), size_t(a.numel())) == 0;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Only the PNG path: inputs that are not PNG are still fed (they must fail cleanly).
  attn::Tensor img;
  try {
    img = attn::data::decode_image(data, size, 0, "<fuzz>");
  } catch (const attn::Error&) {
    return 0;
  }
  if (img.dim() != 3 || img.size(2) < 1 || img.size(2) > 4 || img.dtype() != attn::DType::u8) __builtin_trap();
  const auto* p = static_cast<const uint8_t*>(img.raw_data());
  uint8_t acc = 0;
  for (int64_t i = 0; i < img.numel(); ++i) acc ^= p[i];
  volatile uint8_t sink = acc;
  (void)sink;
  attn::Tensor rgb = attn::data::decode_image(data, size, 3, "<fuzz>");
  if (!same(rgb, attn::data::convert_channels(img, 3))) __builtin_trap();
  const std::vector<uint8_t> png = attn::data::encode_png(img);
  if (!same(attn::data::decode_image(png.data(), png.size(), 0, "<again>"), img)) __builtin_trap();
  return 0;
}

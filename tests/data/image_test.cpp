// PNG/JPEG decoding against PIL (files written by PIL in tests/golden/gen/images.py, decoded by both,
// compared pixel for pixel), PIL's conversions, PNG writing, resizing against torchvision's resize on
// PIL images, and the errors for missing, empty, truncated and corrupt files.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include "attn/attn.h"
#include "attn/data/image.h"
#include "errors.h"
#include "files.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using test::torch_ref;

namespace {

std::string temp_dir() { return test::scratch_dir("attn_image_test"); }

std::vector<uint8_t> bytes_of(const Tensor& t) { return t.to_vector<uint8_t>(); }

std::string write_file(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = temp_dir() + "/" + name;
  test::write_bytes(path, bytes);
  return path;
}

// Smooth-ish random pixels (JPEG-friendly) of shape (H, W, C).
Tensor pixels(int64_t h, int64_t w, int64_t c, Generator& g) {
  Tensor t = Tensor::empty({h, w, c}, DType::u8);
  uint8_t* p = t.data<uint8_t>();
  const double fx = 0.1 + g.uniform(), fy = 0.1 + g.uniform();
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t k = 0; k < c; ++k) {
        const double v = 127.5 + 100 * std::sin(fx * double(x) + double(k)) * std::cos(fy * double(y)) +
                         25 * (g.uniform() - 0.5);
        p[(y * w + x) * c + k] = uint8_t(std::clamp(v, 0.0, 255.0));
      }
  return t;
}

struct Case {
  std::string format, mode;
  nlohmann::json extra;
  int64_t channels;   // pixel channels handed to PIL
};

}  // namespace

TEST(Image, DecodesLikePil) {
  Generator g(5);
  const std::vector<Case> cases = {
      {"PNG", "L", {}, 1},
      {"PNG", "LA", {}, 2},
      {"PNG", "RGB", {}, 3},
      {"PNG", "RGBA", {}, 4},
      {"PNG", "1", {}, 1},
      {"PNG", "P", {{"colors", 16}}, 3},
      {"PNG", "P", {{"colors", 7}, {"transparency", 2}}, 3},
      {"PNG", "P", {{"colors", 4}, {"bits", 2}}, 3},
      {"JPEG", "L", {{"quality", 90}}, 1},
      {"JPEG", "RGB", {{"quality", 95}, {"subsampling", 0}}, 3},
      {"JPEG", "RGB", {{"quality", 85}, {"subsampling", 1}}, 3},
      {"JPEG", "RGB", {{"quality", 75}, {"subsampling", 2}}, 3},
      {"JPEG", "RGB", {{"quality", 80}, {"progressive", true}}, 3},
      {"JPEG", "CMYK", {{"quality", 90}}, 4},
  };
  // Sizes smaller than, equal to and not multiples of the 8x8 / 16x16 JPEG blocks.
  const std::vector<std::pair<int64_t, int64_t>> sizes = {{1, 1}, {7, 13}, {16, 16}, {31, 17}, {28, 28}};
  int compared = 0;
  for (const Case& cs : cases)
    for (auto [h, w] : sizes) {
      Tensor px = pixels(h, w, cs.channels, g);
      nlohmann::json args = cs.extra;
      args["format"] = cs.format;
      args["mode"] = cs.mode;
      auto ref = torch_ref("images.encode", {{"pixels", px}}, args);
      const std::vector<uint8_t> file = bytes_of(ref.at("bytes"));
      const std::string ctx = cs.format + " " + cs.mode + " " + args.dump() + " " + shape_str({h, w});
      for (auto [mode, c] : std::vector<std::pair<std::string, int64_t>>{{"L", 1}, {"LA", 2}, {"RGB", 3}, {"RGBA", 4}}) {
        if (!ref.count(mode)) continue;
        Tensor mine = data::decode_image(file.data(), file.size(), c, "x");
        EXPECT_TENSOR_NEAR(mine, ref.at(mode), 0.0, 0.0) << ctx << " as " << mode;
        ++compared;
      }
      // From a file, with the stored channels.
      const std::string path = write_file("case" + std::to_string(compared) + (cs.format == "PNG" ? ".png" : ".jpg"), file);
      Tensor natural = data::read_image(path);
      const int64_t want = cs.format == "JPEG" ? (cs.mode == "L" ? 1 : 3)
                           : cs.mode == "L" || cs.mode == "1" ? 1
                           : cs.mode == "LA" ? 2
                           : cs.mode == "RGBA" || cs.extra.contains("transparency") ? 4 : 3;
      EXPECT_EQ(natural.shape(), (Shape{h, w, want})) << ctx;
    }
  EXPECT_GT(compared, 200);
}

TEST(Image, InterlacedPngLikePil) {
  Generator g(13);
  for (int64_t c : {1, 2, 3, 4})
    for (auto [h, w] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 2}, {9, 17}, {28, 28}}) {
      Tensor px = pixels(h, w, c, g);
      auto ref = torch_ref("images.encode_interlaced", {{"pixels", px}});
      const auto file = bytes_of(ref.at("bytes"));
      EXPECT_TENSOR_NEAR(ref.at("out"), px, 0.0, 0.0) << "PIL's reading of the hand-made file";
      EXPECT_TENSOR_NEAR(data::decode_image(file.data(), file.size()), px, 0.0, 0.0) << c << " " << h << "x" << w;
    }
}

TEST(Image, SixteenBitPngKeepsTheHighByte) {
  Generator g(6);
  Tensor px = pixels(9, 11, 1, g);
  auto ref = torch_ref("images.encode", {{"pixels", px}}, {{"format", "PNG"}, {"mode", "I;16"}});
  const auto file = bytes_of(ref.at("bytes"));
  // The file holds v * 257 = (v << 8) | v; the high byte is v (PIL instead clips 16-bit gray at 255).
  EXPECT_TENSOR_NEAR(data::decode_image(file.data(), file.size(), 1), px, 0.0, 0.0);
}

TEST(Image, ConvertChannelsIsPilConvert) {
  Generator g(7);
  for (int64_t c : {1, 2, 3, 4}) {
    Tensor px = pixels(5, 19, c, g);
    const char* mode = c == 1 ? "L" : c == 2 ? "LA" : c == 3 ? "RGB" : "RGBA";
    auto ref = torch_ref("images.encode", {{"pixels", px}}, {{"format", "PNG"}, {"mode", mode}});
    for (auto [m, k] : std::vector<std::pair<std::string, int64_t>>{{"L", 1}, {"LA", 2}, {"RGB", 3}, {"RGBA", 4}})
      EXPECT_TENSOR_NEAR(data::convert_channels(px, k), ref.at(m), 0.0, 0.0) << mode << " -> " << m;
  }
  EXPECT_EQ(error_of([] { data::convert_channels(Tensor::zeros({2, 2, 3}, DType::u8), 5); }),
            "convert_channels: expected channels 1, 2, 3 or 4, got 5");
  EXPECT_EQ(error_of([] { data::convert_channels(Tensor::zeros({2, 2, 3}), 1); }),
            "convert_channels: expected a u8 (H, W, C) image with C in 1..4, got f32 of shape [2, 2, 3]");
}

TEST(Image, PngRoundTripAndPilReadsOurFiles) {
  Generator g(8);
  for (int64_t c : {1, 2, 3, 4})
    for (auto [h, w] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 257}, {29, 31}}) {
      Tensor px = pixels(h, w, c, g);
      const std::vector<uint8_t> png = data::encode_png(px);
      EXPECT_TENSOR_NEAR(data::decode_image(png.data(), png.size()), px, 0.0, 0.0) << c << " channels";
      const char* mode = c == 1 ? "L" : c == 2 ? "LA" : c == 3 ? "RGB" : "RGBA";
      Tensor bytes = Tensor::from_vector<uint8_t>(png, {int64_t(png.size())});
      EXPECT_TENSOR_NEAR(torch_ref("images.pil_decode", {{"bytes", bytes}}, {{"mode", mode}}).at("out"), px, 0.0, 0.0)
          << mode;
    }
  const std::string path = temp_dir() + "/written.png";
  Tensor px = pixels(12, 10, 3, g);
  data::write_png(path, px);
  EXPECT_TENSOR_NEAR(data::read_image(path), px, 0.0, 0.0);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(error_of([&] { data::write_png(temp_dir() + "/no/such/dir/x.png", px); }),
            "write_png: cannot open '" + temp_dir() + "/no/such/dir/x.png.tmp' for writing");
  EXPECT_EQ(error_of([] { data::encode_png(Tensor::zeros({4, 4, 5}, DType::u8)); }),
            "encode_png: expected a u8 (H, W, C) image with C in 1..4, got u8 of shape [4, 4, 5]");
}

TEST(Image, FloatConversions) {
  Generator g(9);
  Tensor px = pixels(6, 7, 3, g);
  Tensor f = data::to_chw_f32(px);
  ASSERT_EQ(f.shape(), (Shape{3, 6, 7}));
  EXPECT_FLOAT_EQ(float(f.at({2, 5, 6})), float(px.at({5, 6, 2})) / 255.0f);
  EXPECT_TENSOR_NEAR(data::to_hwc_u8(f), px, 0.0, 0.0);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  Tensor special = Tensor::from_vector<float>({-inf, inf, nan, -0.5f, 1.5f, 0.5f}, {1, 1, 6});
  EXPECT_EQ(data::to_hwc_u8(special).to_vector<int64_t>(), (std::vector<int64_t>{0, 255, 0, 0, 255, 128}));
}

TEST(Image, ResizeMatchesTorchvisionOnPil) {
  Generator g(10);
  // Shrinking (antialiased), enlarging, one side only, to 1 pixel; L and RGB.
  const std::vector<std::array<int64_t, 4>> cases = {{28, 28, 14, 14}, {28, 28, 224, 224}, {31, 17, 13, 29},
                                                     {7, 13, 7, 5},    {64, 48, 1, 1},     {5, 3, 17, 11},
                                                     {97, 89, 28, 28}};
  for (const auto& [h, w, oh, ow] : cases)
    for (int64_t c : {1, 3})
      for (const char* f : {"bilinear", "bicubic", "nearest"}) {
        Tensor px = pixels(h, w, c, g);
        Tensor mine = data::resize(px, oh, ow, data::parse_resample(f));
        auto ref = torch_ref("images.resize", {{"img", px}}, {{"size", {oh, ow}}, {"filter", f}});
        EXPECT_TENSOR_NEAR(mine, ref.at("out"), 0.0, 0.0)
            << f << " " << shape_str({h, w, c}) << " -> " << shape_str({oh, ow});
      }
}

TEST(Image, ResizeFloatMatchesPilModeF) {
  Generator g(11);
  for (const auto& [h, w, oh, ow] : std::vector<std::array<int64_t, 4>>{{7, 7, 224, 224}, {14, 14, 28, 28},
                                                                        {30, 20, 11, 13}})
    for (const char* f : {"bilinear", "bicubic", "nearest"}) {
      Tensor x = randn({2, h, w}, g);
      auto ref = torch_ref("images.resize_f", {{"img", x}}, {{"size", {oh, ow}}, {"filter", f}});
      EXPECT_TENSOR_NEAR(data::resize(x, oh, ow, data::parse_resample(f)), ref.at("out"), 1e-6, 1e-6) << f;
    }
  EXPECT_EQ(error_of([] { data::resize(Tensor::zeros({2, 2, 2}, DType::i64), 1, 1); }),
            "resize: expected a u8 (H, W, C) or f32 (C, H, W) image, got i64 of shape [2, 2, 2]");
  EXPECT_EQ(error_of([] { data::resize(Tensor::zeros({2, 2, 2}), 0, 1); }),
            "resize: expected a positive output size, got [0, 1]");
  EXPECT_EQ(error_of([] { data::parse_resample("lanczos"); }),
            "resize: unknown filter 'lanczos' (known: nearest, bilinear, bicubic)");
}

TEST(Image, BadFilesThrowNamingTheFile) {
  Generator g(12);
  Tensor px = pixels(20, 24, 3, g);
  const auto png = bytes_of(torch_ref("images.encode", {{"pixels", px}}, {{"format", "PNG"}, {"mode", "RGB"}}).at("bytes"));
  const auto jpg =
      bytes_of(torch_ref("images.encode", {{"pixels", px}}, {{"format", "JPEG"}, {"mode", "RGB"}}).at("bytes"));

  EXPECT_EQ(error_of([] { data::read_image("/nonexistent/cat.png"); }), "image: cannot open '/nonexistent/cat.png'");
  const std::string empty = write_file("empty.png", {});
  EXPECT_EQ(error_of([&] { data::read_image(empty); }), "image: cannot decode '" + empty + "': the file is empty");
  const std::string text = write_file("notes.jpg", {'h', 'e', 'l', 'l', 'o'});
  EXPECT_EQ(error_of([&] { data::read_image(text); }), "image: cannot decode '" + text + "': not a PNG or JPEG file");

  // Truncated anywhere: after the signature, in the header, in the image data.
  for (size_t keep : {size_t(8), size_t(20), png.size() / 2, png.size() - 20}) {
    const std::string p = write_file("trunc" + std::to_string(keep) + ".png", {png.begin(), png.begin() + long(keep)});
    const std::string msg = error_of([&] { data::read_image(p); });
    EXPECT_EQ(msg.rfind("image: cannot decode '" + p + "': PNG: ", 0), 0u) << msg;
  }
  const std::string p20 = temp_dir() + "/trunc" + std::to_string(png.size() / 2) + ".png";
  EXPECT_EQ(error_of([&] { data::read_image(p20); }), "image: cannot decode '" + p20 + "': PNG: file is truncated");
  for (size_t keep : {size_t(3), size_t(30), jpg.size() / 2, jpg.size() - 2}) {
    const std::string p = write_file("trunc" + std::to_string(keep) + ".jpg", {jpg.begin(), jpg.begin() + long(keep)});
    EXPECT_EQ(error_of([&] { data::read_image(p); }),
              "image: cannot decode '" + p + "': JPEG: Premature end of JPEG file")
        << keep;
  }
  // A damaged header CRC and a damaged JPEG marker segment.
  std::vector<uint8_t> bad = png;
  bad[20] ^= 0x40;   // inside IHDR's data: its CRC no longer matches
  const std::string crc = write_file("crc.png", bad);
  EXPECT_EQ(error_of([&] { data::read_image(crc); }), "image: cannot decode '" + crc + "': PNG: IHDR: CRC error");
  std::vector<uint8_t> badj = jpg;
  size_t sof = 2;
  while (sof + 4 < badj.size() && !(badj[sof] == 0xFF && badj[sof + 1] == 0xC0)) ++sof;
  ASSERT_LT(sof + 4, badj.size());
  badj[sof + 4] = 7;   // SOF0's sample precision: 8 -> 7
  const std::string bj = write_file("bad.jpg", badj);
  EXPECT_EQ(error_of([&] { data::read_image(bj); }),
            "image: cannot decode '" + bj + "': JPEG: Unsupported JPEG data precision 7");
  // Every prefix of both files fails cleanly or decodes (never crashes).
  int errors = 0;
  for (const auto* f : {&png, &jpg})
    for (size_t keep = 0; keep < f->size(); keep += 7) {
      try {
        data::decode_image(f->data(), keep, 3, "prefix");
      } catch (const Error&) {
        ++errors;
      }
    }
  EXPECT_GT(errors, 10);
  // Size limit.
  EXPECT_EQ(error_of([&] { data::decode_image(png.data(), png.size(), 0, "big.png", 100); }),
            "image: 'big.png' is 24 x 20 = 480 pixels, over the limit of 100 pixels that this call allows (its "
            "max_pixels argument)");
  EXPECT_EQ(error_of([&] { data::decode_image(png.data(), png.size(), 5, "x"); }),
            "image: expected channels 0 (as stored), 1, 2, 3 or 4, got 5");
}

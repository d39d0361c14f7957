// safetensors: round trips, interoperability with PyTorch-side writers, and every malformed input
// giving a clear attn::Error (the parser is also fuzzed: fuzz/safetensors_fuzz.cpp).
#include <gtest/gtest.h>

#include <filesystem>

#include <cstdio>
#include <cstring>

#include "attn/attn.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;

namespace {

std::string header_file(const std::string& json, const std::string& data) {
  std::string h = json;
  while (h.size() % 8) h.push_back(' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = char((uint64_t(h.size()) >> (8 * i)) & 0xff);
  return out + h + data;
}

std::string parse_error(const std::string& bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  return error_of([&] { io::parse_safetensors(p, bytes.size(), "t.safetensors"); });
}

}  // namespace

TEST(Safetensors, RoundTripAllDTypesAndMetadata) {
  Generator g(5);
  io::TensorList in = {{"a.weight", randn({3, 4}, g)},
                       {"b", randn({2}, g, DType::f64)},
                       {"c", randn({5}, g).to(DType::bf16)},
                       {"idx", Tensor::arange(7, DType::i64)},
                       {"i32", Tensor::arange(3, DType::i32)},
                       {"mask", Tensor::ones({2, 2}, DType::u8)},
                       {"scalar", Tensor::scalar(3.5)},
                       {"empty", Tensor::zeros({0, 3})},
                       {"view", randn({4, 6}, g).t()}};   // non-contiguous: written contiguous
  const std::string path = ::testing::TempDir() + "/rt.safetensors";
  io::save_safetensors(path, in, {{"config", "{\"dim\": 4}"}});
  io::SafetensorsFile f = io::load_safetensors(path);
  ASSERT_EQ(f.tensors.size(), in.size());
  EXPECT_EQ(f.metadata.at("config"), "{\"dim\": 4}");
  for (const auto& [name, t] : in) {
    const Tensor* got = f.find(name);
    ASSERT_NE(got, nullptr) << name;
    EXPECT_EQ(got->dtype(), t.dtype()) << name;
    // "empty" is (0, 3) by design: its shape is what round-trips.
    EXPECT_TRUE(test::near(got->to(DType::f64), t.to(DType::f64), 0, 0,
                           name == "empty" ? test::Empty::expected : test::Empty::fails))
        << name;
  }
  // The header is padded to a multiple of 8 and the file has no temporary left over.
  std::string bytes = [&] {
    FILE* fp = std::fopen(path.c_str(), "rb");
    std::string s(1 << 16, '\0');
    s.resize(std::fread(s.data(), 1, s.size(), fp));
    std::fclose(fp);
    return s;
  }();
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(std::fopen((path + ".tmp").c_str(), "rb"), nullptr);
}

TEST(Safetensors, ReadsWhatPythonWrites) {
  // The reference server writes safetensors itself (tests/support/ref_server.py); loading its
  // output is how every torch_ref call returns, so check a value here explicitly.
  Generator g(6);
  Tensor a = randn({3, 5}, g), b = randn({3, 5}, g);
  auto ref = test::torch_ref("elementwise.binary", {{"a", a}, {"b", b}, {"g", Tensor::ones({3, 5})}}, {{"op", "add"}});
  EXPECT_TENSOR_NEAR(ref.at("out"), a + b, 0, 0);
}

TEST(Safetensors, MalformedInputsGiveClearErrors) {
  EXPECT_EQ(parse_error("abc"), "safetensors 't.safetensors': file is 3 bytes, too short for the 8-byte header length");
  EXPECT_EQ(parse_error(std::string("\xff\x00\x00\x00\x00\x00\x00\x00{}", 10)),
            "safetensors 't.safetensors': header length 255 runs past the end of the file (10 bytes)");
  EXPECT_EQ(parse_error(header_file("{\"a\": 1", "")), "safetensors 't.safetensors': header is not valid JSON");
  EXPECT_EQ(parse_error(header_file("{\"a\":{\"dtype\":\"F8\",\"shape\":[1],\"data_offsets\":[0,1]}}", "x")),
            "safetensors 't.safetensors': entry 'a' has unsupported dtype 'F8' (expected F32, F64, BF16, F16, I32, "
            "I64, U8 or BOOL)");
  // A header that lies about offsets: past the data, wrong size, overlapping, a gap.
  EXPECT_EQ(parse_error(header_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", "1234")),
            "safetensors 't.safetensors': entry 'a' data_offsets [0, 8] lie outside the data block of 4 bytes");
  EXPECT_EQ(parse_error(header_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", "1234")),
            "safetensors 't.safetensors': entry 'a' has 4 bytes of data, but dtype F32 and shape [2] need 8");
  EXPECT_EQ(parse_error(header_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                                    "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", "1234")),
            "safetensors 't.safetensors': entry 'b' starts at byte 0 but the previous entry ends at 4 (offsets "
            "must be contiguous and non-overlapping)");
  EXPECT_EQ(parse_error(header_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", "12345678")),
            "safetensors 't.safetensors': entry 'a' starts at byte 4 but the previous entry ends at 0 (offsets "
            "must be contiguous and non-overlapping)");
  EXPECT_EQ(parse_error(header_file("{\"__metadata__\":{\"k\":1}}", "")),
            "safetensors 't.safetensors': __metadata__ value for 'k' is not a string");
  // Found by fuzzing: an empty tensor whose other dims overflow the strides.
  EXPECT_EQ(parse_error(header_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[0,4611686018427387904,4611686018427387904],"
                                    "\"data_offsets\":[0,0]}}", "")),
            "Tensor::empty: shape [0, 4611686018427387904, 4611686018427387904] is too large");
  // Truncated file on disk.
  const std::string path = ::testing::TempDir() + "/trunc.safetensors";
  std::string full = io::serialize_safetensors({{"w", Tensor::ones({16})}});
  FILE* fp = std::fopen(path.c_str(), "wb");
  std::fwrite(full.data(), 1, full.size() - 5, fp);
  std::fclose(fp);
  const std::string e = error_of([&] { io::load_safetensors(path); });
  EXPECT_NE(e.find("entry 'w' data_offsets [0, 64] lie outside the data block of 59 bytes"), std::string::npos) << e;
}

TEST(Safetensors, ADirectoryOrAMissingFileIsNamed) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  EXPECT_EQ(error_of([&] { io::load_safetensors(dir); }),
            "safetensors: expected a file, but '" + dir + "' is a directory");
  const std::string missing = error_of([&] { io::load_safetensors(dir + "/attn-no-such-file.safetensors"); });
  EXPECT_NE(missing.find("cannot open"), std::string::npos) << missing;
}

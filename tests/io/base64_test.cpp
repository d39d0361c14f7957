// Base64 (attn/io/base64.h): round trips of every length, and the decoder's refusals (length, bytes
// outside the alphabet, misplaced padding, non-zero padding bits), each named with its offset.
#include <gtest/gtest.h>

#include <string>

#include "attn/io/base64.h"
#include "errors.h"

using namespace attn;
using test::error_of;

TEST(Base64, RoundTripsEveryLength) {
  EXPECT_EQ(io::base64_encode("Man"), "TWFu");
  EXPECT_EQ(io::base64_encode("Ma"), "TWE=");
  EXPECT_EQ(io::base64_encode("M"), "TQ==");
  std::string bytes;
  for (int n = 0; n < 70; ++n) {
    const std::string text = io::base64_encode(bytes);
    EXPECT_EQ(text.size(), (bytes.size() + 2) / 3 * 4);
    EXPECT_EQ(io::base64_decode(text, "t"), bytes) << n;
    bytes += char(n * 37 + 11);
  }
}

TEST(Base64, RefusesWhatIsNotBase64) {
  EXPECT_EQ(error_of([] { io::base64_decode("TWF", "tok"); }),
            "tok: expected base64 (a multiple of 4 characters), found 3 characters");
  EXPECT_EQ(error_of([] { io::base64_decode("TW\nu", "tok"); }),
            "tok: expected base64, found the byte 0xa at character 2 of 4");
  EXPECT_EQ(error_of([] { io::base64_decode(std::string("TW\0u", 4), "tok"); }),
            "tok: expected base64, found the byte 0x0 at character 2 of 4");
  EXPECT_EQ(error_of([] { io::base64_decode("TW\xc3\xa9", "tok"); }),
            "tok: expected base64, found the byte 0xc3 at character 2 of 4");
  // Padding only at the end: not inside a group, not in an earlier group, not three of it.
  EXPECT_EQ(error_of([] { io::base64_decode("TW=u", "tok"); }),
            "tok: expected base64, found padding '=' at character 2 of 4 (padding may only end the text)");
  EXPECT_EQ(error_of([] { io::base64_decode("TQ==TWFu", "tok"); }),
            "tok: expected base64, found padding '=' at character 2 of 8 (padding may only end the text)");
  EXPECT_EQ(error_of([] { io::base64_decode("T===", "tok"); }),
            "tok: expected base64, found padding '=' at character 1 of 4 (padding may only end the text)");
  EXPECT_EQ(error_of([] { io::base64_decode("====", "tok"); }),
            "tok: expected base64, found padding '=' at character 0 of 4 (padding may only end the text)");
  // "TR==" and "TWF=" carry bits that "TQ==" / "TWE=" leave zero: another encoding of the same bytes.
  EXPECT_EQ(error_of([] { io::base64_decode("TR==", "tok"); }),
            "tok: expected base64, found non-zero padding bits in the last group");
  EXPECT_EQ(error_of([] { io::base64_decode("TWF=", "tok"); }),
            "tok: expected base64, found non-zero padding bits in the last group");
  EXPECT_EQ(io::base64_decode("", "tok"), "");
}

// Unicode character data and normalization against Python 3.11 itself (tests/golden/gen/unicode_data.py
// reads unicodedata and str): every code point's category, combining class, isspace, lower(), NFD and
// NFC, then NFD / NFC of random strings rich in combining marks, Hangul jamo and composable pairs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attn/core/rng.h"
#include "attn/text/unicode.h"
#include "torch_ref.h"

using namespace attn;
using namespace attn::text::unicode;

namespace {

std::vector<int64_t> longs(const Tensor& t) { return t.to(DType::i64).to_vector<int64_t>(); }

std::string hex(char32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", unsigned(cp));
  return buf;
}

std::string show(const std::u32string& s) {
  std::string out;
  for (char32_t c : s) out += (out.empty() ? "" : " ") + hex(c);
  return "[" + out + "]";
}

// A sparse mapping from Python: the code points whose result differs from the character itself.
struct Sparse {
  std::vector<int64_t> cps, lens, flat;
  explicit Sparse(const test::Tensors& ref, const std::string& name)
      : cps(longs(ref.at(name + "_cps"))), lens(longs(ref.at(name + "_len"))), flat(longs(ref.at(name + "_flat"))) {}
  // Python's result for every code point, in order.
  template <class F>
  void each(F&& f) const {
    size_t k = 0, at = 0;
    for (char32_t cp = 0; cp < 0x110000; ++cp) {
      std::u32string expected(1, cp);
      if (k < cps.size() && cps[k] == int64_t(cp)) {
        expected.clear();
        for (int64_t j = 0; j < lens[k]; ++j) expected.push_back(char32_t(flat[at + size_t(j)]));
        at += size_t(lens[k]);
        ++k;
      }
      f(cp, expected);
    }
  }
};

const test::Tensors& tables_ref() {
  static const test::Tensors ref = test::torch_ref("unicode_data.tables", {});
  return ref;
}

}  // namespace

TEST(Unicode, VersionIsPythons) { EXPECT_STREQ(unicode_version(), "14.0.0"); }

TEST(Unicode, CategoryCombiningClassAndSpaceOfEveryCodePoint) {
  const auto cat = longs(tables_ref().at("category")), ccc = longs(tables_ref().at("ccc")),
             space = longs(tables_ref().at("space"));
  ASSERT_EQ(cat.size(), 0x110000u);
  int bad = 0;
  for (char32_t cp = 0; cp < 0x110000 && bad < 10; ++cp) {
    if (int64_t(category(cp)) != cat[cp] || combining_class(cp) != ccc[cp] || is_space(cp) != (space[cp] != 0)) {
      ADD_FAILURE() << hex(cp) << ": category " << category_name(category(cp)) << " (Python "
                    << category_name(Category(cat[cp])) << "), class " << int(combining_class(cp)) << " (Python "
                    << ccc[cp] << "), space " << is_space(cp) << " (Python " << space[cp] << ")";
      ++bad;
    }
  }
  EXPECT_EQ(category(0x110000), Category::Cn);
  EXPECT_EQ(category_name(Category::Mn), "Mn");
}

TEST(Unicode, LowerNfdNfcOfEveryCodePoint) {
  struct Form {
    const char* name;
    std::u32string (*fn)(char32_t);
  };
  const Form forms[] = {{"lower", [](char32_t c) { return lower(c); }},
                        {"nfd", [](char32_t c) { return nfd(std::u32string(1, c)); }},
                        {"nfc", [](char32_t c) { return nfc(std::u32string(1, c)); }}};
  for (const Form& f : forms) {
    const Sparse ref(tables_ref(), f.name);
    EXPECT_GT(ref.cps.size(), 900u) << f.name;   // the table is not empty
    int bad = 0;
    ref.each([&](char32_t cp, const std::u32string& expected) {
      const std::u32string got = f.fn(cp);
      if (got != expected && bad++ < 10)
        ADD_FAILURE() << f.name << "(" << hex(cp) << ") = " << show(got) << ", Python " << show(expected);
    });
  }
}

TEST(Unicode, NfdNfcOfRandomStrings) {
  // Pools that exercise reordering, composition, blocking and Hangul.
  const std::vector<char32_t> pool = {
      U'a', U'e', U'o', U'A', U'E', U'u', U'i', U'n', U'c', U's', U' ', U'\u00e9', U'\u00c5', U'\u1e69',
      U'\u0301', U'\u0300', U'\u0302', U'\u0308', U'\u0323', U'\u0327', U'\u0328', U'\u031b', U'\u0345',
      U'\u0307', U'\u05b0', U'\u05bc', U'\u0f71', U'\u0f72', U'\u0f80', U'\u1100', U'\u1161', U'\u11a8',
      U'\u11a7', U'\uac00', U'\uac01', U'\ud7a3', U'\u0958', U'\u2126', U'\u212b', U'\u0344', U'\u0f73',
      U'\u3099', U'\u304b', U'\u30a6', U'\u03b1', U'\u0391', U'\u1f00', U'\u0313', U'\u0342', U'\u0cc6',
      U'\u0cc2', U'\u0cd5', U'\U0001d15e', U'\U0001d165', U'\U000110a5', U'\U000110ba', U'\u0b47', U'\u0b3e'};
  Generator g(7);
  std::vector<int64_t> cps, lens;
  std::vector<std::u32string> strings;
  for (int s = 0; s < 3000; ++s) {
    const int64_t n = g.randint(9);
    std::u32string str;
    for (int64_t k = 0; k < n; ++k) str.push_back(pool[size_t(g.randint(int64_t(pool.size())))]);
    for (char32_t c : str) cps.push_back(int64_t(c));
    lens.push_back(n);
    strings.push_back(str);
  }
  const auto ref = test::torch_ref("unicode_data.strings",
                                   {{"cps", Tensor::from_vector<int64_t>(cps, {int64_t(cps.size())})},
                                    {"lens", Tensor::from_vector<int64_t>(lens, {int64_t(lens.size())})}});
  for (const char* form : {"nfd", "nfc"}) {
    const auto flat = longs(ref.at(std::string(form) + "_flat")), len = longs(ref.at(std::string(form) + "_len"));
    size_t at = 0;
    int bad = 0;
    for (size_t s = 0; s < strings.size(); ++s) {
      std::u32string expected;
      for (int64_t k = 0; k < len[s]; ++k) expected.push_back(char32_t(flat[at + size_t(k)]));
      at += size_t(len[s]);
      const std::u32string got = std::string(form) == "nfd" ? nfd(strings[s]) : nfc(strings[s]);
      if (got != expected && bad++ < 10)
        ADD_FAILURE() << form << show(strings[s]) << " = " << show(got) << ", Python " << show(expected);
    }
  }
}

TEST(Unicode, TracedFormsKeepSpans) {
  // "e" + U+0301 composes: the composite spans both; "é" decomposes: both parts keep its span.
  const std::vector<TracedChar> in = {{U'e', 0, 1}, {U'\u0301', 1, 3}, {U'\u00e9', 3, 5}};
  const auto c = nfc(in);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].cp, U'\u00e9');
  EXPECT_EQ(c[0].begin, 0u);
  EXPECT_EQ(c[0].end, 3u);
  EXPECT_EQ(c[1].begin, 3u);
  const auto d = nfd(in);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[2].cp, U'e');
  EXPECT_EQ(d[3].cp, U'\u0301');
  EXPECT_EQ(d[3].begin, 3u);
  EXPECT_EQ(d[3].end, 5u);
}

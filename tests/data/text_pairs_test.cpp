// Translation pairs: the Bible pairs (count, first/last pair), TSV parsing and its errors,
// deterministic disjoint splits, and the synthetic tasks (dates parsed back from every source form).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "attn/core/error.h"
#include "attn/data/text_pairs.h"
#include "attn/text/utf8.h"
#include "errors.h"

using namespace attn;
using test::error_of;
using namespace attn::data;

namespace {

// Parses every source form make_synthetic_pairs("dates") writes back to ISO, independently of the
// generator (regexes over the forms listed in text_pairs.h), and checks the weekday.
std::string parse_date(const std::string& s) {
  static const char* months[12] = {"january", "february", "march", "april", "may", "june", "july",
                                   "august", "september", "october", "november", "december"};
  auto month_of = [&](std::string m) {
    for (char& c : m) c = char(std::tolower(static_cast<unsigned char>(c)));
    for (int i = 0; i < 12; ++i)
      if (m == months[i] || (m.size() == 3 && std::string(months[i]).substr(0, 3) == m)) return i + 1;
    return 0;
  };
  auto iso = [](int y, int m, int d) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02d", y, m, d);
    return std::string(buf);
  };
  std::smatch m;
  const std::string day = R"((\d{1,2})(?:st|nd|rd|th)?)";
  const std::string wd = R"((?:(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday|Mon|Tue|Wed|Thu|Fri|Sat|Sun),? )?)";
  if (std::regex_match(s, m, std::regex(wd + day + " (?:of )?([A-Za-z]+) (\\d{4})")))
    return iso(std::stoi(m[4]), month_of(m[3]), std::stoi(m[2]));
  if (std::regex_match(s, m, std::regex("([A-Za-z]+) " + day + ",? (\\d{4})")))
    return iso(std::stoi(m[3]), month_of(m[1]), std::stoi(m[2]));
  if (std::regex_match(s, m, std::regex(R"((\d{2})[/.](\d{2})[/.](\d{4}))")))
    return iso(std::stoi(m[3]), std::stoi(m[2]), std::stoi(m[1]));
  if (std::regex_match(s, m, std::regex(R"((\d{4})/(\d{2})/(\d{2}))")))
    return iso(std::stoi(m[1]), std::stoi(m[2]), std::stoi(m[3]));
  return "<unparsed>";
}

}  // namespace

TEST(BiblePairs, KjvToRv1909) {
  const auto pairs = load_bible_pairs();
  const auto all = load_bible_pairs("/usr/share/sword", "engKJV2006eb", "spaRV1909eb", false);
  std::cout << "Bible pairs (KJV -> RV1909): " << all.size() << " non-empty on both sides, " << pairs.size()
            << " outside chapters shifted by versification differences\n";
  EXPECT_EQ(all.size(), 31084u);     // 31,102 verses, 18 empty in RV1909
  EXPECT_EQ(pairs.size(), 30516u);
  // The shifted chapter Jonah 2 is skipped: KJV "Then Jonah prayed" vs RV "MAS Jehová había prevenido un gran pez".
  for (const auto& p : pairs) ASSERT_EQ(p.tgt.rfind("MAS Jehová había prevenido", 0), std::string::npos);
  bool found = false;
  for (const auto& p : all) found |= p.tgt.rfind("MAS Jehová había prevenido", 0) == 0;
  EXPECT_TRUE(found);
  ASSERT_FALSE(pairs.empty());
  EXPECT_EQ(pairs.front().src, "In the beginning God created the heaven and the earth.");
  EXPECT_EQ(pairs.front().tgt, "EN el principio crió Dios los cielos y la tierra.");
  EXPECT_EQ(pairs.back().src, "The grace of our Lord Jesus Christ be with you all. Amen.");
  EXPECT_EQ(pairs.back().tgt, "La gracia de nuestro Señor Jesucristo sea con todos vosotros. Amén.");
  size_t src_bytes = 0, tgt_bytes = 0;
  for (const auto& p : pairs) {
    ASSERT_FALSE(p.src.empty());
    ASSERT_FALSE(p.tgt.empty());
    ASSERT_TRUE(text::is_valid_utf8(p.src) && text::is_valid_utf8(p.tgt));
    ASSERT_EQ(p.src.find('<'), std::string::npos) << p.src;
    ASSERT_EQ(p.tgt.find('<'), std::string::npos) << p.tgt;
    src_bytes += p.src.size();
    tgt_bytes += p.tgt.size();
  }
  std::cout << "mean bytes per verse: en " << src_bytes / pairs.size() << ", es " << tgt_bytes / pairs.size() << "\n";
  const auto s = split_pairs(pairs, int64_t(1000), int64_t(1000), 0);
  EXPECT_EQ(s.dev.size(), 1000u);
  EXPECT_EQ(s.test.size(), 1000u);
  EXPECT_EQ(s.train.size(), pairs.size() - 2000);
}

TEST(TsvPairs, Parse) {
  const auto p = parse_tsv_pairs("\xEF\xBB\xBFhello\thola\r\n\n  \r\ngood night\tbuenas noches\nx\t\n\ty", "t.tsv");
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0], (TextPair{"hello", "hola"}));
  EXPECT_EQ(p[1], (TextPair{"good night", "buenas noches"}));
  EXPECT_EQ(p[2], (TextPair{"x", ""}));
  EXPECT_EQ(p[3], (TextPair{"", "y"}));
  EXPECT_TRUE(parse_tsv_pairs("").empty());
  EXPECT_EQ(parse_tsv_pairs(format_tsv_pairs(p)), p);
  std::istringstream in("a\tb\n");
  EXPECT_EQ(read_tsv_pairs(in, "s").size(), 1u);
}

TEST(TsvPairs, Errors) {
  EXPECT_EQ(error_of([] { parse_tsv_pairs("a\tb\n\nno tab here\n", "t.tsv"); }),
            "t.tsv line 3: expected 'source<TAB>target', found no tab");
  EXPECT_EQ(error_of([] { parse_tsv_pairs("a\tb\tc\n", "t.tsv"); }),
            "t.tsv line 1: expected 'source<TAB>target' (one tab), found 2 tabs");
  EXPECT_EQ(error_of([] { parse_tsv_pairs("ok\tsí\nbad\t\xC3\x28\n", "t.tsv"); }),
            "t.tsv line 2: invalid UTF-8 at byte offset 4 of the line: bytes c3 28 (expected a continuation byte "
            "80..bf at position 2 of a 2-byte sequence)");
  EXPECT_EQ(error_of([] { read_tsv_pairs("/nonexistent.tsv"); }), "read_tsv_pairs: cannot open /nonexistent.tsv");
  EXPECT_EQ(error_of([] { format_tsv_pairs({{"a\tb", "c"}}); }),
            "format_tsv_pairs: pair 0 contains a tab or a line break, which TSV cannot hold");
  // From a file.
  const auto path = std::filesystem::temp_directory_path() / ("attn_tsv_" + std::to_string(::getpid()) + ".tsv");
  std::ofstream(path) << "one\tuno\ntwo\n";
  EXPECT_EQ(error_of([&] { read_tsv_pairs(path.string()); }),
            path.string() + " line 2: expected 'source<TAB>target', found no tab");
  std::filesystem::remove(path);
}

TEST(Splits, DeterministicAndDisjoint) {
  std::vector<TextPair> pairs;
  for (int i = 0; i < 1000; ++i) pairs.push_back({"s" + std::to_string(i), "t" + std::to_string(i)});
  const auto a = split_pairs(pairs, 0.1, 0.05, 42), b = split_pairs(pairs, 0.1, 0.05, 42);
  EXPECT_EQ(a.train, b.train);
  EXPECT_EQ(a.dev, b.dev);
  EXPECT_EQ(a.test, b.test);
  EXPECT_EQ(a.dev.size(), 100u);
  EXPECT_EQ(a.test.size(), 50u);
  EXPECT_EQ(a.train.size(), 850u);
  std::set<std::string> seen;
  for (const auto* part : {&a.train, &a.dev, &a.test})
    for (const auto& p : *part) EXPECT_TRUE(seen.insert(p.src).second) << p.src << " in two splits";
  EXPECT_EQ(seen.size(), 1000u);
  // Each split keeps the input order.
  for (const auto* part : {&a.train, &a.dev, &a.test})
    for (size_t i = 1; i < part->size(); ++i)
      EXPECT_LT(std::stoi((*part)[i - 1].src.substr(1)), std::stoi((*part)[i].src.substr(1)));
  // Another seed, another split.
  EXPECT_NE(split_pairs(pairs, 0.1, 0.05, 43).test, a.test);
  // Pinned: the same on every machine (Philox keys, no std distributions).
  const auto order = split_order(10, 0);
  std::ostringstream os;
  for (int64_t i : order) os << i << ' ';
  std::cout << "split_order(10, seed 0): " << os.str() << "\n";
  EXPECT_EQ(order, (std::vector<int64_t>{2, 8, 0, 5, 9, 7, 6, 3, 4, 1}));
  EXPECT_EQ(error_of([&] { split_pairs(pairs, int64_t(600), int64_t(500), 0); }),
            "split_pairs: expected dev + test <= the number of pairs (1000), got dev 600 and test 500");
  EXPECT_EQ(error_of([&] { split_pairs(pairs, 0.6, 0.5, 0); }),
            "split_pairs: expected fractions >= 0 with dev + test <= 1, got dev 0.6 and test 0.5");
}

TEST(Synthetic, CopyAndReverse) {
  const auto c = make_synthetic_pairs("copy", 500, 1);
  const auto r = make_synthetic_pairs("reverse", 500, 1);
  ASSERT_EQ(c.size(), 500u);
  std::set<size_t> lengths;
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(c[i].src, c[i].tgt);
    EXPECT_EQ(r[i].tgt, std::string(r[i].src.rbegin(), r[i].src.rend()));
    EXPECT_GE(c[i].src.size(), 4u);
    EXPECT_LE(c[i].src.size(), 24u);
    for (char ch : c[i].src) EXPECT_TRUE(ch >= 'a' && ch <= 'z');
    lengths.insert(c[i].src.size());
  }
  EXPECT_EQ(lengths.size(), 21u);
  EXPECT_EQ(make_synthetic_pairs("copy", 500, 1), c);
  EXPECT_NE(make_synthetic_pairs("copy", 500, 2), c);
  EXPECT_EQ(error_of([] { make_synthetic_pairs("sort", 1, 0); }),
            "make_synthetic_pairs: unknown task 'sort', expected one of copy, reverse, dates");
}

TEST(Synthetic, DatesRoundTrip) {
  const auto d = make_synthetic_pairs("dates", 3000, 5);
  std::map<std::string, int> shapes;   // digits -> 9, letters -> a: counts the source forms
  for (const auto& p : d) {
    ASSERT_TRUE(std::regex_match(p.tgt, std::regex(R"((19|20)\d\d-\d\d-\d\d)"))) << p.tgt;
    EXPECT_EQ(parse_date(p.src), p.tgt) << p.src;
    std::string shape;
    for (char c : p.src) shape += std::isdigit(static_cast<unsigned char>(c)) ? '9' : std::isalpha(static_cast<unsigned char>(c)) ? 'a' : c;
    shapes[std::regex_replace(shape, std::regex("a+"), "a").substr(0, 6)]++;
  }
  EXPECT_GE(shapes.size(), 6u);
  EXPECT_EQ(make_synthetic_pairs("dates", 3000, 5), d);
  // Weekday of every source that names one (Zeller's congruence here, days_from_civil there).
  static const char* wd[7] = {"Sat", "Sun", "Mon", "Tue", "Wed", "Thu", "Fri"};
  for (const auto& p : d) {
    std::smatch m;
    if (!std::regex_search(p.src, m, std::regex("^(Mon|Tue|Wed|Thu|Fri|Sat|Sun)"))) continue;
    int y = std::stoi(p.tgt.substr(0, 4)), mo = std::stoi(p.tgt.substr(5, 2)), day = std::stoi(p.tgt.substr(8, 2));
    if (mo < 3) { mo += 12; --y; }
    const int h = (day + 13 * (mo + 1) / 5 + y % 100 + (y % 100) / 4 + (y / 100) / 4 + 5 * (y / 100)) % 7;
    EXPECT_EQ(m[1].str(), wd[h]) << p.src << " -> " << p.tgt;
  }
  std::cout << "date sources:";
  for (int i = 0; i < 8; ++i) std::cout << " [" << d[size_t(i)].src << " -> " << d[size_t(i)].tgt << "]";
  std::cout << "\n";
}

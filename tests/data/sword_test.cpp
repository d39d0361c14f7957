// SWORD zText reader: versification, the installed KJV and RV1909 modules (verse counts, known
// verses in both languages), OSIS stripping of each kind of markup, and corrupt-module errors.
// Needs sword-text-kjv and sword-text-sparv (scripts/install_deps.sh installs them).
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>

#include "attn/core/error.h"
#include "attn/data/sword.h"
#include "errors.h"

using namespace attn;
using test::error_of;
using namespace attn::data;

namespace {

const std::string kSword = "/usr/share/sword";

std::string verse_text(const SwordModule& m, const char* book, int c, int v) {
  auto ref = kjv_find(book, c, v);
  EXPECT_TRUE(ref.has_value()) << book << " " << c << ":" << v;
  return strip_osis(m.raw_verse(*ref));
}

void put32(std::string& s, uint32_t v) {
  for (int k = 0; k < 4; ++k) s += char((v >> (8 * k)) & 0xFF);
}
void put16(std::string& s, uint16_t v) {
  s += char(v & 0xFF);
  s += char(v >> 8);
}
std::string deflate_bytes(const std::string& s) {
  uLongf n = compressBound(uLong(s.size()));
  std::string out(n, '\0');
  EXPECT_EQ(compress(reinterpret_cast<Bytef*>(out.data()), &n, reinterpret_cast<const Bytef*>(s.data()), uLong(s.size())),
            Z_OK);
  out.resize(n);
  return out;
}

// A one-block testament whose entries are `entries` (concatenated into the block).
ZTextTestament tiny(const std::vector<std::string>& entries) {
  std::string block;
  ZTextTestament t;
  for (const auto& e : entries) {
    put32(t.bzv, 0);
    put32(t.bzv, uint32_t(block.size()));
    put16(t.bzv, uint16_t(e.size()));
    block += e;
  }
  t.bzz = deflate_bytes(block);
  put32(t.bzs, 0);
  put32(t.bzs, uint32_t(t.bzz.size()));
  put32(t.bzs, uint32_t(block.size()));
  return t;
}

}  // namespace

TEST(Versification, KjvCountsAndLayout) {
  EXPECT_EQ(kjv_num_books(), 66);
  int chapters = 0;
  int64_t verses = 0;
  for (int b = 0; b < 66; ++b) {
    chapters += kjv_num_chapters(b);
    for (int c = 1; c <= kjv_num_chapters(b); ++c) verses += kjv_num_verses(b, c);
  }
  EXPECT_EQ(chapters, 1189);
  EXPECT_EQ(verses, 31102);
  EXPECT_EQ(kjv_total_verses(), 31102);
  EXPECT_EQ(kjv_num_entries(Testament::ot), 24115);   // 2 + 39 books + 929 chapters + 23145 verses
  EXPECT_EQ(kjv_num_entries(Testament::nt), 8246);    // 2 + 27 + 260 + 7957
  EXPECT_EQ(kjv_num_chapters(18), 150);               // Psalms
  EXPECT_EQ(kjv_num_verses(18, 119), 176);
  EXPECT_EQ(kjv_entry_of({0, 1, 1}), std::make_pair(Testament::ot, int64_t(4)));
  EXPECT_EQ(kjv_entry_of({39, 1, 1}), std::make_pair(Testament::nt, int64_t(4)));   // Matt 1:1
  EXPECT_FALSE(kjv_verse_at(Testament::ot, 3).has_value());   // chapter heading Gen 1
  EXPECT_EQ(kjv_verse_at(Testament::ot, 4)->str(), "Gen 1:1");
  EXPECT_EQ(kjv_verse_at(Testament::nt, 8245)->str(), "Rev 22:21");
  EXPECT_EQ(kjv_find("John", 3, 16)->str(), "John 3:16");
  EXPECT_EQ(kjv_find("Song of Solomon", 1, 1)->str(), "Song 1:1");
  EXPECT_FALSE(kjv_find("John", 3, 37).has_value());
  EXPECT_FALSE(kjv_find("Hezekiah", 1, 1).has_value());
  EXPECT_EQ(error_of([] { kjv_entry_of({42, 22, 1}); }), "kjv_num_verses: John has chapters 1..21, got 22");
  // Every verse maps to its entry and back.
  for (int t = 0; t < 2; ++t)
    for (int64_t i = 0; i < kjv_num_entries(Testament(t)); ++i)
      if (auto r = kjv_verse_at(Testament(t), i)) ASSERT_EQ(kjv_entry_of(*r), std::make_pair(Testament(t), i));
}

TEST(Sword, KjvModule) {
  const auto kjv = SwordModule::open(kSword, "engKJV2006eb");
  EXPECT_EQ(kjv.num_entries(Testament::ot), 24115);
  EXPECT_EQ(kjv.num_entries(Testament::nt), 8246);
  const auto verses = kjv.verses();
  ASSERT_EQ(verses.size(), 31102u);
  int64_t ot = 0, nt = 0, empty = 0;
  for (size_t i = 0; i < verses.size(); ++i) {
    ASSERT_EQ(verses[i].index, int64_t(i));
    (verses[i].ref.book < 39 ? ot : nt) += 1;
    empty += strip_osis(verses[i].osis).empty();
  }
  EXPECT_EQ(ot, 23145);
  EXPECT_EQ(nt, 7957);
  std::cout << "KJV: " << ot << " OT + " << nt << " NT verses, " << empty << " empty after stripping\n";
  EXPECT_EQ(verses[0].ref.str(), "Gen 1:1");
  EXPECT_EQ(strip_osis(verses[0].osis), "In the beginning God created the heaven and the earth.");
  EXPECT_EQ(verse_text(kjv, "John", 3, 16),
            "For God so loved the world, that he gave his only begotten Son, that whosoever believeth in him "
            "should not perish, but have everlasting life.");
  EXPECT_EQ(verses.back().ref.str(), "Rev 22:21");
  EXPECT_EQ(strip_osis(verses.back().osis), "The grace of our Lord Jesus Christ be with you all. Amen.");
  // transChange / divineName keep their words; notes go; pilcrows go.
  EXPECT_EQ(verse_text(kjv, "Gen", 1, 2),
            "And the earth was without form, and void; and darkness was upon the face of the deep. And the "
            "Spirit of God moved upon the face of the waters.");
  EXPECT_EQ(verse_text(kjv, "Gen", 2, 4),
            "These are the generations of the heavens and of the earth when they were created, in the day that "
            "the LORD God made the earth and the heavens,");
  EXPECT_EQ(verse_text(kjv, "Gen", 1, 6).substr(0, 20), "And God said, Let th");
  // The psalm superscription is canonical: kept.
  EXPECT_EQ(verse_text(kjv, "Ps", 3, 1).substr(0, 52), "A Psalm of David, when he fled from Absalom his son.");
  EXPECT_EQ(verse_text(kjv, "John", 11, 35), "Jesus wept.");
}

TEST(Sword, Rv1909Module) {
  const auto rv = SwordModule::open(kSword, "spaRV1909eb");
  EXPECT_EQ(rv.num_entries(Testament::ot), 24115);
  EXPECT_EQ(rv.num_entries(Testament::nt), 8246);
  int64_t n = 0, empty = 0;
  rv.for_each_verse([&](const Verse& v) {
    ++n;
    empty += strip_osis(v.osis).empty();
  });
  EXPECT_EQ(n, 31102);
  std::cout << "RV1909: " << n << " verses, " << empty << " empty after stripping\n";
  const std::string gen = verse_text(rv, "Gen", 1, 1), john = verse_text(rv, "John", 3, 16);
  std::cout << "RV1909 Gen 1:1: " << gen << "\nRV1909 John 3:16: " << john << "\n";
  EXPECT_EQ(gen, "EN el principio crió Dios los cielos y la tierra.");
  EXPECT_EQ(john,
            "Porque de tal manera amó Dios al mundo, que ha dado á su Hijo unigénito, para que todo aquel que "
            "en él cree, no se pierda, mas tenga vida eterna.");
  EXPECT_EQ(verse_text(rv, "Rev", 22, 21), "La gracia de nuestro Señor Jesucristo sea con todos vosotros. Amén.");
}

TEST(Sword, OpenErrors) {
  EXPECT_EQ(error_of([] { SwordModule::open("/nonexistent", "engKJV2006eb"); }),
            "SWORD: expected a module library with mods.d/ in /nonexistent (apt-get install sword-text-kjv "
            "sword-text-sparv)");
  const std::string e = error_of([] { SwordModule::open(kSword, "nope"); });
  EXPECT_NE(e.find("SWORD: no module named 'nope'"), std::string::npos) << e;
  EXPECT_NE(e.find("engKJV2006eb"), std::string::npos) << e;
}

TEST(StripOsis, Markup) {
  // <w> keeps its words, loses Strong's / morphology attributes, joins punctuation.
  EXPECT_EQ(strip_osis("In the <w lemma=\"strong:H7225\" morph=\"x\">beginning</w>."), "In the beginning.");
  EXPECT_EQ(strip_osis("<transChange type=\"added\">was</transChange> upon"), "was upon");
  EXPECT_EQ(strip_osis("the <divineName><w lemma=\"strong:H3068\">LORD</w></divineName> God"), "the LORD God");
  EXPECT_EQ(strip_osis("<q marker=\"\" who=\"Jesus\"><w>Suffer</w> it</q> now"), "Suffer it now");
  // Notes go with their content, nested elements included.
  EXPECT_EQ(strip_osis("darkness.<note placement=\"foot\"><reference type=\"annotateRef\">1.4 </reference>the "
                       "<note>inner</note> light</note> And"),
            "darkness. And");
  // Titles go unless canonical.
  EXPECT_EQ(strip_osis("<title level=\"1\" type=\"main\">The First Book</title> <div sID=\"g\" type=\"x-p\"/>"),
            "");
  EXPECT_EQ(strip_osis("<title><foreign>ALEPH.</foreign></title>Blessed"), "Blessed");
  EXPECT_EQ(strip_osis("<title canonical=\"true\" type=\"psalm\">A Psalm.</title><l level=\"1\"/>LORD, how"),
            "A Psalm. LORD, how");
  // Milestones and block markers separate words; pilcrows are dropped.
  EXPECT_EQ(strip_osis("<div type=\"x-milestone\" subType=\"x-preverse\" sID=\"pv1\"/>¶ And<lb type=\"x-p\"/>God"),
            "And God");
  EXPECT_EQ(strip_osis("end.<chapter eID=\"Gen.1\"/><milestone n=\"Gen\" type=\"x-usfm-toc3\"/>"), "end.");
  // Entities, numeric too; unknown / invalid ones stay as written.
  EXPECT_EQ(strip_osis("a &amp; b &lt;c&gt; &quot;d&quot; &apos;e&apos; &#241; &#xF1; &#x1F600;"),
            "a & b <c> \"d\" 'e' ñ ñ \xF0\x9F\x98\x80");
  EXPECT_EQ(strip_osis("&nbsp; &#0; &#xD800; &#x110000; & ;"), "&nbsp; &#0; &#xD800; &#x110000; & ;");
  // Whitespace collapses and is trimmed; an unterminated tag is text.
  EXPECT_EQ(strip_osis("  a \t\n b  "), "a b");
  EXPECT_EQ(strip_osis("a < b"), "a < b");
  EXPECT_EQ(strip_osis(""), "");
  // Decoded &lt; is text, not a tag.
  EXPECT_EQ(strip_osis("&lt;note&gt;kept&lt;/note&gt;"), "<note>kept</note>");
}

TEST(Sword, InMemoryModule) {
  std::vector<std::string> e = {"", "<milestone/>", "<div type=\"book\"/>", "<chapter/>", "In the <w>beginning</w>."};
  const auto m = SwordModule::from_bytes(tiny(e), {}, "tiny");
  ASSERT_EQ(m.num_entries(Testament::ot), 5);
  EXPECT_EQ(m.num_entries(Testament::nt), 0);
  EXPECT_EQ(m.entry(Testament::ot, 4), "In the <w>beginning</w>.");
  EXPECT_EQ(m.entry(Testament::ot, 0), "");
  EXPECT_EQ(strip_osis(m.raw_verse({0, 1, 1})), "In the beginning.");
  EXPECT_EQ(error_of([&] { m.raw_verse({0, 1, 2}); }),
            "tiny: Gen 1:2 is entry 5 of ot, but the module has only 5 entries there");
  EXPECT_EQ(error_of([&] { m.verses(); }), "tiny ot.bzv: expected 24115 entries (KJV versification), found 5");
  EXPECT_EQ(error_of([&] { m.entry(Testament::ot, 5); }), "tiny ot: entry 5 out of range, expected 0..4");
}

TEST(Sword, CorruptModules) {
  const std::vector<std::string> e = {"", "a", "bc"};
  auto with = [&](const std::function<void(ZTextTestament&)>& edit) {
    ZTextTestament t = tiny(e);
    edit(t);
    return error_of([&] {
      auto m = SwordModule::from_bytes(t, {}, "bad");
      for (int64_t i = 0; i < m.num_entries(Testament::ot); ++i) m.entry(Testament::ot, i);
    });
  };
  EXPECT_EQ(with([](ZTextTestament&) {}), test::kNoError);
  EXPECT_EQ(with([](ZTextTestament& t) { t.bzv.pop_back(); }),
            "bad ot.bzv: expected a multiple of 10 bytes (10-byte entry records), found 29 bytes (truncated?)");
  EXPECT_EQ(with([](ZTextTestament& t) { t.bzs.resize(11); }),
            "bad ot.bzs: expected a multiple of 12 bytes (12-byte block records), found 11 bytes (truncated?)");
  // Entry 2 refers to block 7 of 1.
  EXPECT_EQ(with([](ZTextTestament& t) { t.bzv[20] = 7; }),
            "bad ot.bzv: entry 2 refers to block 7, expected < 1 (the number of blocks in .bzs)");
  // Entry 2 starts past the end of its 3-byte block.
  EXPECT_EQ(with([](ZTextTestament& t) { t.bzv[24] = 2; }),
            "bad ot.bzv: entry 2 spans bytes 2..4 of block 0, which has only 3 bytes");
  // Block past the end of .bzz.
  EXPECT_EQ(with([](ZTextTestament& t) { t.bzz.resize(t.bzz.size() - 2); }).substr(0, 30), "bad ot.bzs: block 0 spans byte");
  // Bad zlib data.
  EXPECT_EQ(with([](ZTextTestament& t) { t.bzz[0] = 0x12; }),
            "bad ot.bzz: block 0: expected a complete zlib stream of 11 bytes, found corrupt data (zlib: incorrect "
            "header check)");
  // Stated uncompressed size too small / too large.
  EXPECT_EQ(with([](ZTextTestament& t) { t.bzs[8] = 2; }).substr(0, 200),
            "bad ot.bzv: entry 2 spans bytes 1..3 of block 0, which has only 2 bytes");
  EXPECT_EQ(with([](ZTextTestament& t) {
              t.bzs[8] = 4;
            }),
            "bad ot.bzz: block 0: expected 4 bytes after inflating (as .bzs says), found 3");
  EXPECT_EQ(with([](ZTextTestament& t) {
              t.bzv[28] = 1;   // entry 2 = 1 byte, so a 2-byte block passes the index checks
              t.bzs[8] = 2;
            }),
            "bad ot.bzz: block 0: expected 2 bytes after inflating (as .bzs says), found more");
  // A truncated stream (the compressed size cut short).
  EXPECT_EQ(with([](ZTextTestament& t) { t.bzs[4] = char(t.bzs[4] - 3); }),
            "bad ot.bzz: block 0: expected a complete zlib stream of 8 bytes, found a truncated stream (zlib code -5)");
  // An impossible compression ratio is refused before allocating.
  EXPECT_EQ(with([](ZTextTestament& t) { t.bzs[11] = char(0x7f); }).substr(0, 40), "bad ot.bzs: block 0 claims 2130706435 by");
}

TEST(Sword, CorruptFileOnDisk) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("attn_sword_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ZTextTestament t = tiny({"", "x"});
  std::ofstream(dir / "ot.bzs", std::ios::binary) << t.bzs;
  std::ofstream(dir / "ot.bzv", std::ios::binary) << t.bzv.substr(0, 15);
  EXPECT_EQ(error_of([&] { SwordModule::open_data_dir(dir.string(), "d"); }),
            "SWORD module " + dir.string() + ": expected all of ot.bzs, ot.bzv, ot.bzz, found only 2 of them");
  std::ofstream(dir / "ot.bzz", std::ios::binary) << t.bzz;
  EXPECT_EQ(error_of([&] { SwordModule::open_data_dir(dir.string(), "d"); }),
            "d ot.bzv: expected a multiple of 10 bytes (10-byte entry records), found 15 bytes (truncated?)");
  fs::remove_all(dir);
}

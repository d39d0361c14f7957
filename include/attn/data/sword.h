// SWORD zText Bible modules (CrossWire), read without libsword: the KJV (engKJV2006eb) and the
// Reina-Valera 1909 (spaRV1909eb) that Debian's sword-text-kjv / sword-text-sparv install.
//
//   auto kjv = attn::data::SwordModule::open("/usr/share/sword", "engKJV2006eb");
//   for (const auto& v : kjv.verses())                       // 31,102 verses, canonical order
//     std::cout << v.ref.str() << " " << attn::data::strip_osis(v.osis) << "\n";   // "Gen 1:1 In the ..."
//   std::string jn = kjv.raw_verse(*attn::data::kjv_find("John", 3, 16));
//
// Format, as found in the installed files (SWORD 1.9 osis2mod output, CompressType=ZIP,
// BlockType=BOOK, Versification=KJV, SourceType=OSIS, Encoding=UTF-8), per testament (ot, nt):
//   <t>.bzs  12-byte block records: u32 offset into .bzz, u32 compressed size, u32 uncompressed
//            size, little-endian. Each block is one zlib stream (78 9c header, adler32 trailer) that
//            inflates to exactly the stated size. KJV: 40 OT blocks (one for the module/testament
//            headers, one per book), 28 NT blocks.
//   <t>.bzv  10-byte entry records: u32 block index, u32 start offset in the inflated block, u16
//            length (0 = empty entry), little-endian. Entry i is bytes [start, start + length) of
//            the block.
//   <t>.bzz  the concatenated zlib streams.
// Entry layout (SWORD's VerseKey indexing for a versification): entry 0 = module heading (empty
// here), entry 1 = testament heading (an osis2mod importer milestone), then for each book one
// book-intro entry (<div type="book" osisID="Gen" sID=...>, <title>s, TOC milestones) and for each
// chapter one chapter-heading entry (<chapter osisID="Gen.1" sID=...>) followed by its verses. KJV
// versification: OT 2 + 39 + 929 + 23,145 = 24,115 entries, NT 2 + 27 + 260 + 7,957 = 8,246 entries,
// exactly the .bzv sizes (241,150 and 82,460 bytes) of both modules. Gen 1:1 is OT entry 4.
//
// Markup found in the verses (both modules; counts are for the whole KJV): <w lemma="strong:H7225">
// around (groups of) words (KJV 349k, RV1909 391k), <transChange type="added"> (words added by the
// translators, KJV 21.5k, RV 3.5k), <note placement="foot"> with a <reference> inside (KJV 7k),
// <divineName> (KJV 6.9k), <q who="Jesus" marker=""> (red letters, KJV 2k), <seg type="x-nested">,
// <title canonical="true" type="psalm"> (KJV psalm superscriptions; RV1909 has the same words as
// plain verse text), milestones (<div type="x-milestone" subType="x-preverse" sID/eID/>, <milestone
// type="x-usfm-toc1" n=.../>), paragraph/poetry/chapter/book boundary markers (<div sID/eID/>,
// <lg>, <l>, <lb/>, <chapter eID/>), and in the KJV the pilcrow ¶ (U+00B6) as paragraph mark in
// 2,970 verses. Neither module contains XML entities; both are valid UTF-8.
//
// Corrupt input (index sizes not a multiple of the record size, a block past the end of .bzz, an
// entry pointing at a missing block or past the end of its block, an uncompressed size zlib cannot
// reach from the compressed size (over 1032:1), a bad zlib stream or a wrong inflated size) throws
// attn::Error naming the module, file, record and what was expected and found. Every block's size
// is checked when the module is opened, before anything is inflated: a block over the inflated-size
// ceiling (data::max_inflated_bytes(), attn/data/limits.h, ATTN_MAX_INFLATED_BYTES) is refused
// with an error naming the limit and how to raise it. A module is not thread-safe
// (it caches the last inflated block); open one per thread.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attn::data {

enum class Testament { ot = 0, nt = 1 };

// A verse in KJV versification. book: 0..65 (Genesis .. Revelation); chapter and verse from 1.
struct VerseRef {
  int book = 0, chapter = 1, verse = 1;
  std::string str() const;   // OSIS-style "Gen 1:1", "John 3:16", "Rev 22:21"
  bool operator==(const VerseRef&) const = default;
};

// KJV versification tables.
int kjv_num_books();                            // 66
const char* kjv_book_osis(int book);            // "Gen", ..., "Rev" (OSIS book ids)
const char* kjv_book_name(int book);            // "Genesis", ..., "Revelation"
int kjv_num_chapters(int book);
int kjv_num_verses(int book, int chapter);
int64_t kjv_total_verses();                     // 31,102
int64_t kjv_num_entries(Testament t);           // 24,115 / 8,246 (including heading entries)
// The entry of testament `t` that holds verse `ref` (throws for a reference outside KJV).
std::pair<Testament, int64_t> kjv_entry_of(const VerseRef& ref);
// The verse held by entry `index` of testament `t`, or nullopt for a heading entry (module,
// testament, book intro, chapter) or an index outside the versification.
std::optional<VerseRef> kjv_verse_at(Testament t, int64_t index);
// Book by OSIS id or English name ("John", "Gen", "Genesis", "Song of Solomon"); nullopt if unknown.
std::optional<VerseRef> kjv_find(std::string_view book, int chapter, int verse);

// The three files of one testament, as bytes.
struct ZTextTestament {
  std::string bzs, bzv, bzz;
};

struct Verse {
  int64_t index = 0;   // 0-based position in canonical order (0 = Gen 1:1, 31,101 = Rev 22:21)
  VerseRef ref;
  std::string osis;    // the raw entry (OSIS markup), as stored
};

class SwordModule {
 public:
  // Finds <sword_dir>/mods.d/*.conf with section [module], checks ModDrv=zText, CompressType=ZIP,
  // Versification=KJV (or absent), and opens <sword_dir>/<DataPath>.
  static SwordModule open(const std::string& sword_dir, const std::string& module);
  // Opens a data directory holding {ot,nt}.{bzs,bzv,bzz} (a testament whose three files are all
  // absent is empty; a partial set is an error). Assumes KJV versification.
  static SwordModule open_data_dir(const std::string& data_dir, const std::string& name = "");
  // From bytes in memory (the fuzzer). Empty strings make an empty testament.
  static SwordModule from_bytes(ZTextTestament ot, ZTextTestament nt, const std::string& name = "<memory>");

  const std::string& name() const { return name_; }
  int64_t num_entries(Testament t) const;
  // Raw OSIS text of entry `index` of testament `t` (empty for an empty entry).
  std::string entry(Testament t, int64_t index) const;
  std::string raw_verse(const VerseRef& ref) const;

  // Every verse of the KJV versification in canonical order (31,102, empty ones included). Throws
  // unless each non-empty testament has exactly the KJV entry count.
  std::vector<Verse> verses() const;
  void for_each_verse(const std::function<void(const Verse&)>& f) const;

 private:
  struct Block {
    uint32_t offset, compressed, uncompressed;
  };
  struct Record {
    uint32_t block, start;
    uint16_t length;
  };
  struct Part {
    std::string bzz;
    std::vector<Block> blocks;
    std::vector<Record> records;
    mutable int64_t cached_block = -1;
    mutable std::string cached;
  };
  static Part parse_part(ZTextTestament files, const std::string& what);
  const std::string& inflate_block(Testament t, uint32_t block) const;

  std::string name_;
  Part parts_[2];
};

// OSIS markup -> plain text: <w>, <transChange>, <divineName>, <q>, <seg>, <foreign> keep their
// words and lose their attributes (Strong's numbers, morphology); <note>...</note> is dropped with
// its content, as is <title>...</title> unless canonical="true" (psalm superscriptions are verse
// text, and RV1909 has them inline); every other tag is dropped; block-level tags (div, l, lg, lb,
// p, chapter, title, milestone, q) and the pilcrow ¶ separate words; XML entities (&amp; &lt; &gt;
// &quot; &apos; &#N; &#xH;) are decoded, unknown or invalid ones kept as written; ASCII whitespace
// runs collapse to one space, and the result is trimmed. An unterminated '<' is kept as text.
std::string strip_osis(std::string_view osis);

}  // namespace attn::data

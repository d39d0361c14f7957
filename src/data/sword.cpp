// SWORD zText reader and OSIS stripping (format notes in include/attn/data/sword.h).
#include "attn/data/sword.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "attn/core/error.h"
#include "attn/data/limits.h"
#include "attn/text/utf8.h"

namespace attn::data {

namespace {

struct KjvBook {
  const char* osis;
  const char* name;
  std::vector<int> verses;   // verses per chapter
};

// Verses per chapter of each book, KJV versification (SWORD canon_kjv): 66 books, 1,189 chapters,
// 23,145 Old Testament and 7,957 New Testament verses. Generated from the chapter markers of the
// engKJV2006eb module and checked equal for spaRV1909eb (see the header comment of sword.h).
const KjvBook kKjvBooks[66] = {
    {"Gen", "Genesis", {31,25,24,26,32,22,24,22,29,32,32,20,18,24,21,16,27,33,38,18,34,24,20,67,34,35,46,22,35,43,55,32,20,31,29,43,36,30,23,23,57,38,34,34,28,34,31,22,33,26}},
    {"Exod", "Exodus", {22,25,22,31,23,30,25,32,35,29,10,51,22,31,27,36,16,27,25,26,36,31,33,18,40,37,21,43,46,38,18,35,23,35,35,38,29,31,43,38}},
    {"Lev", "Leviticus", {17,16,17,35,19,30,38,36,24,20,47,8,59,57,33,34,16,30,37,27,24,33,44,23,55,46,34}},
    {"Num", "Numbers", {54,34,51,49,31,27,89,26,23,36,35,16,33,45,41,50,13,32,22,29,35,41,30,25,18,65,23,31,40,16,54,42,56,29,34,13}},
    {"Deut", "Deuteronomy", {46,37,29,49,33,25,26,20,29,22,32,32,18,29,23,22,20,22,21,20,23,30,25,22,19,19,26,68,29,20,30,52,29,12}},
    {"Josh", "Joshua", {18,24,17,24,15,27,26,35,27,43,23,24,33,15,63,10,18,28,51,9,45,34,16,33}},
    {"Judg", "Judges", {36,23,31,24,31,40,25,35,57,18,40,15,25,20,20,31,13,31,30,48,25}},
    {"Ruth", "Ruth", {22,23,18,22}},
    {"1Sam", "1 Samuel", {28,36,21,22,12,21,17,22,27,27,15,25,23,52,35,23,58,30,24,42,15,23,29,22,44,25,12,25,11,31,13}},
    {"2Sam", "2 Samuel", {27,32,39,12,25,23,29,18,13,19,27,31,39,33,37,23,29,33,43,26,22,51,39,25}},
    {"1Kgs", "1 Kings", {53,46,28,34,18,38,51,66,28,29,43,33,34,31,34,34,24,46,21,43,29,53}},
    {"2Kgs", "2 Kings", {18,25,27,44,27,33,20,29,37,36,21,21,25,29,38,20,41,37,37,21,26,20,37,20,30}},
    {"1Chr", "1 Chronicles", {54,55,24,43,26,81,40,40,44,14,47,40,14,17,29,43,27,17,19,8,30,19,32,31,31,32,34,21,30}},
    {"2Chr", "2 Chronicles", {17,18,17,22,14,42,22,18,31,19,23,16,22,15,19,14,19,34,11,37,20,12,21,27,28,23,9,27,36,27,21,33,25,33,27,23}},
    {"Ezra", "Ezra", {11,70,13,24,17,22,28,36,15,44}},
    {"Neh", "Nehemiah", {11,20,32,23,19,19,73,18,38,39,36,47,31}},
    {"Esth", "Esther", {22,23,15,17,14,14,10,17,32,3}},
    {"Job", "Job", {22,13,26,21,27,30,21,22,35,22,20,25,28,22,35,22,16,21,29,29,34,30,17,25,6,14,23,28,25,31,40,22,33,37,16,33,24,41,30,24,34,17}},
    {"Ps", "Psalms", {6,12,8,8,12,10,17,9,20,18,7,8,6,7,5,11,15,50,14,9,13,31,6,10,22,12,14,9,11,12,24,11,22,22,28,12,40,22,13,17,13,11,5,26,17,11,9,14,20,23,19,9,6,7,23,13,11,11,17,12,8,12,11,10,13,20,7,35,36,5,24,20,28,23,10,12,20,72,13,19,16,8,18,12,13,17,7,18,52,17,16,15,5,23,11,13,12,9,9,5,8,28,22,35,45,48,43,13,31,7,10,10,9,8,18,19,2,29,176,7,8,9,4,8,5,6,5,6,8,8,3,18,3,3,21,26,9,8,24,13,10,7,12,15,21,10,20,14,9,6}},
    {"Prov", "Proverbs", {33,22,35,27,23,35,27,36,18,32,31,28,25,35,33,33,28,24,29,30,31,29,35,34,28,28,27,28,27,33,31}},
    {"Eccl", "Ecclesiastes", {18,26,22,16,20,12,29,17,18,20,10,14}},
    {"Song", "Song of Solomon", {17,17,11,16,16,13,13,14}},
    {"Isa", "Isaiah", {31,22,26,6,30,13,25,22,21,34,16,6,22,32,9,14,14,7,25,6,17,25,18,23,12,21,13,29,24,33,9,20,24,17,10,22,38,22,8,31,29,25,28,28,25,13,15,22,26,11,23,15,12,17,13,12,21,14,21,22,11,12,19,12,25,24}},
    {"Jer", "Jeremiah", {19,37,25,31,31,30,34,22,26,25,23,17,27,22,21,21,27,23,15,18,14,30,40,10,38,24,22,17,32,24,40,44,26,22,19,32,21,28,18,16,18,22,13,30,5,28,7,47,39,46,64,34}},
    {"Lam", "Lamentations", {22,22,66,22,22}},
    {"Ezek", "Ezekiel", {28,10,27,17,17,14,27,18,11,22,25,28,23,23,8,63,24,32,14,49,32,31,49,27,17,21,36,26,21,26,18,32,33,31,15,38,28,23,29,49,26,20,27,31,25,24,23,35}},
    {"Dan", "Daniel", {21,49,30,37,31,28,28,27,27,21,45,13}},
    {"Hos", "Hosea", {11,23,5,19,15,11,16,14,17,15,12,14,16,9}},
    {"Joel", "Joel", {20,32,21}},
    {"Amos", "Amos", {15,16,15,13,27,14,17,14,15}},
    {"Obad", "Obadiah", {21}},
    {"Jonah", "Jonah", {17,10,10,11}},
    {"Mic", "Micah", {16,13,12,13,15,16,20}},
    {"Nah", "Nahum", {15,13,19}},
    {"Hab", "Habakkuk", {17,20,19}},
    {"Zeph", "Zephaniah", {18,15,20}},
    {"Hag", "Haggai", {15,23}},
    {"Zech", "Zechariah", {21,13,10,14,11,15,14,23,17,12,17,14,9,21}},
    {"Mal", "Malachi", {14,17,18,6}},
    {"Matt", "Matthew", {25,23,17,25,48,34,29,34,38,42,30,50,58,36,39,28,27,35,30,34,46,46,39,51,46,75,66,20}},
    {"Mark", "Mark", {45,28,35,41,43,56,37,38,50,52,33,44,37,72,47,20}},
    {"Luke", "Luke", {80,52,38,44,39,49,50,56,62,42,54,59,35,35,32,31,37,43,48,47,38,71,56,53}},
    {"John", "John", {51,25,36,54,47,71,53,59,41,42,57,50,38,31,27,33,26,40,42,31,25}},
    {"Acts", "Acts", {26,47,26,37,42,15,60,40,43,48,30,25,52,28,41,40,34,28,41,38,40,30,35,27,27,32,44,31}},
    {"Rom", "Romans", {32,29,31,25,21,23,25,39,33,21,36,21,14,23,33,27}},
    {"1Cor", "1 Corinthians", {31,16,23,21,13,20,40,13,27,33,34,31,13,40,58,24}},
    {"2Cor", "2 Corinthians", {24,17,18,18,21,18,16,24,15,18,33,21,14}},
    {"Gal", "Galatians", {24,21,29,31,26,18}},
    {"Eph", "Ephesians", {23,22,21,32,33,24}},
    {"Phil", "Philippians", {30,30,21,23}},
    {"Col", "Colossians", {29,23,25,18}},
    {"1Thess", "1 Thessalonians", {10,20,13,18,28}},
    {"2Thess", "2 Thessalonians", {12,17,18}},
    {"1Tim", "1 Timothy", {20,15,16,16,25,21}},
    {"2Tim", "2 Timothy", {18,26,17,22}},
    {"Titus", "Titus", {16,15,15}},
    {"Phlm", "Philemon", {25}},
    {"Heb", "Hebrews", {14,18,19,16,14,20,28,13,28,39,40,29,25}},
    {"Jas", "James", {27,26,18,17,20}},
    {"1Pet", "1 Peter", {25,25,22,19,14}},
    {"2Pet", "2 Peter", {21,22,18}},
    {"1John", "1 John", {10,29,24,21,21}},
    {"2John", "2 John", {13}},
    {"3John", "3 John", {14}},
    {"Jude", "Jude", {25}},
    {"Rev", "Revelation", {20,29,22,11,14,17,17,13,21,11,19,17,18,20,8,21,18,24,21,15,27,21}},
};

constexpr int kOtBooks = 39;

// Entry index -> verse for one testament, and the first verse index (canonical order) of it.
struct Layout {
  std::vector<VerseRef> refs;      // per entry; chapter == 0 marks a heading entry
  std::vector<int64_t> canonical;  // per entry: canonical verse index or -1
  // (book, chapter) -> entry of verse 1
  std::vector<std::vector<int64_t>> chapter_first;
};

const Layout& layout(Testament t) {
  static const std::array<Layout, 2> layouts = [] {
    std::array<Layout, 2> out;
    int64_t canonical = 0;
    for (int ti = 0; ti < 2; ++ti) {
      Layout& l = out[ti];
      l.refs.assign(2, VerseRef{0, 0, 0});   // module heading, testament heading
      l.canonical.assign(2, -1);
      const int b0 = ti == 0 ? 0 : kOtBooks, b1 = ti == 0 ? kOtBooks : 66;
      l.chapter_first.resize(66);
      for (int b = b0; b < b1; ++b) {
        l.refs.push_back(VerseRef{b, 0, 0});   // book intro
        l.canonical.push_back(-1);
        const auto& vs = kKjvBooks[b].verses;
        for (size_t c = 0; c < vs.size(); ++c) {
          l.refs.push_back(VerseRef{b, 0, 0});   // chapter heading
          l.canonical.push_back(-1);
          l.chapter_first[b].push_back(int64_t(l.refs.size()));
          for (int v = 1; v <= vs[c]; ++v) {
            l.refs.push_back(VerseRef{b, int(c) + 1, v});
            l.canonical.push_back(canonical++);
          }
        }
      }
    }
    return out;
  }();
  return layouts[int(t)];
}

const char* testament_name(Testament t) { return t == Testament::ot ? "ot" : "nt"; }

uint32_t le32(const std::string& s, size_t at) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data() + at);
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
uint16_t le16(const std::string& s, size_t at) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data() + at);
  return uint16_t(p[0] | p[1] << 8);
}

std::optional<std::string> read_file_if_exists(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return std::nullopt;
  std::ostringstream ss;
  ss << f.rdbuf();
  ATTN_CHECK(!f.bad(), "SWORD module: could not read ", p.string());
  return ss.str();
}

std::string trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && (s[a] == ' ' || s[a] == '\t' || s[a] == '\r')) ++a;
  while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t' || s[b - 1] == '\r')) --b;
  return std::string(s.substr(a, b - a));
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

// ---- versification ----

std::string VerseRef::str() const {
  ATTN_CHECK(book >= 0 && book < 66, "VerseRef: expected a book index 0..65, got ", book);
  return detail::cat(kKjvBooks[book].osis, " ", chapter, ":", verse);
}

int kjv_num_books() { return 66; }
const char* kjv_book_osis(int book) {
  ATTN_CHECK(book >= 0 && book < 66, "kjv_book_osis: expected a book index 0..65, got ", book);
  return kKjvBooks[book].osis;
}
const char* kjv_book_name(int book) {
  ATTN_CHECK(book >= 0 && book < 66, "kjv_book_name: expected a book index 0..65, got ", book);
  return kKjvBooks[book].name;
}
int kjv_num_chapters(int book) {
  ATTN_CHECK(book >= 0 && book < 66, "kjv_num_chapters: expected a book index 0..65, got ", book);
  return int(kKjvBooks[book].verses.size());
}
int kjv_num_verses(int book, int chapter) {
  const int n = kjv_num_chapters(book);
  ATTN_CHECK(chapter >= 1 && chapter <= n, "kjv_num_verses: ", kKjvBooks[book].name, " has chapters 1..", n,
             ", got ", chapter);
  return kKjvBooks[book].verses[size_t(chapter - 1)];
}
int64_t kjv_total_verses() { return 31102; }
int64_t kjv_num_entries(Testament t) { return int64_t(layout(t).refs.size()); }

std::pair<Testament, int64_t> kjv_entry_of(const VerseRef& ref) {
  const int nv = kjv_num_verses(ref.book, ref.chapter);
  ATTN_CHECK(ref.verse >= 1 && ref.verse <= nv, "kjv_entry_of: ", kKjvBooks[ref.book].name, " ", ref.chapter,
             " has verses 1..", nv, ", got ", ref.verse);
  const Testament t = ref.book < kOtBooks ? Testament::ot : Testament::nt;
  return {t, layout(t).chapter_first[size_t(ref.book)][size_t(ref.chapter - 1)] + ref.verse - 1};
}

std::optional<VerseRef> kjv_verse_at(Testament t, int64_t index) {
  const Layout& l = layout(t);
  if (index < 0 || index >= int64_t(l.refs.size()) || l.canonical[size_t(index)] < 0) return std::nullopt;
  return l.refs[size_t(index)];
}

std::optional<VerseRef> kjv_find(std::string_view book, int chapter, int verse) {
  const std::string want = lower(std::string(book));
  for (int b = 0; b < 66; ++b) {
    if (lower(kKjvBooks[b].osis) != want && lower(kKjvBooks[b].name) != want) continue;
    if (chapter < 1 || chapter > kjv_num_chapters(b)) return std::nullopt;
    if (verse < 1 || verse > kjv_num_verses(b, chapter)) return std::nullopt;
    return VerseRef{b, chapter, verse};
  }
  return std::nullopt;
}

// ---- module ----

SwordModule::Part SwordModule::parse_part(ZTextTestament files, const std::string& what) {
  Part p;
  ATTN_CHECK(files.bzs.size() % 12 == 0, what, ".bzs: expected a multiple of 12 bytes (12-byte block records), found ",
             files.bzs.size(), " bytes (truncated?)");
  ATTN_CHECK(files.bzv.size() % 10 == 0, what, ".bzv: expected a multiple of 10 bytes (10-byte entry records), found ",
             files.bzv.size(), " bytes (truncated?)");
  const size_t nb = files.bzs.size() / 12, nr = files.bzv.size() / 10;
  const int64_t max_inflated = max_inflated_bytes();
  p.blocks.resize(nb);
  for (size_t i = 0; i < nb; ++i) {
    Block b{le32(files.bzs, 12 * i), le32(files.bzs, 12 * i + 4), le32(files.bzs, 12 * i + 8)};
    ATTN_CHECK(uint64_t(b.offset) + b.compressed <= files.bzz.size(), what, ".bzs: block ", i, " spans bytes ",
               b.offset, "..", uint64_t(b.offset) + b.compressed, " of .bzz, which has only ", files.bzz.size(),
               " bytes");
    // Checked before anything is inflated or allocated: deflate inflates at most 1032:1 (the zlib
    // stream's own 6 bytes of header and trailer only lower that), and a block may not pass the
    // inflated-size ceiling.
    ATTN_CHECK(uint64_t(b.uncompressed) <= uint64_t(b.compressed) * 1032, what, ".bzs: block ", i, " claims ",
               b.uncompressed, " bytes uncompressed from ", b.compressed,
               " compressed bytes, more than zlib can produce (deflate inflates at most 1032:1)");
    ATTN_CHECK(int64_t(b.uncompressed) <= max_inflated, what, ".bzs: block ", i, " claims ", b.uncompressed,
               " bytes uncompressed, over the inflated-size limit of ", max_inflated,
               " bytes (ATTN_MAX_INFLATED_BYTES); raise it with ATTN_MAX_INFLATED_BYTES=<bytes> or "
               "attn::data::set_max_inflated_bytes(<bytes>)");
    p.blocks[i] = b;
  }
  p.records.resize(nr);
  for (size_t i = 0; i < nr; ++i) {
    Record r{le32(files.bzv, 10 * i), le32(files.bzv, 10 * i + 4), le16(files.bzv, 10 * i + 8)};
    if (r.length > 0) {
      ATTN_CHECK(r.block < nb, what, ".bzv: entry ", i, " refers to block ", r.block, ", expected < ", nb,
                 " (the number of blocks in .bzs)");
      ATTN_CHECK(uint64_t(r.start) + r.length <= p.blocks[r.block].uncompressed, what, ".bzv: entry ", i,
                 " spans bytes ", r.start, "..", uint64_t(r.start) + r.length, " of block ", r.block,
                 ", which has only ", p.blocks[r.block].uncompressed, " bytes");
    }
    p.records[i] = r;
  }
  p.bzz = std::move(files.bzz);
  return p;
}

SwordModule SwordModule::from_bytes(ZTextTestament ot, ZTextTestament nt, const std::string& name) {
  SwordModule m;
  m.name_ = name;
  m.parts_[0] = parse_part(std::move(ot), name + " ot");
  m.parts_[1] = parse_part(std::move(nt), name + " nt");
  return m;
}

SwordModule SwordModule::open_data_dir(const std::string& data_dir, const std::string& name) {
  namespace fs = std::filesystem;
  ATTN_CHECK(fs::is_directory(data_dir), "SWORD module: expected a data directory with ot/nt.{bzs,bzv,bzz}, ",
             data_dir, " is not a directory");
  ZTextTestament parts[2];
  int found_any = 0;
  for (int t = 0; t < 2; ++t) {
    const std::string stem = testament_name(Testament(t));
    std::optional<std::string> f[3];
    const char* ext[3] = {".bzs", ".bzv", ".bzz"};
    int found = 0;
    for (int k = 0; k < 3; ++k) {
      f[k] = read_file_if_exists(fs::path(data_dir) / (stem + ext[k]));
      found += f[k].has_value();
    }
    ATTN_CHECK(found == 0 || found == 3, "SWORD module ", data_dir, ": expected all of ", stem, ".bzs, ", stem,
               ".bzv, ", stem, ".bzz, found only ", found, " of them");
    if (found == 3) parts[t] = {std::move(*f[0]), std::move(*f[1]), std::move(*f[2])};
    found_any += found;
  }
  ATTN_CHECK(found_any > 0, "SWORD module: expected ot.bzs/.bzv/.bzz or nt.bzs/.bzv/.bzz in ", data_dir,
             ", found neither");
  return from_bytes(std::move(parts[0]), std::move(parts[1]), name.empty() ? data_dir : name);
}

SwordModule SwordModule::open(const std::string& sword_dir, const std::string& module) {
  namespace fs = std::filesystem;
  const fs::path mods = fs::path(sword_dir) / "mods.d";
  ATTN_CHECK(fs::is_directory(mods), "SWORD: expected a module library with mods.d/ in ", sword_dir,
             " (apt-get install sword-text-kjv sword-text-sparv)");
  std::vector<std::string> seen;
  std::vector<fs::path> confs;
  for (const auto& e : fs::directory_iterator(mods))
    if (e.path().extension() == ".conf") confs.push_back(e.path());
  std::sort(confs.begin(), confs.end());
  for (const auto& conf : confs) {
    std::ifstream f(conf);
    std::string line, section;
    std::string data_path, driver, compress, versification;
    bool found = false;
    while (std::getline(f, line)) {
      const std::string t = trim(line);
      if (t.empty() || t[0] == '#') continue;
      if (t.front() == '[' && t.back() == ']') {
        section = t.substr(1, t.size() - 2);
        seen.push_back(section);
        found = section == module;
        continue;
      }
      if (!found) continue;
      const size_t eq = t.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = trim(t.substr(0, eq)), value = trim(t.substr(eq + 1));
      if (key == "DataPath") data_path = value;
      else if (key == "ModDrv") driver = value;
      else if (key == "CompressType") compress = value;
      else if (key == "Versification") versification = value;
    }
    if (std::find(seen.begin(), seen.end(), module) == seen.end()) continue;
    const std::string where = detail::cat("SWORD module ", module, " (", conf.string(), ")");
    ATTN_CHECK(lower(driver) == "ztext", where, ": expected ModDrv=zText, found '", driver, "'");
    ATTN_CHECK(compress.empty() || compress == "ZIP", where, ": expected CompressType=ZIP, found '", compress, "'");
    ATTN_CHECK(versification.empty() || versification == "KJV", where,
               ": expected Versification=KJV (the only one implemented), found '", versification, "'");
    ATTN_CHECK(!data_path.empty(), where, ": expected a DataPath= entry, found none");
    return open_data_dir((fs::path(sword_dir) / data_path).string(), module);
  }
  std::string known;
  for (const auto& s : seen) known += (known.empty() ? "" : ", ") + s;
  fail("SWORD: no module named '", module, "' in ", mods.string(), " (found: ", known.empty() ? "none" : known,
       ")");
}

int64_t SwordModule::num_entries(Testament t) const { return int64_t(parts_[int(t)].records.size()); }

const std::string& SwordModule::inflate_block(Testament t, uint32_t block) const {
  const Part& p = parts_[int(t)];
  if (p.cached_block == int64_t(block)) return p.cached;
  const Block& b = p.blocks[block];
  const std::string what = detail::cat(name_, " ", testament_name(t), ".bzz: block ", block);
  std::string out(b.uncompressed, '\0');
  z_stream zs{};
  ATTN_CHECK(inflateInit(&zs) == Z_OK, what, ": zlib inflateInit failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(p.bzz.data() + b.offset));
  zs.avail_in = b.compressed;
  // One byte of room past the stated size, to tell "longer than stated" from "exactly right".
  std::string extra(1, '\0');
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = b.uncompressed;
  int rc = inflate(&zs, Z_FINISH);
  if (rc == Z_BUF_ERROR && zs.avail_out == 0) {   // output full before the stream ended: more?
    zs.next_out = reinterpret_cast<Bytef*>(extra.data());
    zs.avail_out = 1;
    rc = inflate(&zs, Z_FINISH);
    if (zs.avail_out == 0) {
      inflateEnd(&zs);
      fail(what, ": expected ", b.uncompressed, " bytes after inflating (as .bzs says), found more");
    }
  }
  const uint64_t produced = zs.total_out;
  const char* msg = zs.msg;
  inflateEnd(&zs);
  ATTN_CHECK(rc == Z_STREAM_END, what, ": expected a complete zlib stream of ", b.compressed, " bytes, found ",
             rc == Z_DATA_ERROR ? detail::cat("corrupt data (zlib: ", msg ? msg : "data error", ")")
             : rc == Z_NEED_DICT ? std::string("a stream that needs a preset dictionary")
                                 : detail::cat("a truncated stream (zlib code ", rc, ")"));
  ATTN_CHECK(produced == b.uncompressed, what, ": expected ", b.uncompressed,
             " bytes after inflating (as .bzs says), found ", produced);
  p.cached = std::move(out);
  p.cached_block = block;
  return p.cached;
}

std::string SwordModule::entry(Testament t, int64_t index) const {
  const Part& p = parts_[int(t)];
  ATTN_CHECK(index >= 0 && index < int64_t(p.records.size()), name_, " ", testament_name(t), ": entry ", index,
             " out of range, expected 0..", int64_t(p.records.size()) - 1);
  const Record& r = p.records[size_t(index)];
  if (r.length == 0) return {};
  const std::string& block = inflate_block(t, r.block);
  return block.substr(r.start, r.length);
}

std::string SwordModule::raw_verse(const VerseRef& ref) const {
  const auto [t, index] = kjv_entry_of(ref);
  ATTN_CHECK(index < num_entries(t), name_, ": ", ref.str(), " is entry ", index, " of ", testament_name(t),
             ", but the module has only ", num_entries(t), " entries there");
  return entry(t, index);
}

void SwordModule::for_each_verse(const std::function<void(const Verse&)>& f) const {
  for (int ti = 0; ti < 2; ++ti) {
    const Testament t = Testament(ti);
    const int64_t n = num_entries(t), want = kjv_num_entries(t);
    ATTN_CHECK(n == 0 || n == want, name_, " ", testament_name(t), ".bzv: expected ", want,
               " entries (KJV versification), found ", n);
    const Layout& l = layout(t);
    for (int64_t i = 0; i < n; ++i) {
      if (l.canonical[size_t(i)] < 0) continue;
      f(Verse{l.canonical[size_t(i)], l.refs[size_t(i)], entry(t, i)});
    }
  }
}

std::vector<Verse> SwordModule::verses() const {
  std::vector<Verse> out;
  out.reserve(size_t(kjv_total_verses()));
  for_each_verse([&](const Verse& v) { out.push_back(v); });
  return out;
}

// ---- OSIS -> text ----

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == ':' || c == '_' || c == '-' || c == '.';
}

// Tags whose boundaries separate words (everything else, e.g. <w>, joins: "<w>light</w>,").
bool separates_words(std::string_view name) {
  static const char* kBlock[] = {"div", "l", "lg", "lb", "p", "chapter", "title", "milestone", "q",
                                 "note", "br", "verse", "head", "item", "list", "table", "row", "cell"};
  for (const char* b : kBlock)
    if (name == b) return true;
  return false;
}

// Decodes the entity at s[i] == '&'; returns its length in bytes (0 if not a known, valid entity).
size_t decode_entity(std::string_view s, size_t i, std::string& out) {
  const size_t semi = s.find(';', i);
  if (semi == std::string_view::npos || semi - i > 12) return 0;
  const std::string_view body = s.substr(i + 1, semi - i - 1);
  static const std::pair<const char*, const char*> kNamed[] = {
      {"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""}, {"apos", "'"}};
  for (const auto& [n, v] : kNamed)
    if (body == n) {
      out += v;
      return semi - i + 1;
    }
  if (body.size() < 2 || body[0] != '#') return 0;
  const bool hex = body[1] == 'x' || body[1] == 'X';
  const std::string_view digits = body.substr(hex ? 2 : 1);
  if (digits.empty()) return 0;
  uint32_t cp = 0;
  for (char c : digits) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (hex && c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (hex && c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return 0;
    cp = cp * (hex ? 16 : 10) + uint32_t(d);
    if (cp > 0x10FFFF) return 0;
  }
  if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  text::append_utf8(out, char32_t(cp));
  return semi - i + 1;
}

}  // namespace

std::string strip_osis(std::string_view s) {
  std::string text;   // before whitespace collapsing
  text.reserve(s.size());
  std::vector<std::string> skipping;   // open elements whose content is dropped (note, title)
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '<') {
      const size_t end = s.find('>', i + 1);
      if (end == std::string_view::npos) {   // unterminated: literal text
        if (skipping.empty()) text.append(s.substr(i));
        break;
      }
      const std::string_view tag = s.substr(i + 1, end - i - 1);
      i = end + 1;
      size_t k = 0;
      const bool closing = !tag.empty() && tag[0] == '/';
      if (closing) k = 1;
      size_t name_end = k;
      while (name_end < tag.size() && is_name_char(tag[name_end])) ++name_end;
      const std::string_view name = tag.substr(k, name_end - k);
      const bool self_closing = !tag.empty() && tag.back() == '/';
      if (!skipping.empty()) {
        if (name == skipping.back()) {
          if (closing) skipping.pop_back();
          else if (!self_closing) skipping.emplace_back(name);
        }
        if (skipping.empty()) text += ' ';
        continue;
      }
      if (!closing && !self_closing) {
        const bool canonical_title =
            name == "title" && tag.find("canonical=\"true\"") != std::string_view::npos;
        if (name == "note" || (name == "title" && !canonical_title)) {
          skipping.emplace_back(name);
          continue;
        }
      }
      if (separates_words(name)) text += ' ';
      continue;
    }
    if (!skipping.empty()) {
      ++i;
      continue;
    }
    if (c == '&') {
      const size_t n = decode_entity(s, i, text);
      if (n > 0) {
        i += n;
        continue;
      }
    }
    // The pilcrow U+00B6 (c2 b6) marks a paragraph in the KJV: a word boundary, not text.
    if (static_cast<unsigned char>(c) == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0xB6) {
      text += ' ';
      i += 2;
      continue;
    }
    text += c;
    ++i;
  }
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;
  for (char c : text) {
    if (is_space(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += c;
  }
  return out;
}

}  // namespace attn::data

// Sentence pairs for translation: the Bible (KJV English -> Reina-Valera 1909 Spanish, verse by
// verse), tab-separated files, deterministic train/dev/test splits and synthetic tasks.
//
//   auto pairs = attn::data::load_bible_pairs();                 // 30,516 (src, tgt) pairs
//   auto splits = attn::data::split_pairs(pairs, 1000, 1000, /*seed=*/0);   // dev/test 1000 each
//   auto tsv = attn::data::read_tsv_pairs("train.tsv");          // "src<TAB>tgt" per line
//   auto dates = attn::data::make_synthetic_pairs("dates", 10000, 7);   // "March 25, 2021" -> "2021-03-25"
//
// Splits depend only on (number of pairs, counts, seed): each pair i gets the key Philox(seed, i)
// (core/rng.h), the pairs with the smallest keys form test, the next ones dev, the rest train; each
// split keeps the input order. No std::shuffle or std distributions (implementation-defined), so
// every machine makes the same split.
#pragma once
#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

namespace attn::data {

struct TextPair {
  std::string src, tgt;
  bool operator==(const TextPair&) const = default;
};

// Verse i of `src_module` with verse i of `tgt_module` (both KJV versification, SWORD zText in
// `sword_dir`), markup stripped with strip_osis; pairs where either side is empty are skipped.
// RV1909 keeps the Spanish verse numbering inside KJV slots: where the two traditions differ
// it leaves a KJV verse empty (18 verses: Num 12:16, Num 29:40, 1Sam 23:29, 2Sam 20:26,
// 2Chr 33:25, Job 35:16, Job 38:39-41, Job 40:20-24, Hos 11:12, Jonah 1:17, Acts 19:41,
// 2Cor 13:14) and the rest of that chapter, or the next one, is shifted by a verse ("MAS Jehová
// había prevenido un gran pez" sits in KJV's Jonah 2:1 slot). With `skip_shifted_chapters` (the
// default) every chapter holding an empty verse on either side is skipped, and also the next
// chapter when the empty verse is the last of its chapter: KJV -> RV1909 gives 30,516 pairs
// (31,084 when only the empty verses are skipped).
std::vector<TextPair> load_bible_pairs(const std::string& sword_dir = "/usr/share/sword",
                                       const std::string& src_module = "engKJV2006eb",
                                       const std::string& tgt_module = "spaRV1909eb",
                                       bool skip_shifted_chapters = true);

// One pair per line, "src<TAB>tgt". Blank lines (also whitespace-only) are skipped, a trailing CR
// is dropped (CRLF files), a UTF-8 BOM at the start is skipped. Errors name the source and the
// 1-based line: "<what> line 3: expected 'source<TAB>target', found no tab", "... found 2 tabs",
// "... invalid UTF-8 at byte offset 4 of the line: ...". Empty sides are allowed.
std::vector<TextPair> read_tsv_pairs(const std::string& path);
std::vector<TextPair> parse_tsv_pairs(std::string_view text, const std::string& what = "<tsv>");
std::vector<TextPair> read_tsv_pairs(std::istream& in, const std::string& what = "<stream>");
// Writes pairs as TSV (throws if a side contains a tab or a newline).
std::string format_tsv_pairs(const std::vector<TextPair>& pairs);

struct PairSplits {
  std::vector<TextPair> train, dev, test;
};
// Fractions of the number of pairs (rounded to the nearest count); dev_frac + test_frac <= 1.
PairSplits split_pairs(const std::vector<TextPair>& pairs, double dev_frac, double test_frac, uint64_t seed);
// Exact counts (the Bible: 1000 and 1000); dev_count + test_count <= pairs.size().
PairSplits split_pairs(const std::vector<TextPair>& pairs, int64_t dev_count, int64_t test_count, uint64_t seed);
// The permutation behind split_pairs: indices 0..n-1 ordered by their Philox key under `seed`.
std::vector<int64_t> split_order(int64_t n, uint64_t seed);

// Synthetic tasks, a pure function of (task, n, seed):
//   "copy"     source: 4..24 symbols drawn from a..z, target = source;
//   "reverse"  target = the source reversed;
//   "dates"    source: a date between 1900-01-01 and 2099-12-31 in one of these forms, target its
//              ISO form "2021-03-25":
//                "25th of March 2021"  "March 25, 2021"  "25/03/2021"  "Thursday, 25 March 2021"
//                "25 Mar 2021"  "Mar 25th, 2021"  "march 25 2021"  "2021/03/25"  "25.03.2021"
//                "Thu 25 March 2021"
// Unknown tasks throw attn::Error listing the known ones.
std::vector<TextPair> make_synthetic_pairs(const std::string& task, int64_t n, uint64_t seed);
std::vector<std::string> synthetic_task_names();

}  // namespace attn::data

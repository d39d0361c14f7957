// Translation pairs: Bible verses, TSV, splits, synthetic tasks (see include/attn/data/text_pairs.h).
#include "attn/data/text_pairs.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "attn/core/error.h"
#include "attn/core/rng.h"
#include "attn/data/sword.h"
#include "attn/text/utf8.h"

namespace attn::data {

// ---- Bible ----

std::vector<TextPair> load_bible_pairs(const std::string& sword_dir, const std::string& src_module,
                                       const std::string& tgt_module, bool skip_shifted_chapters) {
  const SwordModule src = SwordModule::open(sword_dir, src_module);
  const SwordModule tgt = SwordModule::open(sword_dir, tgt_module);
  const size_t n = static_cast<size_t>(kjv_total_verses());
  std::vector<std::string> src_text(n), tgt_text(n);
  std::vector<VerseRef> refs(n);
  src.for_each_verse([&](const Verse& v) {
    src_text[size_t(v.index)] = strip_osis(v.osis);
    refs[size_t(v.index)] = v.ref;
  });
  tgt.for_each_verse([&](const Verse& v) {
    tgt_text[size_t(v.index)] = strip_osis(v.osis);
    refs[size_t(v.index)] = v.ref;
  });
  // Chapters (book * 1000 + chapter) to skip: those where either side has an empty verse and,
  // when that verse ends its chapter, the next chapter too (its verses moved up by one or more).
  std::vector<uint8_t> skip(66 * 1000, 0);
  if (skip_shifted_chapters) {
    for (size_t i = 0; i < n; ++i) {
      if (!src_text[i].empty() && !tgt_text[i].empty()) continue;
      const VerseRef& r = refs[i];
      skip[size_t(r.book * 1000 + r.chapter)] = 1;
      if (r.verse == kjv_num_verses(r.book, r.chapter) && r.chapter < kjv_num_chapters(r.book))
        skip[size_t(r.book * 1000 + r.chapter + 1)] = 1;
    }
  }
  std::vector<TextPair> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (src_text[i].empty() || tgt_text[i].empty()) continue;
    if (skip[size_t(refs[i].book * 1000 + refs[i].chapter)]) continue;
    out.push_back({std::move(src_text[i]), std::move(tgt_text[i])});
  }
  return out;
}

// ---- TSV ----

namespace {

void parse_tsv_line(std::string_view line, int64_t lineno, const std::string& what, std::vector<TextPair>& out) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.find_first_not_of(" \t\r\f\v") == std::string_view::npos) return;
  if (auto p = text::find_utf8_problem(line)) {
    fail(what, " line ", lineno, ": ", p->message.substr(0, p->message.find(':')), " of the line:",
         p->message.substr(p->message.find(':') + 1));
  }
  const size_t tab = line.find('\t');
  ATTN_CHECK(tab != std::string_view::npos, what, " line ", lineno,
             ": expected 'source<TAB>target', found no tab");
  const size_t tabs = size_t(std::count(line.begin(), line.end(), '\t'));
  ATTN_CHECK(tabs == 1, what, " line ", lineno, ": expected 'source<TAB>target' (one tab), found ", tabs, " tabs");
  out.push_back({std::string(line.substr(0, tab)), std::string(line.substr(tab + 1))});
}

}  // namespace

std::vector<TextPair> parse_tsv_pairs(std::string_view text, const std::string& what) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  std::vector<TextPair> out;
  int64_t lineno = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    parse_tsv_line(text.substr(pos, nl - pos), ++lineno, what, out);
    pos = nl + 1;
  }
  return out;
}

std::vector<TextPair> read_tsv_pairs(std::istream& in, const std::string& what) {
  std::ostringstream ss;
  ss << in.rdbuf();
  ATTN_CHECK(!in.bad(), what, ": read error");
  return parse_tsv_pairs(ss.str(), what);
}

std::vector<TextPair> read_tsv_pairs(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  ATTN_CHECK(bool(f), "read_tsv_pairs: cannot open ", path);
  return read_tsv_pairs(f, path);
}

std::string format_tsv_pairs(const std::vector<TextPair>& pairs) {
  std::string out;
  for (size_t i = 0; i < pairs.size(); ++i) {
    for (const std::string* s : {&pairs[i].src, &pairs[i].tgt})
      ATTN_CHECK(s->find_first_of("\t\n\r") == std::string::npos, "format_tsv_pairs: pair ", i,
                 " contains a tab or a line break, which TSV cannot hold");
    out += pairs[i].src;
    out += '\t';
    out += pairs[i].tgt;
    out += '\n';
  }
  return out;
}

// ---- splits ----

std::vector<int64_t> split_order(int64_t n, uint64_t seed) {
  ATTN_CHECK(n >= 0, "split_order: expected n >= 0, got ", n);
  std::vector<std::pair<uint64_t, int64_t>> keyed(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    uint32_t r[4];
    philox4x32(seed, uint64_t(i), r);
    keyed[size_t(i)] = {(uint64_t(r[0]) << 32) | r[1], i};
  }
  std::sort(keyed.begin(), keyed.end());   // ties (2^-64) broken by index: total order
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[size_t(i)] = keyed[size_t(i)].second;
  return order;
}

PairSplits split_pairs(const std::vector<TextPair>& pairs, int64_t dev_count, int64_t test_count, uint64_t seed) {
  const int64_t n = int64_t(pairs.size());
  ATTN_CHECK(dev_count >= 0 && test_count >= 0 && dev_count + test_count <= n,
             "split_pairs: expected dev + test <= the number of pairs (", n, "), got dev ", dev_count, " and test ",
             test_count);
  const std::vector<int64_t> order = split_order(n, seed);
  // 0 = train, 1 = dev, 2 = test, then each split in input order.
  std::vector<uint8_t> which(static_cast<size_t>(n), 0);
  for (int64_t k = 0; k < test_count; ++k) which[size_t(order[size_t(k)])] = 2;
  for (int64_t k = test_count; k < test_count + dev_count; ++k) which[size_t(order[size_t(k)])] = 1;
  PairSplits s;
  s.train.reserve(size_t(n - dev_count - test_count));
  for (int64_t i = 0; i < n; ++i) {
    auto& dst = which[size_t(i)] == 0 ? s.train : which[size_t(i)] == 1 ? s.dev : s.test;
    dst.push_back(pairs[size_t(i)]);
  }
  return s;
}

PairSplits split_pairs(const std::vector<TextPair>& pairs, double dev_frac, double test_frac, uint64_t seed) {
  ATTN_CHECK(dev_frac >= 0 && test_frac >= 0 && dev_frac + test_frac <= 1.0,
             "split_pairs: expected fractions >= 0 with dev + test <= 1, got dev ", dev_frac, " and test ", test_frac);
  const double n = double(pairs.size());
  const int64_t test_count = int64_t(std::llround(test_frac * n));
  const int64_t dev_count = std::min(int64_t(std::llround(dev_frac * n)), int64_t(pairs.size()) - test_count);
  return split_pairs(pairs, dev_count, test_count, seed);
}

// ---- synthetic tasks ----

namespace {

const char* kMonths[12] = {"January", "February", "March",     "April",   "May",      "June",
                           "July",    "August",   "September", "October", "November", "December"};
const char* kWeekdays[7] = {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};

bool is_leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }
int days_in_month(int y, int m) {
  static const int d[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : d[m - 1];
}
// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
int64_t days_from_civil(int y, int m, int d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}
int weekday(int y, int m, int d) {   // 0 = Monday
  const int64_t z = days_from_civil(y, m, d);   // 1970-01-01 was a Thursday (3)
  return int(((z + 3) % 7 + 7) % 7);
}
std::string ordinal(int d) {
  const char* suf = (d % 100 >= 11 && d % 100 <= 13) ? "th" : d % 10 == 1 ? "st" : d % 10 == 2 ? "nd" : d % 10 == 3 ? "rd" : "th";
  return std::to_string(d) + suf;
}
std::string two(int v) {
  std::string s = std::to_string(v);
  if (s.size() < 2) s.insert(s.begin(), '0');
  return s;
}
std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

TextPair make_date(Generator& g) {
  const int y = 1900 + int(g.randint(200));
  const int m = 1 + int(g.randint(12));
  const int d = 1 + int(g.randint(days_in_month(y, m)));
  const std::string month = kMonths[m - 1], mon = month.substr(0, 3), wd = kWeekdays[weekday(y, m, d)];
  const std::string ys = std::to_string(y), ds = std::to_string(d);
  std::string src;
  switch (g.randint(10)) {
    case 0: src = ordinal(d) + " of " + month + " " + ys; break;
    case 1: src = month + " " + ds + ", " + ys; break;
    case 2: src = two(d) + "/" + two(m) + "/" + ys; break;
    case 3: src = wd + ", " + ds + " " + month + " " + ys; break;
    case 4: src = ds + " " + mon + " " + ys; break;
    case 5: src = mon + " " + ordinal(d) + ", " + ys; break;
    case 6: src = lower(month) + " " + ds + " " + ys; break;
    case 7: src = ys + "/" + two(m) + "/" + two(d); break;
    case 8: src = two(d) + "." + two(m) + "." + ys; break;
    default: src = wd.substr(0, 3) + " " + ds + " " + month + " " + ys; break;
  }
  return {src, ys + "-" + two(m) + "-" + two(d)};
}

std::string random_symbols(Generator& g) {
  const int64_t len = 4 + g.randint(21);
  std::string s(size_t(len), 'a');
  for (char& c : s) c = char('a' + g.randint(26));
  return s;
}

}  // namespace

std::vector<std::string> synthetic_task_names() { return {"copy", "reverse", "dates"}; }

std::vector<TextPair> make_synthetic_pairs(const std::string& task, int64_t n, uint64_t seed) {
  ATTN_CHECK(n >= 0, "make_synthetic_pairs: expected n >= 0, got ", n);
  const auto names = synthetic_task_names();
  if (std::find(names.begin(), names.end(), task) == names.end()) {
    fail("make_synthetic_pairs: unknown task '", task, "', expected one of copy, reverse, dates");
  }
  Generator g(seed);
  std::vector<TextPair> out;
  out.reserve(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    if (task == "dates") {
      out.push_back(make_date(g));
    } else {
      std::string s = random_symbols(g);
      std::string t = s;
      if (task == "reverse") std::reverse(t.begin(), t.end());
      out.push_back({std::move(s), std::move(t)});
    }
  }
  return out;
}

}  // namespace attn::data

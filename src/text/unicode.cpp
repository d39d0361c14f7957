// Character data lookups (binary search in the generated tables) and NFD / NFC (Unicode Standard
// Annex #15: full canonical decomposition, canonical ordering, canonical composition; Hangul by formula).
#include "attn/text/unicode.h"

#include <algorithm>

#include "unicode_tables.h"

namespace attn::text::unicode {

namespace {

namespace t = tables;

// Hangul syllables (Unicode 3.12, "Conjoining Jamo Behavior").
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

// The value of the run that holds cp: runs are sorted by their first code point, the first is 0.
template <class Run>
const Run& run_holding(const Run* runs, size_t n, char32_t cp) {
  const Run* it = std::upper_bound(runs, runs + n, cp, [](char32_t c, const Run& r) { return c < r.first; });
  return *(it - 1);
}

template <class Entry>
const Entry* find_entry(const Entry* rows, size_t n, char32_t cp) {
  const Entry* it = std::lower_bound(rows, rows + n, cp, [](const Entry& e, char32_t c) { return e.cp < c; });
  return it != rows + n && it->cp == cp ? it : nullptr;
}

// The primary composite of (a, b), or 0.
char32_t compose_pair(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  const t::CompEntry* end = t::kComp + t::kCompCount;
  const t::CompEntry* it = std::lower_bound(t::kComp, end, std::pair{a, b}, [](const t::CompEntry& e, auto key) {
    return e.first != key.first ? e.first < key.first : e.second < key.second;
  });
  return it != end && it->first == a && it->second == b ? it->composite : 0;
}

// Appends the full canonical decomposition of c (with its span).
void decompose_into(const TracedChar& c, std::vector<TracedChar>& out) {
  if (c.cp >= kSBase && c.cp < kSBase + kSCount) {
    const char32_t s = c.cp - kSBase;
    out.push_back({kLBase + s / kNCount, c.begin, c.end});
    out.push_back({kVBase + (s % kNCount) / kTCount, c.begin, c.end});
    if (s % kTCount != 0) out.push_back({kTBase + s % kTCount, c.begin, c.end});
    return;
  }
  if (const t::DecompEntry* d = find_entry(t::kDecomp, t::kDecompCount, c.cp)) {
    for (uint32_t k = 0; k < d->length; ++k) out.push_back({t::kDecompPool[d->offset + k], c.begin, c.end});
    return;
  }
  out.push_back(c);
}

// Canonical ordering: each run of non-starters sorted by combining class, stably.
void canonical_order(std::vector<TracedChar>& s) {
  size_t i = 0;
  while (i < s.size()) {
    if (combining_class(s[i].cp) == 0) { ++i; continue; }
    size_t j = i;
    while (j < s.size() && combining_class(s[j].cp) != 0) ++j;
    std::stable_sort(s.begin() + ptrdiff_t(i), s.begin() + ptrdiff_t(j), [](const TracedChar& a, const TracedChar& b) {
      return combining_class(a.cp) < combining_class(b.cp);
    });
    i = j;
  }
}

std::vector<TracedChar> trace_each(std::u32string_view s) {
  std::vector<TracedChar> v;
  v.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) v.push_back({s[i], uint32_t(i), uint32_t(i + 1)});
  return v;
}

std::u32string code_points_of(const std::vector<TracedChar>& v) {
  std::u32string s;
  s.reserve(v.size());
  for (const TracedChar& c : v) s.push_back(c.cp);
  return s;
}

}  // namespace

const char* unicode_version() { return t::kUnicodeVersion; }

Category category(char32_t cp) {
  if (cp > 0x10FFFF) return Category::Cn;
  return Category(run_holding(t::kCategoryRuns, t::kCategoryRunCount, cp).category);
}

std::string_view category_name(Category c) {
  static constexpr std::string_view kNames[] = {"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl",
                                                "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc",
                                                "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"};
  const auto i = size_t(c);
  return i < std::size(kNames) ? kNames[i] : "Cn";
}

uint8_t combining_class(char32_t cp) {
  if (cp > 0x10FFFF) return 0;
  return run_holding(t::kCccRuns, t::kCccRunCount, cp).ccc;
}

std::u32string lower(char32_t cp) {
  if (const t::LowerEntry* e = find_entry(t::kLower, t::kLowerCount, cp)) {
    std::u32string s(1, e->lower0);
    if (e->lower1) s.push_back(e->lower1);
    return s;
  }
  return std::u32string(1, cp);
}

bool is_space(char32_t cp) { return std::binary_search(t::kSpaces, t::kSpaces + t::kSpaceCount, cp); }

std::vector<TracedChar> nfd(const std::vector<TracedChar>& s) {
  std::vector<TracedChar> out;
  out.reserve(s.size());
  for (const TracedChar& c : s) decompose_into(c, out);
  canonical_order(out);
  return out;
}

// The composition of UAX #15's sample code: a character joins the last starter when nothing between
// them blocks it (no character of the same or a higher class, and no starter).
std::vector<TracedChar> nfc(const std::vector<TracedChar>& s) {
  std::vector<TracedChar> d = nfd(s);
  std::vector<TracedChar> out;
  out.reserve(d.size());
  size_t starter = 0;
  bool have_starter = false;
  int last_class = -1;   // class of the last character kept; -1: none yet
  for (const TracedChar& c : d) {
    const int cls = combining_class(c.cp);
    if (have_starter && (last_class < cls || last_class == 0)) {
      TracedChar& st = out[starter];
      if (const char32_t comp = compose_pair(st.cp, c.cp)) {
        st = {comp, std::min(st.begin, c.begin), std::max(st.end, c.end)};
        continue;
      }
    }
    if (cls == 0) {
      starter = out.size();
      have_starter = true;
    }
    last_class = cls;
    out.push_back(c);
  }
  return out;
}

std::u32string nfd(std::u32string_view s) { return code_points_of(nfd(trace_each(s))); }
std::u32string nfc(std::u32string_view s) { return code_points_of(nfc(trace_each(s))); }

}  // namespace attn::text::unicode

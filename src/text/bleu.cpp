// Corpus / sentence BLEU as sacreBLEU 2.x (see attn/text/bleu.h for the definition and sources).
#include "attn/text/bleu.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <unordered_map>

#include "attn/core/error.h"

namespace attn::text {
namespace {

// Decodes the UTF-8 code point at s[i] into cp and returns its byte length (1 for an invalid byte,
// which then stands for itself).
size_t decode_utf8(const std::string& s, size_t i, uint32_t& cp) {
  const auto b = static_cast<unsigned char>(s[i]);
  size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > s.size()) { cp = b; return 1; }
  cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
  for (size_t k = 1; k < len; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c >> 6) != 0x2) { cp = b; return 1; }
    cp = (cp << 6) | (c & 0x3F);
  }
  return len;
}

// Python's str.isspace() (what str.split() and str.rstrip() with no argument use).
bool py_isspace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

// Python's str.split() with no argument.
std::vector<std::string> py_split(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    const size_t n = decode_utf8(s, i, cp);
    if (py_isspace(cp)) {
      if (!cur.empty()) out.push_back(std::move(cur)), cur.clear();
    } else {
      cur.append(s, i, n);
    }
    i += n;
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

// Python's str.rstrip() with no argument.
std::string py_rstrip(const std::string& s) {
  size_t end = 0;   // one past the last non-space code point
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    const size_t n = decode_utf8(s, i, cp);
    i += n;
    if (!py_isspace(cp)) end = i;
  }
  return s.substr(0, end);
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out += to;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_period_comma(char c) { return c == '.' || c == ','; }
// [\{-\~\[-\` -\&\(-\+\:-\@\/]
bool is_13a_symbol(char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') || (c >= '(' && c <= '+') ||
         (c >= ':' && c <= '@') || c == '/';
}

// re.sub of a two-character pattern (first, second) -> first + mid + second + tail, scanning left
// to right without overlap, as Python's re.sub does; `head` goes before first.
template <class P1, class P2>
std::string sub_pair(const std::string& s, P1 first, P2 second, const char* head, const char* mid,
                     const char* tail) {
  std::string out;
  out.reserve(s.size() + s.size() / 2);
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && first(s[i]) && second(s[i + 1])) {
      out += head;
      out += s[i];
      out += mid;
      out += s[i + 1];
      out += tail;
      i += 2;
    } else {
      out += s[i++];
    }
  }
  return out;
}

using NgramCounts = std::unordered_map<std::string, int64_t>;

// All n-grams of orders 1..4 (tokens joined by one space: tokens contain no space) and the count.
NgramCounts extract_ngrams(const std::vector<std::string>& toks) {
  NgramCounts out;
  for (size_t n = 1; n <= size_t(kBleuMaxOrder); ++n) {
    for (size_t i = 0; i + n <= toks.size(); ++i) {
      std::string key = toks[i];
      for (size_t k = 1; k < n; ++k) key += ' ', key += toks[i + k];
      ++out[key];
    }
  }
  return out;
}

size_t order_of(const std::string& key) {
  size_t n = 1;
  for (char c : key) n += c == ' ';
  return n;
}

struct Stats {
  std::array<int64_t, kBleuMaxOrder> counts{}, totals{};
  int64_t sys_len = 0, ref_len = 0;
};

// One segment's statistics against its (non-empty) references (sacreBLEU's
// _extract_reference_info + _compute_segment_statistics).
void add_segment(Stats& st, const std::string& hyp, const std::vector<const std::string*>& refs) {
  NgramCounts ref_max;
  std::vector<int64_t> ref_lens;
  for (const std::string* r : refs) {
    const std::vector<std::string> toks = py_split(tokenize_13a(py_rstrip(*r)));
    ref_lens.push_back(int64_t(toks.size()));
    for (const auto& [key, c] : extract_ngrams(toks)) {
      int64_t& m = ref_max[key];
      m = std::max(m, c);
    }
  }
  const std::vector<std::string> htoks = py_split(tokenize_13a(py_rstrip(hyp)));
  const auto hyp_len = int64_t(htoks.size());
  // Closest reference length; ties go to the shorter one.
  int64_t closest_diff = -1, closest_len = -1;
  for (int64_t len : ref_lens) {
    const int64_t diff = std::llabs(hyp_len - len);
    if (closest_diff == -1 || diff < closest_diff) {
      closest_diff = diff;
      closest_len = len;
    } else if (diff == closest_diff && len < closest_len) {
      closest_len = len;
    }
  }
  st.sys_len += hyp_len;
  st.ref_len += closest_len;
  for (const auto& [key, c] : extract_ngrams(htoks)) {
    const size_t n = order_of(key) - 1;
    st.totals[n] += c;
    auto it = ref_max.find(key);
    if (it != ref_max.end()) st.counts[n] += std::min(c, it->second);
  }
}

}  // namespace

std::string tokenize_13a(const std::string& line_in) {
  std::string line = replace_all(line_in, "<skipped>", "");
  line = replace_all(line, "-\n", "");
  line = replace_all(line, "\n", " ");
  if (line.find('&') != std::string::npos) {
    line = replace_all(line, "&quot;", "\"");
    line = replace_all(line, "&amp;", "&");
    line = replace_all(line, "&lt;", "<");
    line = replace_all(line, "&gt;", ">");
  }
  line = " " + line + " ";
  // ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> " \1 "
  std::string s;
  s.reserve(line.size() * 2);
  for (char c : line) {
    if (is_13a_symbol(c)) {
      s += ' ';
      s += c;
      s += ' ';
    } else {
      s += c;
    }
  }
  const auto not_digit = [](char c) { return !is_digit(c); };
  s = sub_pair(s, not_digit, is_period_comma, "", " ", " ");                       // ([^0-9])([\.,])
  s = sub_pair(s, is_period_comma, not_digit, " ", " ", "");                       // ([\.,])([^0-9])
  s = sub_pair(s, is_digit, [](char c) { return c == '-'; }, "", " ", " ");        // ([0-9])(-)
  std::string out;
  for (const std::string& t : py_split(s)) {
    if (!out.empty()) out += ' ';
    out += t;
  }
  return out;
}

std::vector<std::string> tokens_13a(const std::string& line) { return py_split(tokenize_13a(line)); }

std::string BleuScore::format(int width) const {
  char buf[256];
  std::string prec;
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    std::snprintf(buf, sizeof buf, "%s%.1f", n ? "/" : "", precisions[size_t(n)]);
    prec += buf;
  }
  std::snprintf(buf, sizeof buf, "BLEU = %.*f %s (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)", width,
                score, prec.c_str(), bp, ratio(), static_cast<long long>(sys_len),
                static_cast<long long>(ref_len));
  return buf;
}

BleuScore compute_bleu(const std::array<int64_t, kBleuMaxOrder>& counts,
                       const std::array<int64_t, kBleuMaxOrder>& totals, int64_t sys_len, int64_t ref_len,
                       bool effective_order) {
  BleuScore r;
  r.counts = counts;
  r.totals = totals;
  r.sys_len = sys_len;
  r.ref_len = ref_len;
  r.bp = sys_len < ref_len ? (sys_len > 0 ? std::exp(1.0 - double(ref_len) / double(sys_len)) : 0.0) : 1.0;
  bool any = false;
  for (int64_t c : counts) any = any || c != 0;
  if (!any) return r;   // no match of any order: BLEU 0, precisions 0 (sacreBLEU #141)
  double smooth_mteval = 1.0;
  int eff_order = kBleuMaxOrder;
  for (int n = 1; n <= kBleuMaxOrder; ++n) {
    const auto i = size_t(n - 1);
    if (totals[i] == 0) break;
    if (effective_order) eff_order = n;
    if (counts[i] == 0) {
      smooth_mteval *= 2;   // "exp": 1/2, 1/4, ... of a count for successive orders without a match
      r.precisions[i] = 100.0 / (smooth_mteval * double(totals[i]));
    } else {
      r.precisions[i] = 100.0 * double(counts[i]) / double(totals[i]);
    }
  }
  double log_sum = 0;
  bool zero = false;
  for (int n = 0; n < eff_order; ++n) {
    if (r.precisions[size_t(n)] == 0.0) zero = true;   // sacreBLEU's my_log(0) = -9999999999
    else log_sum += std::log(r.precisions[size_t(n)]);
  }
  r.score = zero ? 0.0 : r.bp * std::exp(log_sum / eff_order);
  return r;
}

BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  return corpus_bleu(hyps, std::vector<std::vector<std::string>>{refs});
}

BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs) {
  ATTN_CHECK(!refs.empty(), "corpus_bleu: expected at least one reference stream, got none");
  for (size_t k = 0; k < refs.size(); ++k)
    ATTN_CHECK(refs[k].size() == hyps.size(), "corpus_bleu: expected ", hyps.size(),
               " references (one per hypothesis) in reference stream ", k, ", got ", refs[k].size());
  Stats st;
  std::vector<const std::string*> seg_refs;
  for (size_t i = 0; i < hyps.size(); ++i) {
    seg_refs.clear();
    for (const auto& stream : refs)
      if (!stream[i].empty()) seg_refs.push_back(&stream[i]);
    ATTN_CHECK(!seg_refs.empty(), "corpus_bleu: segment ", i, " has no reference (every stream's is empty)");
    add_segment(st, hyps[i], seg_refs);
  }
  return compute_bleu(st.counts, st.totals, st.sys_len, st.ref_len);
}

BleuScore sentence_bleu(const std::string& hyp, const std::vector<std::string>& refs) {
  std::vector<const std::string*> seg_refs;
  for (const auto& r : refs)
    if (!r.empty()) seg_refs.push_back(&r);
  ATTN_CHECK(!seg_refs.empty(), "sentence_bleu: expected at least one non-empty reference, got ", refs.size(),
             " empty ones");
  Stats st;
  add_segment(st, hyp, seg_refs);
  return compute_bleu(st.counts, st.totals, st.sys_len, st.ref_len, /*effective_order=*/true);
}

}  // namespace attn::text

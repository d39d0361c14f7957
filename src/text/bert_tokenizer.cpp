// BERT's WordPiece tokenizer: Hugging Face's BertTokenizer (BasicTokenizer + WordpieceTokenizer, and
// PreTrainedTokenizer's handling of special tokens), every character carrying its byte span.
#include "attn/text/bert_tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "attn/core/error.h"
#include "attn/core/json_config.h"
#include "attn/text/unicode.h"
#include "attn/text/utf8.h"

namespace attn::text {

namespace {

using unicode::Category;
using unicode::TracedChar;
using Chars = std::vector<TracedChar>;

constexpr size_t kMaxWordChars = 100;   // WordpieceTokenizer.max_input_chars_per_word

// The code points of valid UTF-8, each with its byte span.
Chars traced_utf8(std::string_view text, std::string_view what) {
  check_utf8(text, what);
  ATTN_CHECK(text.size() < std::numeric_limits<uint32_t>::max(), what, ": expected a text under 4 GiB, got ",
             text.size(), " bytes");
  Chars out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const size_t n = utf8_sequence_length(text, i);
    const auto* p = reinterpret_cast<const unsigned char*>(text.data() + i);
    char32_t cp = n == 1 ? p[0] : n == 2 ? (p[0] & 0x1F) : n == 3 ? (p[0] & 0x0F) : (p[0] & 0x07);
    for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (p[k] & 0x3F);
    out.push_back({cp, uint32_t(i), uint32_t(i + n)});
    i += n;
  }
  return out;
}

bool is_cjk_ideograph(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool is_bert_punctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
  const Category k = unicode::category(c);
  return k >= Category::Pc && k <= Category::Po;
}

bool is_bert_control(char32_t c) {
  if (c == U'\t' || c == U'\n' || c == U'\r') return false;
  return unicode::category(c) >= Category::Cc;
}

bool is_bert_whitespace(char32_t c) {
  return c == U' ' || c == U'\t' || c == U'\n' || c == U'\r' || unicode::category(c) == Category::Zs;
}

std::string chars_to_utf8(const Chars& s, size_t from = 0, size_t to = std::string::npos) {
  std::string out;
  to = std::min(to, s.size());
  for (size_t i = from; i < to; ++i) append_utf8(out, s[i].cp);
  return out;
}

bool special_matches_at(const Chars& s, size_t i, const std::u32string& token) {
  if (token.empty() || s.size() - i < token.size()) return false;
  for (size_t k = 0; k < token.size(); ++k)
    if (s[i + k].cp != token[k]) return false;
  return true;
}

bool chars_equal(const Chars& s, const std::u32string& token) {
  return s.size() == token.size() && special_matches_at(s, 0, token);
}

// BasicTokenizer._clean_text and _tokenize_chinese_chars, then NFC.
Chars bert_clean(const Chars& in, bool chinese) {
  Chars out;
  out.reserve(in.size());
  for (const TracedChar& c : in) {
    if (c.cp == 0 || c.cp == 0xFFFD || is_bert_control(c.cp)) continue;
    if (is_bert_whitespace(c.cp)) {
      out.push_back({U' ', c.begin, c.end});
    } else if (chinese && is_cjk_ideograph(c.cp)) {
      out.push_back({U' ', c.begin, c.end});
      out.push_back(c);
      out.push_back({U' ', c.begin, c.end});
    } else {
      out.push_back(c);
    }
  }
  return unicode::nfc(out);
}

// str.split(): the runs between whitespace.
std::vector<Chars> split_on_spaces(const Chars& s) {
  std::vector<Chars> words;
  Chars cur;
  for (const TracedChar& c : s) {
    if (unicode::is_space(c.cp)) {
      if (!cur.empty()) words.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) words.push_back(std::move(cur));
  return words;
}

// Every character lowered on its own: each keeps its span.
Chars lower_chars(const Chars& s) {
  Chars out;
  out.reserve(s.size());
  for (const TracedChar& c : s)
    for (char32_t l : unicode::lower(c.cp)) out.push_back({l, c.begin, c.end});
  return out;
}

Chars strip_mn(const Chars& s) {
  Chars out;
  for (const TracedChar& c : unicode::nfd(s))
    if (unicode::category(c.cp) != Category::Mn) out.push_back(c);
  return out;
}

// _run_split_on_punc, then the split on whitespace of " ".join(...).split().
void split_on_punctuation(const Chars& word, std::vector<Chars>& out) {
  Chars cur;
  for (const TracedChar& c : word) {
    if (is_bert_punctuation(c.cp) || unicode::is_space(c.cp)) {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
      if (!unicode::is_space(c.cp)) out.push_back(Chars{c});
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
}

std::string replace_every(std::string s, std::string_view from, std::string_view to) {
  std::string out;
  size_t i = 0;
  while (true) {
    const size_t j = s.find(from, i);
    if (j == std::string::npos) break;
    out.append(s, i, j - i);
    out += to;
    i = j + from.size();
  }
  out.append(s, i, std::string::npos);
  return out;
}

// str.strip(): whitespace off both ends.
std::string strip_py_spaces(const std::string& s) {
  const std::u32string cps = decode_utf8(s, "decoded text");
  size_t b = 0, e = cps.size();
  while (b < e && unicode::is_space(cps[b])) ++b;
  while (e > b && unicode::is_space(cps[e - 1])) --e;
  return encode_utf8(std::u32string_view(cps).substr(b, e - b));
}

std::string read_whole_file(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  ATTN_CHECK(f.good(), "BertTokenizer: cannot open the ", what, " '", path, "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string config_special(const nlohmann::json& j, const std::string& key, const std::string& fallback,
                       std::string_view what) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  const nlohmann::json& v = j[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  fail(what, ": key \"", key, "\": expected a string or an object with a string \"content\", found ", describe_json(v));
}

bool config_bool(const nlohmann::json& j, const std::string& key, bool fallback, std::string_view what) {
  if (!j.contains(key)) return fallback;
  ATTN_CHECK(j[key].is_boolean(), what, ": key \"", key, "\": expected true or false, found ", describe_json(j[key]));
  return j[key].get<bool>();
}

}  // namespace

BertTokenizerConfig BertTokenizerConfig::from_json(std::string_view json_text, std::string_view what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    fail(what, ": not valid JSON (", e.what(), ")");
  }
  ATTN_CHECK(j.is_object(), what, ": expected a JSON object, found ", describe_json(j));
  BertTokenizerConfig c;
  c.do_lower_case = config_bool(j, "do_lower_case", c.do_lower_case, what);
  if (j.contains("strip_accents") && !j["strip_accents"].is_null())
    c.strip_accents = config_bool(j, "strip_accents", false, what);
  c.tokenize_chinese_chars = config_bool(j, "tokenize_chinese_chars", c.tokenize_chinese_chars, what);
  c.clean_up_tokenization_spaces = config_bool(j, "clean_up_tokenization_spaces", c.clean_up_tokenization_spaces, what);
  ATTN_CHECK(config_bool(j, "do_basic_tokenize", true, what), what,
             ": do_basic_tokenize false (WordPiece on raw text) is not supported");
  if (j.contains("never_split") && !j["never_split"].is_null())
    ATTN_CHECK(j["never_split"].is_array() && j["never_split"].empty(), what,
               ": never_split is not supported (expected null or [], found ", describe_json(j["never_split"]), ")");
  if (j.contains("model_max_length")) {
    const nlohmann::json& m = j["model_max_length"];
    ATTN_CHECK(m.is_number() && m.get<double>() > 0, what,
               ": key \"model_max_length\": expected a positive number, found ", describe_json(m));
    const double v = m.get<double>();
    c.model_max_length = v >= 0x1p62 ? std::numeric_limits<int64_t>::max()
                         : m.is_number_integer() ? m.get<int64_t>() : int64_t(v);
  }
  c.unk_token = config_special(j, "unk_token", c.unk_token, what);
  c.sep_token = config_special(j, "sep_token", c.sep_token, what);
  c.pad_token = config_special(j, "pad_token", c.pad_token, what);
  c.cls_token = config_special(j, "cls_token", c.cls_token, what);
  c.mask_token = config_special(j, "mask_token", c.mask_token, what);
  return c;
}

std::vector<std::string> BertTokenizer::parse_vocab(std::string_view text, std::string_view what) {
  if (auto p = find_utf8_problem(text)) {
    size_t line = 1;
    for (size_t k = 0; k < p->offset; ++k)
      line += text[k] == '\n' || (text[k] == '\r' && (k + 1 >= text.size() || text[k + 1] != '\n'));
    fail(what, " line ", line, ": ", p->message);
  }
  std::vector<std::string> tokens;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && text[j] != '\n' && text[j] != '\r') ++j;
    tokens.emplace_back(text.substr(i, j - i));
    if (j < text.size() && text[j] == '\r' && j + 1 < text.size() && text[j + 1] == '\n') ++j;
    i = j + 1;
  }
  return tokens;
}

BertTokenizer BertTokenizer::from_files(const std::string& vocab_path, const std::string& config_path) {
  BertTokenizerConfig config;
  if (!config_path.empty())
    config = BertTokenizerConfig::from_json(read_whole_file(config_path, "config"), config_path);
  return BertTokenizer(parse_vocab(read_whole_file(vocab_path, "vocabulary"), vocab_path), config);
}

BertTokenizer::BertTokenizer(std::vector<std::string> vocab, BertTokenizerConfig config)
    : vocab_(std::move(vocab)), config_(std::move(config)) {
  std::vector<std::string> dups;
  for (size_t i = 0; i < vocab_.size(); ++i) {
    auto [it, fresh] = index_.emplace(vocab_[i], int64_t(i));
    if (!fresh && dups.size() < 10)
      dups.push_back(detail::cat("\"", vocab_[i], "\" (lines ", it->second + 1, " and ", i + 1, ")"));
  }
  if (!dups.empty()) {
    std::string list;
    for (const auto& d : dups) list += (list.empty() ? "" : ", ") + d;
    fail("BertTokenizer: expected each token once in the vocabulary, found duplicates: ", list);
  }
  specials_ = {config_.unk_token, config_.sep_token, config_.pad_token, config_.cls_token, config_.mask_token};
  std::string missing;
  for (const auto& s : specials_)
    if (!index_.count(s)) missing += (missing.empty() ? "" : ", ") + s;
  ATTN_CHECK(missing.empty(), "BertTokenizer: the vocabulary (", vocab_.size(),
             " tokens) lacks the special tokens ", missing);
  for (size_t i = 0; i < vocab_.size(); ++i)
    if (auto p = find_utf8_problem(vocab_[i])) fail("BertTokenizer: vocabulary line ", i + 1, ": ", p->message);
  for (const auto& s : specials_) {
    ATTN_CHECK(!s.empty(), "BertTokenizer: expected non-empty special tokens, got an empty one");
    special_cps_.push_back(decode_utf8(s));
  }
  unk_id_ = index_.at(config_.unk_token);
  sep_id_ = index_.at(config_.sep_token);
  pad_id_ = index_.at(config_.pad_token);
  cls_id_ = index_.at(config_.cls_token);
  mask_id_ = index_.at(config_.mask_token);
  for (const auto& v : vocab_) max_token_bytes_ = std::max(max_token_bytes_, v.size());
}

std::optional<int64_t> BertTokenizer::find(std::string_view token) const {
  auto it = index_.find(token);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

int64_t BertTokenizer::token_to_id(std::string_view token) const { return find(token).value_or(unk_id_); }

const std::string& BertTokenizer::id_to_token(int64_t id) const {
  ATTN_CHECK(id >= 0 && id < vocab_size(), "BertTokenizer: expected a token id in [0, ", vocab_size(), "), got ", id);
  return vocab_[size_t(id)];
}

bool BertTokenizer::is_special(int64_t id) const {
  return id == unk_id_ || id == sep_id_ || id == pad_id_ || id == cls_id_ || id == mask_id_;
}

// WordpieceTokenizer.tokenize of one word: greedy longest match, continuations as "##" + rest.
void BertTokenizer::wordpiece(const Chars& word, std::vector<BertToken>& out) const {
  const size_t n = word.size();
  if (n == 0) return;
  const auto span = [&](size_t from, size_t to) {
    uint32_t b = word[from].begin, e = word[from].end;
    for (size_t k = from; k < to; ++k) b = std::min(b, word[k].begin), e = std::max(e, word[k].end);
    return std::pair<size_t, size_t>(b, e);
  };
  if (n > kMaxWordChars) {
    const auto [b, e] = span(0, n);
    out.push_back({config_.unk_token, unk_id_, b, e});
    return;
  }
  // Byte offsets of each character in the word's UTF-8.
  const std::string utf8 = chars_to_utf8(word);
  std::vector<size_t> at(n + 1, 0);
  for (size_t k = 0; k < n; ++k) {
    std::string one;
    append_utf8(one, word[k].cp);
    at[k + 1] = at[k] + one.size();
  }
  std::vector<BertToken> pieces;
  size_t start = 0;
  std::string key;
  while (start < n) {
    size_t end = n;
    std::optional<int64_t> id;
    for (; end > start; --end) {
      const size_t bytes = at[end] - at[start] + (start > 0 ? 2 : 0);
      if (bytes > max_token_bytes_) continue;
      key.assign(start > 0 ? "##" : "");
      key.append(utf8, at[start], at[end] - at[start]);
      if ((id = find(key))) break;
    }
    if (!id) {
      const auto [b, e] = span(0, n);
      out.push_back({config_.unk_token, unk_id_, b, e});
      return;
    }
    const auto [b, e] = span(start, end);
    pieces.push_back({key, *id, b, e});
    start = end;
  }
  for (auto& p : pieces) out.push_back(std::move(p));
}

std::vector<BertToken> BertTokenizer::tokenize(std::string_view text) const {
  const Chars in = traced_utf8(text, "BertTokenizer: text");
  const std::vector<std::u32string>& specials = special_cps_;
  // PreTrainedTokenizer.tokenize: uncased, each character is lowered on its own except inside
  // special tokens written in the text (its regex "(special|...)|(.+?)", whose "." skips \n).
  Chars lowered;
  if (config_.do_lower_case) {
    lowered.reserve(in.size());
    for (size_t i = 0; i < in.size();) {
      const auto sp = std::find_if(specials.begin(), specials.end(),
                                   [&](const auto& s) { return special_matches_at(in, i, s); });
      if (sp != specials.end()) {
        lowered.insert(lowered.end(), in.begin() + ptrdiff_t(i), in.begin() + ptrdiff_t(i + sp->size()));
        i += sp->size();
      } else if (in[i].cp == U'\n') {
        lowered.push_back(in[i++]);
      } else {
        for (char32_t l : unicode::lower(in[i].cp)) lowered.push_back({l, in[i].begin, in[i].end});
        ++i;
      }
    }
  }
  const Chars& s = config_.do_lower_case ? lowered : in;
  std::vector<BertToken> out;
  Chars piece;
  const auto flush = [&] {
    if (!piece.empty()) basic(piece, specials, out);
    piece.clear();
  };
  // The cut at special tokens (its trie: the leftmost match, the longest there).
  for (size_t i = 0; i < s.size();) {
    size_t best = 0, which = 0;
    for (size_t k = 0; k < specials.size(); ++k)
      if (specials[k].size() > best && special_matches_at(s, i, specials[k])) best = specials[k].size(), which = k;
    if (best == 0) {
      piece.push_back(s[i++]);
      continue;
    }
    flush();
    out.push_back({specials_[which], token_to_id(specials_[which]), s[i].begin, s[i + best - 1].end});
    i += best;
  }
  flush();
  return out;
}

// BasicTokenizer.tokenize of the text between special tokens, then WordPiece per word.
void BertTokenizer::basic(const Chars& piece, const std::vector<std::u32string>& specials,
                          std::vector<BertToken>& out) const {
  std::vector<Chars> words;
  for (Chars& word : split_on_spaces(bert_clean(piece, config_.tokenize_chinese_chars))) {
    // never_split (all special tokens): kept as they are.
    if (std::any_of(specials.begin(), specials.end(), [&](const auto& sp) { return chars_equal(word, sp); })) {
      words.push_back(std::move(word));
      continue;
    }
    if (config_.do_lower_case) word = lower_chars(word);
    if (config_.strips_accents()) word = strip_mn(word);
    split_on_punctuation(word, words);
  }
  for (const Chars& w : words) wordpiece(w, out);
}

BertEncoding BertTokenizer::build(std::vector<BertToken> a, std::optional<std::vector<BertToken>> b,
                                  const BertEncodeOptions& o) const {
  const int64_t max_length = o.max_length >= 0 ? o.max_length : config_.model_max_length;
  const int64_t n_special = o.add_special_tokens ? (b ? 3 : 2) : 0;
  const int64_t la = int64_t(a.size()), lb = b ? int64_t(b->size()) : 0;
  const int64_t total = la + lb + n_special;
  BertEncoding e;
  if (total > max_length) {
    ATTN_CHECK(o.truncation, "BertTokenizer: the ", b ? "pair" : "text", " has ", total, " tokens",
               n_special ? " with [CLS] and [SEP]" : "", ", more than max_length ", max_length,
               " (turn truncation on in BertEncodeOptions, or shorten the text)");
    const int64_t remove = total - max_length;
    int64_t ra = 0, rb = 0;
    if (!b) {
      ATTN_CHECK(la > remove, "BertTokenizer: max_length ", max_length, " leaves no room for the text's tokens after ",
                 n_special, " special tokens");
      ra = remove;
    } else {
      ATTN_CHECK(remove <= la + lb, "BertTokenizer: max_length ", max_length, " is less than the ", n_special,
                 " special tokens of a pair");
      // longest_first: first the difference off the longer, the rest shared (the second gets the odd one).
      const int64_t first = std::min(std::abs(lb - la), remove), second = remove - first;
      if (la > lb) ra = first + second / 2, rb = second - second / 2;
      else ra = second / 2, rb = first + second - second / 2;
    }
    a.resize(size_t(la - ra));
    if (b) b->resize(size_t(lb - rb));
    e.truncated = remove;
    if (o.warn)
      std::fprintf(stderr, "attn: warning: BertTokenizer: %lld tokens cut to fit max_length %lld (truncation on)\n",
                   (long long)remove, (long long)max_length);
  }
  const auto push = [&](int64_t id, int64_t type, bool special, size_t begin, size_t end) {
    e.ids.push_back(id);
    e.token_type_ids.push_back(type);
    e.attention_mask.push_back(1);
    e.special_tokens_mask.push_back(special ? 1 : 0);
    e.offsets.emplace_back(begin, end);
  };
  if (o.add_special_tokens) push(cls_id_, 0, true, 0, 0);
  for (const BertToken& t : a) push(t.id, 0, false, t.begin, t.end);
  if (o.add_special_tokens) push(sep_id_, 0, true, 0, 0);
  if (b) {
    for (const BertToken& t : *b) push(t.id, 1, false, t.begin, t.end);
    if (o.add_special_tokens) push(sep_id_, 1, true, 0, 0);
  }
  return e;
}

namespace {

void pad_encoding(BertEncoding& e, size_t n, int64_t pad_id) {
  while (e.ids.size() < n) {
    e.ids.push_back(pad_id);
    e.token_type_ids.push_back(0);
    e.attention_mask.push_back(0);
    e.special_tokens_mask.push_back(1);
    e.offsets.emplace_back(0, 0);
  }
}

void pad_encodings(std::vector<BertEncoding>& batch, const BertEncodeOptions& o, int64_t max_length, int64_t pad_id) {
  size_t n = 0;
  if (o.padding == BertPadding::longest)
    for (const auto& e : batch) n = std::max(n, e.size());
  else if (o.padding == BertPadding::max_length)
    n = size_t(max_length);
  for (auto& e : batch) pad_encoding(e, n, pad_id);
}

}  // namespace

BertEncoding BertTokenizer::encode(std::string_view text, const BertEncodeOptions& options) const {
  std::vector<BertEncoding> one;
  one.push_back(build(tokenize(text), std::nullopt, options));
  pad_encodings(one, options, options.max_length >= 0 ? options.max_length : config_.model_max_length, pad_id_);
  return std::move(one[0]);
}

BertEncoding BertTokenizer::encode_pair(std::string_view a, std::string_view b,
                                        const BertEncodeOptions& options) const {
  std::vector<BertEncoding> one;
  one.push_back(build(tokenize(a), tokenize(b), options));
  pad_encodings(one, options, options.max_length >= 0 ? options.max_length : config_.model_max_length, pad_id_);
  return std::move(one[0]);
}

std::vector<BertEncoding> BertTokenizer::encode_batch(const std::vector<std::string>& texts,
                                                      const BertEncodeOptions& options) const {
  std::vector<BertEncoding> out;
  out.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    try {
      out.push_back(build(tokenize(texts[i]), std::nullopt, options));
    } catch (const Error& e) {
      fail("encode_batch: text ", i, ": ", e.what());
    }
  }
  pad_encodings(out, options, options.max_length >= 0 ? options.max_length : config_.model_max_length, pad_id_);
  return out;
}

std::vector<BertEncoding> BertTokenizer::encode_pair_batch(
    const std::vector<std::pair<std::string, std::string>>& pairs, const BertEncodeOptions& options) const {
  std::vector<BertEncoding> out;
  out.reserve(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    try {
      out.push_back(build(tokenize(pairs[i].first), tokenize(pairs[i].second), options));
    } catch (const Error& e) {
      fail("encode_pair_batch: pair ", i, ": ", e.what());
    }
  }
  pad_encodings(out, options, options.max_length >= 0 ? options.max_length : config_.model_max_length, pad_id_);
  return out;
}

BertInputs to_inputs(const std::vector<BertEncoding>& batch) {
  ATTN_CHECK(!batch.empty(), "to_inputs: expected at least one encoding, got an empty batch");
  const size_t t = batch[0].size();
  std::vector<int64_t> ids, types, mask;
  for (size_t i = 0; i < batch.size(); ++i) {
    const BertEncoding& e = batch[i];
    ATTN_CHECK(e.size() == t && e.token_type_ids.size() == t && e.attention_mask.size() == t,
               "to_inputs: expected every encoding to have ", t, " tokens (pad the batch), encoding ", i, " has ",
               e.size());
    ids.insert(ids.end(), e.ids.begin(), e.ids.end());
    types.insert(types.end(), e.token_type_ids.begin(), e.token_type_ids.end());
    mask.insert(mask.end(), e.attention_mask.begin(), e.attention_mask.end());
  }
  const Shape shape = {int64_t(batch.size()), int64_t(t)};
  return {Tensor::from_vector<int64_t>(ids, shape), Tensor::from_vector<int64_t>(types, shape),
          Tensor::from_vector<int64_t>(mask, shape)};
}

std::string BertTokenizer::convert_tokens_to_string(const std::vector<std::string>& tokens) const {
  std::string joined;
  for (size_t i = 0; i < tokens.size(); ++i) joined += (i ? " " : "") + tokens[i];
  return strip_py_spaces(replace_every(std::move(joined), " ##", ""));
}

std::string BertTokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  for (int64_t id : ids) {
    const std::string& t = id_to_token(id);
    if (skip_special_tokens && is_special(id)) continue;
    tokens.push_back(t);
  }
  std::string s = convert_tokens_to_string(tokens);
  if (!config_.clean_up_tokenization_spaces) return s;
  // PreTrainedTokenizerBase.clean_up_tokenization, in its order.
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
      {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) s = replace_every(std::move(s), from, to);
  return s;
}

}  // namespace attn::text

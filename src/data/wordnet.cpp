#include "attn/data/wordnet.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "attn/core/env.h"
#include "attn/core/error.h"

namespace attn::data {

namespace {

constexpr std::array<const char*, kWordNetLexfiles> kLexnames = {
    "adj.all",         "adj.pert",        "adv.all",         "noun.Tops",          "noun.act",
    "noun.animal",     "noun.artifact",   "noun.attribute",  "noun.body",          "noun.cognition",
    "noun.communication", "noun.event",   "noun.feeling",    "noun.food",          "noun.group",
    "noun.location",   "noun.motive",     "noun.object",     "noun.person",        "noun.phenomenon",
    "noun.plant",      "noun.possession", "noun.process",    "noun.quantity",      "noun.relation",
    "noun.shape",      "noun.state",      "noun.substance",  "noun.time",          "verb.body",
    "verb.change",     "verb.cognition",  "verb.communication", "verb.competition", "verb.consumption",
    "verb.contact",    "verb.creation",   "verb.emotion",    "verb.motion",        "verb.perception",
    "verb.possession", "verb.social",     "verb.stative",    "verb.weather",       "adj.ppl"};

constexpr std::array<const char*, 4> kPosFile = {"noun", "verb", "adj", "adv"};

struct Rule { const char* suffix; const char* ending; };
const std::vector<Rule>& rules(WordNetPos p) {
  static const std::vector<Rule> noun = {{"s", ""},    {"ses", "s"}, {"xes", "x"},  {"zes", "z"},
                                         {"ches", "ch"}, {"shes", "sh"}, {"men", "man"}, {"ies", "y"}};
  static const std::vector<Rule> verb = {{"s", ""},  {"ies", "y"}, {"es", "e"},  {"es", ""},
                                         {"ed", "e"}, {"ed", ""},   {"ing", "e"}, {"ing", ""}};
  static const std::vector<Rule> adj = {{"er", ""}, {"est", ""}, {"er", "e"}, {"est", "e"}};
  static const std::vector<Rule> none;
  switch (p) {
    case WordNetPos::noun: return noun;
    case WordNetPos::verb: return verb;
    case WordNetPos::adj: return adj;
    default: return none;
  }
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  return r;
}

std::string trim(std::string_view s, std::string_view chars) {
  const size_t b = s.find_first_not_of(chars);
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(chars);
  return std::string(s.substr(b, e - b + 1));
}

class LineReader {
 public:
  LineReader(const std::string& path, const char* what) : path_(path), in_(path) {
    if (!in_)
      fail("WordNet: cannot read ", what, " file ", path,
           " (expected Princeton WordNet 3.0's database; Debian's wordnet-base installs it, or set ATTN_WORDNET_DIR)");
  }
  bool next(std::string& line) { ++line_no_; return bool(std::getline(in_, line)); }
  [[noreturn]] void bad(const std::string& expected, const std::string& found) const {
    fail("WordNet: ", path_, " line ", line_no_, ": expected ", expected, ", found ", found);
  }

 private:
  std::string path_;
  std::ifstream in_;
  int64_t line_no_ = 0;
};

int64_t parse_number(const LineReader& r, const std::string& tok, int base, const char* what) {
  char* end = nullptr;
  const long long v = std::strtoll(tok.c_str(), &end, base);
  if (tok.empty() || *end != '\0' || v < 0) r.bad(what, "'" + tok + "'");
  return v;
}

void split_gloss(std::string_view gloss, Synset& s) {
  std::string def;
  size_t i = 0;
  while (i < gloss.size()) {
    if (gloss[i] == '"') {
      const size_t close = gloss.find('"', i + 1);
      if (close == std::string_view::npos) { def.append(gloss.substr(i)); break; }
      s.examples.emplace_back(gloss.substr(i + 1, close - i - 1));
      i = close + 1;
    } else {
      def += gloss[i++];
    }
  }
  s.definition = trim(def, " ;");
}

Synset parse_line(const LineReader& r, const std::string& line, WordNetPos pos) {
  const size_t bar = line.find(" | ");
  const std::string head = line.substr(0, bar == std::string::npos ? line.size() : bar);
  std::istringstream in(head);
  std::vector<std::string> tok;
  for (std::string t; in >> t;) tok.push_back(t);
  if (tok.size() < 4) r.bad("offset, lex_filenum, ss_type and w_cnt", "'" + head.substr(0, 60) + "'");
  Synset s;
  s.offset = uint32_t(parse_number(r, tok[0], 10, "an 8-digit synset offset"));
  s.lexfile = int(parse_number(r, tok[1], 10, "a lexicographer file number"));
  if (s.lexfile >= kWordNetLexfiles) r.bad("a lexicographer file number 0..44", tok[1]);
  s.pos = pos;
  if (tok[2].size() != 1 || std::string("nvasr").find(tok[2][0]) == std::string::npos)
    r.bad("ss_type n, v, a, s or r", "'" + tok[2] + "'");
  s.ss_type = tok[2][0];
  const int64_t w_cnt = parse_number(r, tok[3], 16, "a hexadecimal word count");
  if (w_cnt < 1 || 4 + 2 * size_t(w_cnt) > tok.size())
    r.bad(std::to_string(w_cnt) + " words with their lex_id", std::to_string(tok.size() - 4) + " fields");
  for (int64_t k = 0; k < w_cnt; ++k) {
    std::string w = tok[4 + 2 * size_t(k)];
    if (const size_t paren = w.find('('); paren != std::string::npos && pos == WordNetPos::adj) w.resize(paren);
    s.lemmas.push_back(std::move(w));
  }
  if (bar != std::string::npos) split_gloss(trim(std::string_view(line).substr(bar + 3), " \r"), s);
  return s;
}

void read_data(const std::string& dir, WordNetPos pos, std::vector<Synset>& out,
               std::unordered_set<std::string>& lemmas) {
  LineReader r(dir + "/data." + kPosFile[size_t(pos)], "data");
  std::string line;
  size_t n = 0;
  while (r.next(line)) {
    if (line.empty() || line.rfind("  ", 0) == 0) continue;   // licence header
    Synset s = parse_line(r, line, pos);
    for (const auto& l : s.lemmas) lemmas.insert(lower(l));
    out.push_back(std::move(s));
    ++n;
  }
  if (n == 0) fail("WordNet: ", dir, "/data.", kPosFile[size_t(pos)], " holds no synsets (expected WordNet 3.0's data file)");
}

void read_exceptions(const std::string& dir, WordNetPos pos, std::unordered_map<std::string, std::vector<std::string>>& exc) {
  LineReader r(dir + "/" + kPosFile[size_t(pos)] + ".exc", "exception");
  std::string line;
  while (r.next(line)) {
    std::istringstream in(line);
    std::string word, base;
    if (!(in >> word)) continue;
    auto& bases = exc[lower(word)];
    while (in >> base) bases.push_back(lower(base));
    if (bases.empty()) r.bad("an inflected form followed by its base forms", "'" + line + "'");
  }
}

}  // namespace

const char* wordnet_pos_name(WordNetPos p) { return kPosFile.at(size_t(p)); }

const char* wordnet_lexname(int lexfile) {
  if (lexfile < 0 || lexfile >= kWordNetLexfiles)
    fail("wordnet_lexname: expected a lexicographer file number 0..", kWordNetLexfiles - 1, ", got ", lexfile);
  return kLexnames[size_t(lexfile)];
}

std::string default_wordnet_dir() { return env::wordnet_dir(); }

WordNet WordNet::open(const std::string& dir) {
  if (!std::filesystem::is_directory(dir))
    fail("WordNet: no directory ", dir,
         " (expected Princeton WordNet 3.0's database; Debian's wordnet-base installs it, or set ATTN_WORDNET_DIR)");
  WordNet wn;
  for (int p = 0; p < 4; ++p) {
    read_data(dir, WordNetPos(p), wn.synsets_, wn.lemmas_[p]);
    read_exceptions(dir, WordNetPos(p), wn.exceptions_[p]);
  }
  return wn;
}

const WordNet& WordNet::shared(const std::string& dir) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<WordNet>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[dir];
  if (!slot) slot = std::make_unique<WordNet>(open(dir));
  return *slot;
}

bool WordNet::has_lemma(std::string_view lemma, WordNetPos pos) const {
  return lemmas_[size_t(pos)].count(lower(lemma)) > 0;
}

std::vector<std::string> WordNet::morphy(std::string_view word, WordNetPos pos) const {
  const std::string w = lower(word);
  std::vector<std::string> out;
  auto add = [&](const std::string& f) {
    if (has_lemma(f, pos) && std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
  };
  add(w);
  if (auto it = exceptions_[size_t(pos)].find(w); it != exceptions_[size_t(pos)].end()) {
    for (const auto& b : it->second) add(b);
    return out;
  }
  for (const Rule& rule : rules(pos)) {
    const std::string_view suffix = rule.suffix;
    if (w.size() > suffix.size() && w.compare(w.size() - suffix.size(), suffix.size(), suffix) == 0)
      add(w.substr(0, w.size() - suffix.size()) + rule.ending);
  }
  return out;
}

}  // namespace attn::data

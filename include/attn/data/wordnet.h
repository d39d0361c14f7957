// Princeton WordNet 3.0 as Debian's wordnet-base installs it (/usr/share/wordnet), read without
// libwordnet: every synset of data.noun / data.verb / data.adj / data.adv with its lexicographer
// file, lemmas, definition and example sentences, and morphy (base forms of inflected words).
//
//   auto wn = attn::data::WordNet::open();                  // ATTN_WORDNET_DIR or /usr/share/wordnet
//   for (const auto& s : wn.synsets())                      // 117,659 synsets
//     std::cout << attn::data::wordnet_lexname(s.lexfile)   // "noun.animal"
//               << " " << s.lemmas[0] << ": " << s.definition << "\n";
//   wn.morphy("geese", attn::data::WordNetPos::noun);        // {"goose"}
//
// Format (wndb(5WN)): a data line is `offset lex_filenum ss_type w_cnt word lex_id [word lex_id...]
// p_cnt [ptr...] [frames...] | gloss`; w_cnt is two hex digits, lex_id one hex digit, p_cnt three
// decimal digits, a pointer four fields; verb lines add `f_cnt + f_num w_num ...`. Lines starting
// with two spaces are the licence header. Adjective words may carry a syntactic marker, `(a)`,
// `(p)` or `(ip)`, which is dropped. Words keep their case and underscores (`Tom_Thumb`).
// The gloss holds the definition and, in double quotes, example sentences: the examples are the
// quoted strings, the definition what remains without them, trimmed of spaces and ';'.
//
// morphy follows WordNet's morph(3WN) as the usual reimplementations do: the word itself, then, for a
// word in the part of speech's exception list (noun.exc, verb.exc, ...), the listed base forms;
// otherwise the forms the suffix rules make (noun: -s, -ses>s, -xes>x, -zes>z, -ches>ch, -shes>sh,
// -men>man, -ies>y; verb: -s, -ies>y, -es>e, -es, -ed>e, -ed, -ing>e, -ing; adjective: -er, -est,
// -er>e, -est>e; adverbs none), each kept only when it is a lemma of that part of speech. Matching is
// on lower case.
//
// A missing directory or file says which package installs it; a malformed line names the file, the
// line number and what was expected.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace attn::data {

enum class WordNetPos { noun = 0, verb = 1, adj = 2, adv = 3 };
const char* wordnet_pos_name(WordNetPos p);   // "noun", "verb", "adj", "adv"

constexpr int kWordNetLexfiles = 45;
// The lexicographer file names by number (lexnames(5WN)): 0 "adj.all", 3 "noun.Tops", 5 "noun.animal",
// 38 "verb.motion", 44 "adj.ppl". Throws for a number outside 0..44.
const char* wordnet_lexname(int lexfile);

struct Synset {
  uint32_t offset = 0;              // byte offset in its data file, the synset's id within the POS
  WordNetPos pos = WordNetPos::noun;
  char ss_type = 'n';               // n, v, a, s (adjective satellite), r
  int lexfile = 0;                  // 0..44, see wordnet_lexname
  std::vector<std::string> lemmas;  // as written: underscores for spaces, case kept
  std::string definition;
  std::vector<std::string> examples;
};

std::string default_wordnet_dir();   // $ATTN_WORDNET_DIR, else /usr/share/wordnet

class WordNet {
 public:
  static WordNet open(const std::string& dir = default_wordnet_dir());
  // The database of `dir`, read once per process (thread-safe); what the BERT data pipelines use.
  static const WordNet& shared(const std::string& dir = default_wordnet_dir());

  const std::vector<Synset>& synsets() const { return synsets_; }   // noun, verb, adj, adv; file order
  // Base forms of `word` (any case) for `pos`, lower case, first found first, no duplicates; empty
  // when WordNet knows none.
  std::vector<std::string> morphy(std::string_view word, WordNetPos pos) const;
  bool has_lemma(std::string_view lemma, WordNetPos pos) const;      // lower-cased lookup

 private:
  std::vector<Synset> synsets_;
  std::unordered_set<std::string> lemmas_[4];                                  // lower case
  std::unordered_map<std::string, std::vector<std::string>> exceptions_[4];    // inflected -> bases
};

}  // namespace attn::data

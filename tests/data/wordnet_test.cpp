// WordNet 3.0 reader: the installed database (synset counts per part of speech, a known synset's
// lemmas, lexicographer file, definition and example), adjective markers, morphy against the
// exception lists and suffix rules, and malformed or missing files. Needs wordnet-base
// (scripts/install_deps.sh installs it).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "attn/core/error.h"
#include "attn/data/wordnet.h"
#include "errors.h"
#include "files.h"

using namespace attn;
using namespace attn::data;
using test::error_of;

namespace {

const WordNet& wordnet() {
  static const WordNet wn = WordNet::open();
  return wn;
}

const Synset& find(WordNetPos pos, uint32_t offset) {
  for (const auto& s : wordnet().synsets())
    if (s.pos == pos && s.offset == offset) return s;
  ADD_FAILURE() << "no synset " << offset;
  static Synset none;
  return none;
}

}  // namespace

TEST(WordNet, CountsPerPartOfSpeech) {
  size_t n[4] = {};
  int lexfile_seen[kWordNetLexfiles] = {};
  for (const auto& s : wordnet().synsets()) {
    ++n[size_t(s.pos)];
    ++lexfile_seen[s.lexfile];
    EXPECT_FALSE(s.lemmas.empty());
  }
  // `grep -vc '^  ' data.{noun,verb,adj,adv}` in WordNet 3.0.
  EXPECT_EQ(n[0], 82115u);
  EXPECT_EQ(n[1], 13767u);
  EXPECT_EQ(n[2], 18156u);
  EXPECT_EQ(n[3], 3621u);
  for (int k = 0; k < kWordNetLexfiles; ++k) EXPECT_GT(lexfile_seen[k], 0) << wordnet_lexname(k);
}

TEST(WordNet, KnownSynsets) {
  const Synset& dog = find(WordNetPos::noun, 2084071);
  EXPECT_EQ(dog.lemmas, (std::vector<std::string>{"dog", "domestic_dog", "Canis_familiaris"}));
  EXPECT_EQ(std::string(wordnet_lexname(dog.lexfile)), "noun.animal");
  EXPECT_EQ(dog.definition,
            "a member of the genus Canis (probably descended from the common wolf) that has been domesticated by "
            "man since prehistoric times; occurs in many breeds");
  EXPECT_EQ(dog.examples, (std::vector<std::string>{"the dog barked all night"}));
  // Adjective markers dropped; satellites are adjectives.
  const Synset& handy = find(WordNetPos::adj, 19731);
  EXPECT_EQ(handy.ss_type, 's');
  EXPECT_EQ(handy.lemmas, (std::vector<std::string>{"handy", "ready_to_hand"}));
  EXPECT_EQ(std::string(wordnet_lexname(handy.lexfile)), "adj.all");
  EXPECT_EQ(std::string(wordnet_lexname(38)), "verb.motion");
  EXPECT_NE(error_of([] { wordnet_lexname(45); }).find("0..44"), std::string::npos);
}

TEST(WordNet, Morphy) {
  const WordNet& wn = wordnet();
  using V = std::vector<std::string>;
  EXPECT_EQ(wn.morphy("dogs", WordNetPos::noun), V{"dog"});
  EXPECT_EQ(wn.morphy("Churches", WordNetPos::noun), V{"church"});
  EXPECT_EQ(wn.morphy("geese", WordNetPos::noun), V{"goose"});   // noun.exc
  EXPECT_EQ(wn.morphy("ran", WordNetPos::verb), V{"run"});       // verb.exc
  EXPECT_EQ(wn.morphy("running", WordNetPos::verb), V{"run"});
  EXPECT_EQ(wn.morphy("walked", WordNetPos::verb), V{"walk"});
  EXPECT_EQ(wn.morphy("hoped", WordNetPos::verb), (V{"hope", "hop"}));   // -ed > e, then -ed
  EXPECT_EQ(wn.morphy("better", WordNetPos::adj), (V{"better", "good", "well"}));
  EXPECT_EQ(wn.morphy("taller", WordNetPos::adj), V{"tall"});
  EXPECT_EQ(wn.morphy("dog", WordNetPos::noun), V{"dog"});
  EXPECT_TRUE(wn.morphy("xyzzyq", WordNetPos::noun).empty());
  EXPECT_TRUE(wn.morphy("quickly", WordNetPos::adv) == V{"quickly"});
  EXPECT_TRUE(wn.has_lemma("Canis_Familiaris", WordNetPos::noun));
  EXPECT_FALSE(wn.has_lemma("dog", WordNetPos::adv));
}

TEST(WordNet, BadDatabase) {
  const std::string dir = test::fresh_tmp_dir("attn_wordnet_test", "bad");
  EXPECT_NE(error_of([&] { WordNet::open(dir + "/none"); }).find("wordnet-base"), std::string::npos);
  EXPECT_NE(error_of([&] { WordNet::open(dir); }).find("data.noun"), std::string::npos);
  std::ofstream(dir + "/data.noun") << "  1 licence\n00001740 03 n zz entity 0 000 | thing\n";
  const std::string e = error_of([&] { WordNet::open(dir); });
  EXPECT_NE(e.find("data.noun line 2"), std::string::npos) << e;
  EXPECT_NE(e.find("hexadecimal word count"), std::string::npos) << e;
  std::ofstream(dir + "/data.noun") << "00001740 99 n 01 entity 0 000 | thing\n";
  EXPECT_NE(error_of([&] { WordNet::open(dir); }).find("0..44"), std::string::npos);
  std::ofstream(dir + "/data.noun") << "00001740 03 n 05 entity 0 000 | thing\n";
  EXPECT_NE(error_of([&] { WordNet::open(dir); }).find("5 words"), std::string::npos);
}

// The WordNet fine-tuning datasets (data/wordnet_tasks.h): the 45 lexicographer classes, the split by
// synset and its determinism, the pair task's negatives, the supersense matching rule (exact, morphy
// base forms, multi-word lemmas, longest first) and the dropped count, and an empty database. Needs
// wordnet-base (/usr/share/wordnet).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include "attn/data/text_classification.h"
#include "attn/data/wordnet_tasks.h"
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

Synset synset(WordNetPos pos, int lexfile, std::vector<std::string> lemmas) {
  Synset s;
  s.pos = pos;
  s.lexfile = lexfile;
  s.lemmas = std::move(lemmas);
  return s;
}

std::vector<std::string> tag_names(const std::vector<int64_t>& tags) {
  const std::vector<std::string> l = supersense_labels();
  std::vector<std::string> out;
  for (int64_t t : tags) out.push_back(l.at(size_t(t)));
  return out;
}

}  // namespace

TEST(WordNetTasks, SplitWordsAsBertsBasicTokenizer) {
  EXPECT_EQ(split_words("  The dog's  well-known bark, (loud)! "),
            (std::vector<std::string>{"The", "dog", "'", "s", "well", "-", "known", "bark", ",", "(", "loud", ")", "!"}));
  EXPECT_TRUE(split_words(" \t\n").empty());
  EXPECT_EQ(split_words("café"), std::vector<std::string>{"café"});   // bytes >= 128 stay in the word
}

TEST(WordNetTasks, LexnameHas45ClassesSplitBySynset) {
  const TextClassificationData d = wordnet_lexname_data(wordnet(), 0);
  ASSERT_EQ(d.labels.size(), 45u);
  EXPECT_EQ(d.labels[5], "noun.animal");
  EXPECT_EQ(d.labels[44], "adj.ppl");
  const size_t n = wordnet().synsets().size();
  EXPECT_EQ(d.train.size() + d.validation.size() + d.test.size(), n);
  EXPECT_EQ(d.train.size(), n * 8 / 10);
  EXPECT_EQ(d.validation.size(), n * 9 / 10 - n * 8 / 10);
  std::set<int64_t> seen;
  for (const auto& e : d.train) seen.insert(e.label);
  EXPECT_EQ(seen.size(), 45u) << "every class in the training split";
  // The labels are the synsets' lexicographer files: count them over all splits.
  std::map<int64_t, int64_t> want, got;
  for (const auto& s : wordnet().synsets()) ++want[s.lexfile];
  for (const auto* part : {&d.train, &d.validation, &d.test})
    for (const auto& e : *part) ++got[e.label];
  EXPECT_EQ(got, want);
}

TEST(WordNetTasks, DeterministicInTheSeed) {
  const TextClassificationData a = wordnet_lexname_data(wordnet(), 3), b = wordnet_lexname_data(wordnet(), 3);
  const TextClassificationData c = wordnet_lexname_data(wordnet(), 4);
  ASSERT_EQ(a.test.size(), b.test.size());
  size_t same_c = 0;
  for (size_t i = 0; i < a.test.size(); ++i) {
    EXPECT_EQ(a.test[i].text, b.test[i].text);
    same_c += a.test[i].text == c.test[i].text;
  }
  EXPECT_LT(same_c, a.test.size() / 100) << "another seed, another split";
  // Known first examples pin the order across platforms (splitmix64 Fisher-Yates).
  const std::vector<int64_t> p = seeded_permutation(5, 1);
  EXPECT_EQ(std::set<int64_t>(p.begin(), p.end()).size(), 5u);
  EXPECT_EQ(p, seeded_permutation(5, 1));
}

TEST(WordNetTasks, PairsHalfNegativesNeverOwnLemmas) {
  const TextClassificationData d = wordnet_pairs_data(wordnet(), 0);
  EXPECT_TRUE(d.pairs);
  EXPECT_EQ(d.labels, (std::vector<std::string>{"no", "yes"}));
  // The definition -> the synset's lemmas (lower case, spaces), to check each pair.
  std::multimap<std::string, std::set<std::string>> lemmas_of;
  for (const auto& s : wordnet().synsets()) {
    std::set<std::string> l;
    for (std::string x : s.lemmas) {
      for (char& ch : x) ch = ch == '_' ? ' ' : char(std::tolower(static_cast<unsigned char>(ch)));
      l.insert(x);
    }
    lemmas_of.emplace(s.definition, l);
  }
  for (const auto* part : {&d.train, &d.validation, &d.test}) {
    int64_t neg = 0;
    for (size_t i = 0; i < part->size(); ++i) {
      const TextExample& e = (*part)[i];
      neg += e.label == 0;
      std::string lemma = e.text_b;
      for (char& ch : lemma) ch = char(std::tolower(static_cast<unsigned char>(ch)));
      bool own = false;
      for (auto [it, end] = lemmas_of.equal_range(e.text); it != end; ++it) own |= it->second.count(lemma) > 0;
      if (e.label == 1) {
        EXPECT_TRUE(own) << e.text << " / " << e.text_b;
      }
      // (A negative may match another synset with the same definition; none has this one's lemma
      // when the definition is unique.)
      if (e.label == 0 && lemmas_of.count(e.text) == 1) {
        EXPECT_FALSE(own) << e.text << " / " << e.text_b;
      }
    }
    EXPECT_EQ(neg, int64_t(part->size()) / 2);
  }
}

TEST(WordNetTasks, SupersenseMatchingRule) {
  const WordNet& wn = wordnet();
  using V = std::vector<std::string>;
  const Synset dog = synset(WordNetPos::noun, 5, {"dog", "domestic_dog", "Canis_familiaris"});
  // Exact (any case), morphy's plural, and a multi-word lemma as a word sequence.
  EXPECT_EQ(tag_names(supersense_tags(wn, dog, split_words("Dogs and a Domestic dog, not a dogma"))),
            (V{"B-noun.animal", "O", "O", "B-noun.animal", "I-noun.animal", "O", "O", "O", "O"}));
  // Inflected multi-word lemma: morphy per word ("looked" -> "look").
  const Synset look_up = synset(WordNetPos::verb, 31, {"look_up", "look"});
  EXPECT_EQ(tag_names(supersense_tags(wn, look_up, split_words("she looked up the word"))),
            (V{"O", "B-verb.cognition", "I-verb.cognition", "O", "O"}));
  // Irregular forms through the exception lists; the longest lemma first at a position.
  const Synset go = synset(WordNetPos::verb, 38, {"go", "go_away"});
  EXPECT_EQ(tag_names(supersense_tags(wn, go, split_words("He went away; they go"))),
            (V{"O", "B-verb.motion", "I-verb.motion", "O", "O", "B-verb.motion"}));
  // Hyphenated lemmas are cut as the sentence is.
  const Synset wk = synset(WordNetPos::adj, 0, {"well-known"});
  EXPECT_EQ(tag_names(supersense_tags(wn, wk, split_words("a well-known fact"))),
            (V{"O", "B-adj.all", "I-adj.all", "I-adj.all", "O"}));
  EXPECT_EQ(tag_names(supersense_tags(wn, dog, split_words("cats only"))), (V{"O", "O"}));
}

TEST(WordNetTasks, SupersenseDataAndDroppedCount) {
  const TaggingData d = wordnet_supersense_data(wordnet(), 0);
  ASSERT_EQ(d.labels.size(), 91u);
  EXPECT_EQ(d.labels[0], "O");
  EXPECT_EQ(d.labels[1 + 2 * 5], "B-noun.animal");
  EXPECT_EQ(d.labels[2 + 2 * 5], "I-noun.animal");
  int64_t examples = 0;
  for (const auto& s : wordnet().synsets()) examples += int64_t(s.examples.size());
  const int64_t kept = int64_t(d.train.size() + d.validation.size() + d.test.size());
  EXPECT_EQ(d.sentences, examples);
  EXPECT_EQ(kept + d.dropped, examples);
  EXPECT_GT(d.dropped, 0);
  EXPECT_GT(kept, examples / 2) << "most example sentences use their lemma";
  for (const auto& s : d.train) {
    ASSERT_EQ(s.words.size(), s.tags.size());
    EXPECT_TRUE(std::any_of(s.tags.begin(), s.tags.end(), [](int64_t t) { return t != 0; }));
    // I- only continues a span of its type.
    for (size_t i = 0; i < s.tags.size(); ++i)
      if (s.tags[i] > 0 && s.tags[i] % 2 == 0) {
        ASSERT_TRUE(i > 0 && (s.tags[i - 1] == s.tags[i] || s.tags[i - 1] == s.tags[i] - 1));
      }
  }
  std::printf("  supersense: %lld sentences kept, %lld dropped\n", (long long)kept, (long long)d.dropped);
}

TEST(WordNetTasks, ErrorsNameExpectedAndFound) {
  EXPECT_NE(error_of([] { wordnet_task_data_kind("wordnet-glosses"); }).find("wordnet-lexname | wordnet-pairs | "
            "wordnet-supersense, got 'wordnet-glosses'"), std::string::npos);
  // A database of four synsets: too few to split (an empty split).
  const std::string dir = test::fresh_tmp_dir("attn_wordnet_tasks_test", "tiny");
  const std::pair<const char*, const char*> files[] = {
      {"data.noun", "00001740 03 n 01 entity 0 000 | that which exists\n"},
      {"data.verb", "00001740 29 v 01 breathe 0 000 01 + 02 00 | draw air into the lungs\n"},
      {"data.adj", "00001740 00 a 01 able 0 000 | having the power\n"},
      {"data.adv", "00001740 02 r 01 well 0 000 | in a good manner\n"}};
  for (const auto& [f, text] : files) std::ofstream(dir + "/" + f) << "  1 licence\n" << text;
  for (const char* f : {"noun.exc", "verb.exc", "adj.exc", "adv.exc"}) std::ofstream(dir + "/" + f) << "";
  const WordNet tiny = WordNet::open(dir);
  ASSERT_EQ(tiny.synsets().size(), 4u);
  const std::string e = error_of([&] { wordnet_lexname_data(tiny, 0); });
  EXPECT_NE(e.find("expected WordNet's synsets (at least 10), found 4"), std::string::npos) << e;
}

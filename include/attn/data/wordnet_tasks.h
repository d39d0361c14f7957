// Fine-tuning datasets made from WordNet 3.0 (data/wordnet.h): sentence classification, sentence pairs
// and sequence labelling, each split into train / validation / test BY SYNSET (no synset's text is in
// two splits), a pure function of the seed.
//
//   auto wn = data::WordNet::open();
//   data::TextClassificationData d = data::wordnet_lexname_data(wn, seed);   // gloss -> lexicographer file
//   d.labels.size();                                     // 45: "adj.all", ..., "adj.ppl" (wordnet_lexname)
//   d.train[0].text;  d.train[0].label;                  // "a member of the genus Canis ...", 5
//   data::TextClassificationData p = data::wordnet_pairs_data(wn, seed);     // (gloss, lemma) -> no | yes
//   data::TaggingData t = data::wordnet_supersense_data(wn, seed);           // example sentences, BIO tags
//   t.train[0].words;  t.train[0].tags;                  // {"the", "dog", "barked"}, {0, 11, 0} (label ids)
//   t.labels[11];                                        // "B-noun.animal"
//   t.dropped;                                           // example sentences without a match of the lemma
//
// Names (TrainConfig::data, `attn train --data`): "wordnet-lexname", "wordnet-pairs",
// "wordnet-supersense" (wordnet_task_data_kind() maps them; anything else is an error naming them).
//
// Split: the synsets (all 117,659, file order) are shuffled with the seed (splitmix64 Fisher-Yates,
// the same on every platform); the first 80% train, the next 10% validation, the rest test.
// - lexname: one example per synset: its definition, labelled by its lexicographer file (0..44).
// - pairs: one example per synset: text = the definition, text_b = a lemma (underscores as spaces);
//   in each split the examples alternate (in shuffled order) between a lemma of the synset ("yes",
//   label 1) and a lemma drawn (seeded) from another synset of the same split that is not one of the
//   synset's own lemmas (case-insensitive; "no", label 0): exactly half are negatives (rounded down).
// - supersense: one example per example sentence of each synset. The sentence is cut into words as
//   BERT's basic tokenizer does (whitespace, and every ASCII punctuation character a word of its own;
//   split_words). A lemma is cut the same way (underscores as spaces) into one or more words; a word
//   sequence matches it when each word equals the lemma's word at that place (case-insensitive) or
//   has it among its morphy base forms for the synset's part of speech (WordNet::morphy: "dogs" ->
//   "dog", "went" -> "go", "looked up" -> "look_up"). Matches are taken left to right, the longest
//   lemma first at each position, never overlapping; each is tagged B-<lexname> on its first word and
//   I-<lexname> on the others, every other word O. A sentence without a match is dropped (counted in
//   `dropped`). The label set is fixed: "O", then B- and I- of each of the 45 lexicographer files in
//   number order (91 labels), so every run and checkpoint of the task has the same ids.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attn/data/wordnet.h"

namespace attn::data {

// One example of a sentence (or sentence-pair) classification task.
struct TextExample {
  std::string text;
  std::string text_b;   // "" for a single sentence
  int64_t label = 0;
};

struct TextClassificationData {
  std::string name;                  // "wordnet-lexname", "wordnet-pairs"
  std::vector<std::string> labels;   // class names by id
  bool pairs = false;                // text_b is set
  std::vector<TextExample> train, validation, test;
};

// A sentence cut into words with one label id per word.
struct TaggedSentence {
  std::vector<std::string> words;
  std::vector<int64_t> tags;
};

struct TaggingData {
  std::string name;                  // "wordnet-supersense"
  std::vector<std::string> labels;   // "O", "B-adj.all", "I-adj.all", ... (BIO)
  std::vector<TaggedSentence> train, validation, test;
  int64_t sentences = 0;             // example sentences read (kept + dropped)
  int64_t dropped = 0;               // without a match of the synset's lemmas
};

enum class WordNetTask { lexname, pairs, supersense };
// "wordnet-lexname" | "wordnet-pairs" | "wordnet-supersense"; anything else: an attn::Error naming them.
WordNetTask wordnet_task_data_kind(const std::string& name);
const char* wordnet_task_data_name(WordNetTask t);

TextClassificationData wordnet_lexname_data(const WordNet& wn, uint64_t seed);
TextClassificationData wordnet_pairs_data(const WordNet& wn, uint64_t seed);
TaggingData wordnet_supersense_data(const WordNet& wn, uint64_t seed);

// Words as BERT's basic tokenizer cuts them: at whitespace, each ASCII punctuation character alone.
std::vector<std::string> split_words(std::string_view text);

// The BIO label ids of `words` for `synset` (the matching rule above); all 0 ("O") when nothing matches.
std::vector<int64_t> supersense_tags(const WordNet& wn, const Synset& synset, const std::vector<std::string>& words);

// The 91 BIO labels of the supersense task.
std::vector<std::string> supersense_labels();

}  // namespace attn::data

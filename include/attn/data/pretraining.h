// BERT pre-training data: an English corpus cut into documents of sentences, WordPiece ids, and the
// masked-LM + next-sentence instances that Google's create_pretraining_data.py (google-research/bert)
// builds from them, with its masking rule; static or dynamic masking; seeded and deterministic.
//
//   auto tok = text::BertTokenizer::from_files(vocab);
//   std::vector<data::TextDocument> docs = data::load_pretraining_documents("bible+wordnet");
//   std::vector<data::TokenDocument> ids = data::tokenize_documents(docs, tok);
//   data::DocumentSplit split = data::split_documents(int64_t(ids.size()), 0.05, seed);
//   auto train = data::create_instances(data::select_documents(ids, split.train), {}, data::special_ids(tok), seed);
//   data::MaskVocab mv = data::mask_vocab(tok);
//   Generator g(data::mask_seed(seed, epoch, i));                       // dynamic masking (static: epoch -1)
//   data::MaskedTokens m = data::mask_tokens(train[i].tokens, mv, {}, g);
//
// Corpus (`data`: "bible", "wordnet" or "bible+wordnet", the documents in that order):
//   bible    the King James Version (SWORD module engKJV2006eb, data/sword.h): a book is a document
//            (66), a verse a sentence (OSIS markup stripped with strip_osis; empty verses dropped).
//   wordnet  WordNet 3.0's glosses (data/wordnet.h): the synsets in WordNet's order (noun, verb, adj,
//            adv data files, file order), a document per run of up to 64 consecutive synsets of one
//            lexicographer file (noun.animal, verb.motion, ...: neighbouring synsets of a file are
//            related concepts), named "<lexname>#<k>"; per synset one sentence "lemma, lemma:
//            definition" (underscores as spaces) and one per example sentence.
// Sentences that tokenize to nothing and documents left without sentences are dropped.
//
// Instances (create_instances, as create_instances_from_document): per document, max_num_tokens =
// max_seq_length - 3; the target length is max_num_tokens, or with probability short_seq_prob a
// uniform integer in [2, max_num_tokens]. Sentences are gathered into a chunk until it reaches the
// target length or the document ends; segment A is the chunk's first a_end sentences (a_end uniform in
// [1, len - 1], 1 for a one-sentence chunk); B is the rest ("is next"), or, when the chunk has one
// sentence or with probability 1/2, sentences of another document (up to 10 draws to find a document
// other than this one) from a uniform start until B reaches target - len(A) ("random next"), and
// then the chunk's unused sentences are put back (the next chunk starts at them). truncate_seq_pair
// then cuts the longer of A and B (B on ties), one token at a time from the front or the back (1/2
// each), until len(A) + len(B) <= max_num_tokens. Tokens: [CLS] A [SEP] B [SEP]; segment ids 0 up
// to and including the first [SEP], 1 after. Each of dupe_factor passes draws its own segmentation.
// Randomness: document d of pass p uses Generator(instance_seed(seed, p, d)); instances are listed
// pass by pass, document by document.
//
// Masking (mask_tokens, as create_masked_lm_predictions): candidates are every position but [CLS]
// and [SEP]; with whole_word, a "##" piece joins the candidate before it (a word is masked whole or
// not at all). num_to_predict = min(max_predictions_per_seq, max(1, round(len(tokens) *
// masked_lm_prob))) (len counts [CLS] and the [SEP]s, as Google's). The candidates are shuffled and
// taken in order while they fit: a word that would exceed num_to_predict is skipped (so whole-word
// masking may predict fewer). Each chosen position becomes [MASK] with probability 0.8, else stays
// itself with probability 1/2, else a uniform token of the whole vocabulary. positions ascend; labels
// are the original ids. Static masking (mask_seed's epoch -1) fixes an instance's masks (each
// duplicate of a pass its own); dynamic masking draws them afresh for every epoch.
// Errors (attn::Error): an unknown data name, an unreadable source (naming the module or directory and
// the package that installs it), a corpus without any text, options out of range.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "attn/core/rng.h"
#include "attn/data/bert_batch.h"
#include "attn/text/bert_tokenizer.h"

namespace attn::data {

struct TextDocument {
  std::string name;                     // "bible:Genesis", "wordnet:noun.animal#3"
  std::vector<std::string> sentences;
};

struct TokenDocument {
  std::string name;
  std::vector<std::vector<int32_t>> sentences;   // WordPiece ids, no special tokens, none empty
};

struct PretrainingSources {
  std::string sword_dir = "/usr/share/sword";
  std::string wordnet_dir;   // "": default_wordnet_dir() (data/wordnet.h)
};

// The data names load_pretraining_documents takes.
std::vector<std::string> pretraining_data_names();   // bible, wordnet, bible+wordnet
std::vector<TextDocument> load_pretraining_documents(const std::string& data, const PretrainingSources& s = {});
std::vector<TextDocument> bible_documents(const std::string& sword_dir);
std::vector<TextDocument> wordnet_documents(const std::string& wordnet_dir);
constexpr int64_t kWordNetSynsetsPerDocument = 64;

// Every sentence tokenized (in parallel; the result does not depend on the thread count); empty
// sentences and documents dropped. An empty result is an error naming `what`.
std::vector<TokenDocument> tokenize_documents(const std::vector<TextDocument>& docs, const text::BertTokenizer& tok,
                                              const std::string& what = "corpus");

// A seeded document-level split: round(n * validation_fraction) documents (at least 1 when n >= 2,
// never all) in validation, picked by randperm(n, Generator(seed ^ 0x73706c6974)); each list ascending.
struct DocumentSplit {
  std::vector<int64_t> train, validation;
};
DocumentSplit split_documents(int64_t n, double validation_fraction, uint64_t seed);
std::vector<TokenDocument> select_documents(const std::vector<TokenDocument>& docs, const std::vector<int64_t>& which);

struct InstanceOptions {
  int64_t max_seq_length = 128;
  double short_seq_prob = 0.1;
  int64_t dupe_factor = 1;
};

struct SpecialIds {
  int32_t cls = 101, sep = 102, mask = 103;
};
SpecialIds special_ids(const text::BertTokenizer& tok);

struct PretrainingInstance {
  std::vector<int32_t> tokens;   // [CLS] A [SEP] B [SEP]
  int32_t a_end = 0;             // positions [0, a_end) are segment 0 ([CLS], A, the first [SEP])
  bool is_random_next = false;   // the NSP label (1 = B is not A's continuation)
};

uint64_t instance_seed(uint64_t seed, int64_t pass, int64_t document);
std::vector<PretrainingInstance> create_instances(const std::vector<TokenDocument>& docs, const InstanceOptions& o,
                                                  const SpecialIds& ids, uint64_t seed);
// The instances of document `index` (one pass), drawing from g.
std::vector<PretrainingInstance> instances_from_document(const std::vector<TokenDocument>& docs, int64_t index,
                                                         const InstanceOptions& o, const SpecialIds& ids, Generator& g);
// Cuts the longer of a and b (b on ties) from a random end until |a| + |b| <= max_num_tokens.
void truncate_seq_pair(std::vector<int32_t>& a, std::vector<int32_t>& b, int64_t max_num_tokens, Generator& g);

struct MaskingOptions {
  double masked_lm_prob = 0.15;
  int64_t max_predictions_per_seq = 20;
  bool whole_word = false;
};

// What masking needs of the vocabulary.
struct MaskVocab {
  SpecialIds ids;
  int64_t vocab_size = 0;
  std::vector<uint8_t> continuation;   // per id: 1 for "##" pieces
};
MaskVocab mask_vocab(const text::BertTokenizer& tok);

struct MaskedTokens {
  std::vector<int64_t> input_ids;             // the tokens with the masks applied
  std::vector<int64_t> positions, labels;     // ascending positions; the original ids there
};
int64_t num_to_predict(int64_t num_tokens, const MaskingOptions& o);
MaskedTokens mask_tokens(const std::vector<int32_t>& tokens, const MaskVocab& v, const MaskingOptions& o, Generator& g);
// The seed of instance `instance`'s masks: epoch -1 for static masking, the epoch for dynamic.
uint64_t mask_seed(uint64_t seed, int64_t epoch, int64_t instance);

// A training batch: the inputs padded to the longest instance, the masked positions as flat indices
// b * T + t into (B, T) with their labels (mlm_rows, mlm_labels (M) i64), and the NSP labels (B) i64.
struct PretrainingBatch {
  BertBatch inputs;
  Tensor mlm_rows, mlm_labels, nsp_labels;
  int64_t num_masked = 0;
};
// Instances `which` of `instances`, each masked with Generator(mask_seed(seed, epoch, index)).
PretrainingBatch make_pretraining_batch(const std::vector<PretrainingInstance>& instances,
                                        const std::vector<int64_t>& which, const MaskVocab& v,
                                        const MaskingOptions& o, uint64_t seed, int64_t epoch);

}  // namespace attn::data

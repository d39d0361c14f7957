// Tokenizers for translation: SentencePiece (unigram or BPE, trained in memory) and one id per
// code point (CharTokenizer, for synthetic tasks and tests). Both use the project-wide special ids
// of models/seq2seq.h: pad 0, unk 1, bos 2, eos 3.
//
//   auto sp = attn::text::SentencePieceTokenizer::train(sentences, 8000, "unigram", 1.0);
//   std::vector<int64_t> ids = sp->encode("In the beginning");   // no bos/eos
//   std::string s = sp->decode(ids);                               // skips pad/bos/eos
//   std::string bytes = sp->serialize();                           // stored in checkpoints
//   std::unique_ptr<attn::text::Tokenizer> back = attn::text::Tokenizer::deserialize(bytes);
//
// Contract: encode() throws attn::Error for invalid UTF-8 (the message names the byte offset)
// and maps characters it does not know to unk_id; it never crashes on any input. decode() throws
// for ids outside [0, vocab_size). serialize() output is "attn-tokenizer 1 <kind>\n" followed by
// the kind's payload (SentencePiece: the serialized ModelProto; char: the code points of ids 4..,
// in id order, as UTF-8), and deserialize() rebuilds either kind from it.
//
// SentencePiece training (0.1.97) runs in memory: sentences go in through a SentenceIterator and
// the model comes back as a serialized proto (no files). The normalization rule defaults to
// "identity" so that decode(encode(x)) == x for text whose whitespace is already single spaces
// (what strip_osis and the TSV reader produce); "nmt_nfkc" is SentencePiece's own default (it
// rewrites e.g. "…" as "..."). Training is deterministic for the same sentences and options,
// num_threads included (every sentence is used: no sampling, no shuffling). Measured on this
// machine (2 threads, other builds running, load average 8): the Bible pairs in both languages,
// 61,032 sentences, vocab 8000: unigram 23-25 s, BPE 7-9 s (tests/text/tokenizer_test.cpp).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace attn::text {

constexpr int64_t kPadId = 0, kUnkId = 1, kBosId = 2, kEosId = 3;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int64_t> encode(std::string_view text) const = 0;
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual std::string id_to_piece(int64_t id) const = 0;
  virtual std::string serialize() const = 0;
  virtual std::string kind() const = 0;   // "sentencepiece" | "char"
  int64_t pad_id() const { return kPadId; }
  int64_t unk_id() const { return kUnkId; }
  int64_t bos_id() const { return kBosId; }
  int64_t eos_id() const { return kEosId; }

  // Rebuilds a tokenizer of any kind from serialize()'s bytes (throws attn::Error on bad bytes).
  static std::unique_ptr<Tokenizer> deserialize(std::string bytes);
};

struct SentencePieceOptions {
  int64_t vocab_size = 8000;
  std::string model_type = "unigram";     // "unigram" | "bpe"
  double character_coverage = 1.0;        // 0.9995 for large alphabets
  std::string normalization = "identity"; // or "nmt_nfkc", "nfkc", ...
  int num_threads = 2;
  int64_t max_sentence_length = 4192;     // bytes; longer sentences are skipped by the trainer
};

class SentencePieceTokenizer : public Tokenizer {
 public:
  ~SentencePieceTokenizer() override;
  // Trains on `sentences` in memory. Throws attn::Error with SentencePiece's message on failure
  // (e.g. a vocab_size larger than the text supports).
  static std::unique_ptr<SentencePieceTokenizer> train(const std::vector<std::string>& sentences,
                                                       int64_t vocab_size, const std::string& model_type = "unigram",
                                                       double character_coverage = 1.0);
  static std::unique_ptr<SentencePieceTokenizer> train(const std::vector<std::string>& sentences,
                                                       const SentencePieceOptions& options);
  // From a .model file or a serialized ModelProto. The model must use pad 0, unk 1, bos 2, eos 3.
  static std::unique_ptr<SentencePieceTokenizer> load(const std::string& model_path);
  static std::unique_ptr<SentencePieceTokenizer> from_serialized_proto(std::string_view proto);

  std::vector<int64_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override;
  std::string id_to_piece(int64_t id) const override;
  std::string serialize() const override;
  std::string kind() const override { return "sentencepiece"; }
  const std::string& model_proto() const { return proto_; }   // what a .model file holds

 private:
  SentencePieceTokenizer();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string proto_;
};

class CharTokenizer : public Tokenizer {
 public:
  // One id per distinct code point of `texts` (ids 4.. in code point order), keeping code points
  // seen at least `min_count` times. Throws for invalid UTF-8.
  static std::unique_ptr<CharTokenizer> build(const std::vector<std::string>& texts, int64_t min_count = 1);
  // From explicit code points (ids 4.. in the given order; duplicates throw).
  explicit CharTokenizer(std::u32string alphabet);

  std::vector<int64_t> encode(std::string_view text) const override;
  // Unknown ids decode as U+2047 "⁇" (as SentencePiece does, without its spaces).
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return int64_t(alphabet_.size()) + 4; }
  std::string id_to_piece(int64_t id) const override;
  std::string serialize() const override;
  std::string kind() const override { return "char"; }
  const std::u32string& alphabet() const { return alphabet_; }

 private:
  std::u32string alphabet_;
  std::vector<std::pair<char32_t, int64_t>> index_;   // sorted by code point
};

}  // namespace attn::text

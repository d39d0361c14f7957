// BERT's WordPiece tokenizer, token for token Hugging Face's Python `BertTokenizer` (the "slow" one of
// transformers 4.x), from a vocab.txt and, when there is one, the model's tokenizer_config.json.
//
//   auto tok = attn::text::BertTokenizer::from_files("bert-base-uncased/vocab.txt",
//                                                    "bert-base-uncased/tokenizer_config.json");
//   attn::text::BertEncoding e = tok.encode("Hello world!");   // [CLS] hello world ! [SEP]
//   e.ids;              // 101 7592 2088 999 102
//   e.token_type_ids;   // 0 0 0 0 0
//   e.attention_mask;   // 1 1 1 1 1
//   e.offsets;          // {0,0} {0,5} {6,11} {11,12} {0,0}: byte spans of "Hello", "world", "!"
//   auto p = tok.encode_pair("The man went to the [MASK].", "He bought milk.");   // types 0... 1...
//   BertEncodeOptions o;  o.truncation = true;  o.max_length = 128;  o.padding = BertPadding::longest;
//   std::vector<BertEncoding> batch = tok.encode_batch({"a", "b c"}, o);   // padded to the longest
//   attn::text::BertInputs in = attn::text::to_inputs(batch);   // input_ids etc.: i64 (2, 4)
//   std::string s = tok.decode(e.ids);          // "[CLS] hello world! [SEP]"
//   tok.mask_id();  tok.token_to_id("hello");  tok.id_to_token(7592);
//
// The text goes through Hugging Face's steps, in its order (BertTokenizer.tokenize):
//   1. uncased (do_lower_case): every character is lowered on its own (Python's str.lower() of that
//      character, so "İ" -> "i̇"), except where a special token ([UNK] [SEP] [PAD] [CLS] [MASK]) is
//      written in the text; then the text is cut at the special tokens, which stay whole (one id each);
//   2. per piece between them: drop U+0000, U+FFFD and every character of category C* except \t \n \r;
//      whitespace (space, \t, \n, \r, Zs) becomes a space; spaces around CJK ideographs (U+4E00–9FFF,
//      3400–4DBF, 20000–2A6DF, 2A700–2B73F, 2B740–2B81F, 2B820–2CEAF, F900–FAFF, 2F800–2FA1F; not Hangul,
//      not kana); NFC; split on whitespace (Python's str.split());
//   3. per word: lower-case (uncased) and strip accents (NFD, drop Mn) when strip_accents is true, or
//      unset and uncased; split every punctuation character off (ASCII 33–47, 58–64, 91–96, 123–126
//      and every Unicode P* category);
//   4. WordPiece: greedy longest match from the left, continuations looked up as "##" + rest; a word
//      with no full match, or over 100 code points, becomes [UNK].
// Characters are categorized and normalized as Python 3.11's unicodedata does (text/unicode.h).
//
// Offsets are byte offsets [begin, end) into the UTF-8 text the token came from (for a pair, the
// second text for tokens of type 1): the smallest span of the input holding every character the token
// was made from (an accent stripped inside a word stays inside its span; "##hrer" of "Führer" spans
// "hrer"). [CLS], [SEP] and padding that encode adds have {0, 0}; so has nothing else.
//
// Errors (attn::Error): invalid UTF-8 (naming the byte offset); a vocabulary without one of the special
// tokens, or with a token twice (naming them and their lines); a text longer than max_length with
// truncation off; ids outside the vocabulary in decode. Truncation on prints a warning to stderr when
// it cuts (BertEncodeOptions::warn) and counts the tokens cut in BertEncoding::truncated.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "attn/core/tensor.h"
#include "attn/text/unicode.h"

namespace attn::text {

// What tokenizer_config.json may set (the keys Hugging Face reads for BertTokenizer). Keys it does not
// name are ignored, as transformers does with keys a tokenizer does not take.
struct BertTokenizerConfig {
  bool do_lower_case = true;
  std::optional<bool> strip_accents;   // unset (null): follows do_lower_case
  bool tokenize_chinese_chars = true;
  int64_t model_max_length = 512;      // the default max_length of encode
  bool clean_up_tokenization_spaces = true;
  std::string unk_token = "[UNK]", sep_token = "[SEP]", pad_token = "[PAD]", cls_token = "[CLS]",
              mask_token = "[MASK]";

  // From the JSON text of a tokenizer_config.json; `what` names it in errors. A special token may be a
  // string or an AddedToken object ({"content": "[MASK]", ...}); model_max_length above 2^62 (the
  // "no limit" 1e30 of some configs) reads as no limit.
  static BertTokenizerConfig from_json(std::string_view json_text, std::string_view what = "tokenizer_config.json");
  bool strips_accents() const { return strip_accents.value_or(do_lower_case); }
};

enum class BertPadding { none, longest, max_length };   // padding on the right

struct BertEncodeOptions {
  bool add_special_tokens = true;     // [CLS] A [SEP] (B [SEP])
  bool truncation = false;            // off: a text longer than max_length is an error
  int64_t max_length = -1;            // -1: the config's model_max_length
  BertPadding padding = BertPadding::none;
  bool warn = true;                   // print a warning to stderr when truncation cuts tokens
};

struct BertEncoding {
  std::vector<int64_t> ids, token_type_ids, attention_mask, special_tokens_mask;
  std::vector<std::pair<size_t, size_t>> offsets;   // byte [begin, end) per token (see above)
  int64_t truncated = 0;                            // tokens truncation removed
  size_t size() const { return ids.size(); }
};

// A batch as model inputs, i64 (B, T) each, as Hugging Face's return_tensors="pt" gives them. Every
// encoding must have the same length (pad them: BertPadding::longest); an empty batch is an error.
struct BertInputs {
  Tensor input_ids, token_type_ids, attention_mask;
};
BertInputs to_inputs(const std::vector<BertEncoding>& batch);

// One word piece of a text, before ids are joined into model inputs.
struct BertToken {
  std::string text;     // "hello", "##hrer", "[UNK]", "[MASK]"
  int64_t id;
  size_t begin, end;    // byte span in the text
};

class BertTokenizer {
 public:
  // vocab.txt: one token per line, the line number is the id (Python's universal newlines: \n, \r\n
  // or \r end a line). config_path "" reads no config (BertTokenizerConfig's defaults: uncased).
  static BertTokenizer from_files(const std::string& vocab_path, const std::string& config_path = "");
  BertTokenizer(std::vector<std::string> vocab, BertTokenizerConfig config = {});
  // The tokens of a vocab.txt's text, in id order; `what` names it in errors.
  static std::vector<std::string> parse_vocab(std::string_view text, std::string_view what = "vocab.txt");

  // The word pieces of one text with their ids and spans (Hugging Face's tokenize + ids).
  std::vector<BertToken> tokenize(std::string_view text) const;
  BertEncoding encode(std::string_view text, const BertEncodeOptions& options = {}) const;
  BertEncoding encode_pair(std::string_view a, std::string_view b, const BertEncodeOptions& options = {}) const;
  // BertPadding::longest pads every encoding to the batch's longest.
  std::vector<BertEncoding> encode_batch(const std::vector<std::string>& texts,
                                         const BertEncodeOptions& options = {}) const;
  std::vector<BertEncoding> encode_pair_batch(const std::vector<std::pair<std::string, std::string>>& pairs,
                                              const BertEncodeOptions& options = {}) const;

  // Hugging Face's decode: tokens joined by spaces, " ##" removed, ends stripped, then (when the config
  // says so) clean_up_tokenization (" ." -> ".", " n't" -> "n't", ...). Throws for ids outside the vocab.
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens = false) const;
  std::string convert_tokens_to_string(const std::vector<std::string>& tokens) const;

  int64_t vocab_size() const { return int64_t(vocab_.size()); }
  int64_t token_to_id(std::string_view token) const;   // unk_id() when absent
  std::optional<int64_t> find(std::string_view token) const;
  const std::string& id_to_token(int64_t id) const;     // throws outside [0, vocab_size)
  int64_t unk_id() const { return unk_id_; }
  int64_t cls_id() const { return cls_id_; }
  int64_t sep_id() const { return sep_id_; }
  int64_t pad_id() const { return pad_id_; }
  int64_t mask_id() const { return mask_id_; }
  bool is_special(int64_t id) const;
  const BertTokenizerConfig& config() const { return config_; }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::string> vocab_;
  std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> index_;
  BertTokenizerConfig config_;
  std::vector<std::string> specials_;   // Hugging Face's all_special_tokens order: unk sep pad cls mask
  std::vector<std::u32string> special_cps_;   // the same, as code points
  int64_t unk_id_ = 0, cls_id_ = 0, sep_id_ = 0, pad_id_ = 0, mask_id_ = 0;
  size_t max_token_bytes_ = 0;          // the longest vocabulary entry: longer pieces are not looked up

  BertEncoding build(std::vector<BertToken> a, std::optional<std::vector<BertToken>> b,
                     const BertEncodeOptions& options) const;
  void basic(const std::vector<unicode::TracedChar>& piece, const std::vector<std::u32string>& specials,
             std::vector<BertToken>& out) const;
  void wordpiece(const std::vector<unicode::TracedChar>& word, std::vector<BertToken>& out) const;
};

}  // namespace attn::text

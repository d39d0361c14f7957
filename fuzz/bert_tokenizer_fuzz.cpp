// libFuzzer target for text::BertTokenizer on arbitrary bytes: an uncased and a cased tokenizer over
// a small built-in vocabulary (special tokens, words, "##" continuations, CJK, jamo, accents).
//
//   scripts/fuzz.sh bert_tokenizer_fuzz   # or: build-fuzz/fuzz/bert_tokenizer_fuzz fuzz/corpus/bert_tokenizer_fuzz
//
// An attn::Error is the expected outcome for invalid UTF-8 (and only for it). Anything else is a
// finding: a sanitizer report, a crash, a leak, another exception, or a broken property:
//   * encode / encode_pair throw exactly when a text is not valid UTF-8;
//   * [CLS] first, [SEP] last, every id in [0, vocab_size), ids / types / mask / offsets the same length;
//   * every offset lies within its text, begin <= end, and a token of the text has begin < end;
//   * decode returns valid UTF-8;
//   * with truncation at max_length 8 (pairs too) and padding to it, exactly 8 ids.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attn/core/error.h"
#include "attn/text/bert_tokenizer.h"
#include "attn/text/utf8.h"

namespace {

using attn::text::BertEncoding;
using attn::text::BertTokenizer;

std::vector<std::string> vocab() {
  return {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "hello", "world", "##s", "the",
          "a", "##a", "!", ",", ".", "'", "t", "##t", "e", "##e", "é", "中", "文", "ᄋ", "##ᅡ", "##ᆫ", "σ", "##ς",
          "i", "##i", "1", "##2", "Hello", "É", "##́", "[", "]", "😀", "##x", "x"};
}

struct Tokenizers {
  BertTokenizer uncased, cased;
};

const Tokenizers& tokenizers() {
  static const Tokenizers t = [] {
    attn::text::BertTokenizerConfig cased;
    cased.do_lower_case = false;
    return Tokenizers{BertTokenizer(vocab()), BertTokenizer(vocab(), cased)};
  }();
  return t;
}

void check(const BertTokenizer& tok, const BertEncoding& e, std::string_view a, std::string_view b) {
  const size_t n = e.ids.size();
  if (n < 2 || e.ids.front() != tok.cls_id() || e.token_type_ids.size() != n || e.attention_mask.size() != n ||
      e.offsets.size() != n || e.special_tokens_mask.size() != n)
    __builtin_trap();
  for (size_t i = 0; i < n; ++i) {
    if (e.ids[i] < 0 || e.ids[i] >= tok.vocab_size()) __builtin_trap();
    const auto [begin, end] = e.offsets[i];
    const size_t limit = e.token_type_ids[i] == 0 ? a.size() : b.size();
    if (begin > end || end > limit) __builtin_trap();
    if (!e.special_tokens_mask[i] && begin == end) __builtin_trap();
  }
  if (e.attention_mask.back() == 1 && e.ids.back() != tok.sep_id()) __builtin_trap();
  if (!attn::text::is_valid_utf8(tok.decode(e.ids)) || !attn::text::is_valid_utf8(tok.decode(e.ids, true)))
    __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tokenizers();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const std::string_view a = in.substr(0, size / 2), b = in.substr(size / 2);
  const bool valid = attn::text::is_valid_utf8(in);
  const bool pair_valid = attn::text::is_valid_utf8(a) && attn::text::is_valid_utf8(b);
  attn::text::BertEncodeOptions cut;
  cut.truncation = true;
  cut.max_length = 8;
  cut.padding = attn::text::BertPadding::max_length;
  cut.warn = false;
  for (const BertTokenizer* tok : {&tokenizers().uncased, &tokenizers().cased}) {
    try {
      check(*tok, tok->encode(in), in, {});
      const BertEncoding e = tok->encode(in, cut);
      if (e.ids.size() != 8) __builtin_trap();
      check(*tok, e, in, {});
      if (!valid) __builtin_trap();
    } catch (const attn::Error&) {
      if (valid) __builtin_trap();   // only invalid UTF-8 may be refused
    }
    try {
      check(*tok, tok->encode_pair(a, b), a, b);
      const BertEncoding e = tok->encode_pair(a, b, cut);
      if (e.ids.size() != 8) __builtin_trap();
      check(*tok, e, a, b);
      if (!pair_valid) __builtin_trap();
    } catch (const attn::Error&) {
      if (pair_valid) __builtin_trap();
    }
  }
  return 0;
}

// libFuzzer target for text::Tokenizer::encode on arbitrary bytes: a CharTokenizer and a small
// SentencePiece unigram model, both built once at start-up from built-in English/Spanish text.
//
//   scripts/fuzz.sh tokenizer_fuzz       # or: build-fuzz/fuzz/tokenizer_fuzz fuzz/corpus/tokenizer_fuzz
//
// An attn::Error is the expected outcome for invalid UTF-8 (and only for it). Anything else is a
// finding: a sanitizer report, a crash, a leak, another exception, or a broken property:
//   * encode throws exactly when the input is not valid UTF-8;
//   * every id is in [4, vocab_size) or the unk id (encode adds no pad/bos/eos);
//   * the character tokenizer gives one id per code point and decode(encode(x)) == x when no id
//     is unk; decode of the SentencePiece ids returns valid UTF-8;
//   * a character tokenizer built from the input serializes and deserializes to the same encoding.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "attn/core/error.h"
#include "attn/text/tokenizer.h"
#include "attn/text/utf8.h"

namespace {

const char* kText[] = {
    "In the beginning God created the heaven and the earth.",
    "And the earth was without form, and void; and darkness was upon the face of the deep.",
    "And God said, Let there be light: and there was light.",
    "For God so loved the world, that he gave his only begotten Son.",
    "EN el principio crió Dios los cielos y la tierra.",
    "Y la tierra estaba desordenada y vacía, y las tinieblas estaban sobre la haz del abismo.",
    "Porque de tal manera amó Dios al mundo, que ha dado á su Hijo unigénito.",
    "¿Quién es éste? ¡Oh Jehová, cuánto se han multiplicado mis enemigos! Señor, añádenos fe.",
    "25th of March 2021 -> 2021-03-25; Thursday, 25 March 2021; 25/03/2021 (x + y) * 3 = 9",
};

struct Tokenizers {
  std::unique_ptr<attn::text::Tokenizer> chars, sp;
};

const Tokenizers& tokenizers() {
  static const Tokenizers t = [] {
    std::vector<std::string> s;
    for (int rep = 0; rep < 20; ++rep)
      for (const char* x : kText) s.push_back(rep % 2 ? x : std::string(x) + " " + kText[rep % 9]);
    Tokenizers out;
    out.chars = attn::text::CharTokenizer::build(s);
    attn::text::SentencePieceOptions o;
    o.vocab_size = 120;
    o.num_threads = 1;
    // Through serialize/deserialize, so the fuzzed model is the one a checkpoint would restore.
    out.sp = attn::text::Tokenizer::deserialize(attn::text::SentencePieceTokenizer::train(s, o)->serialize());
    return out;
  }();
  return t;
}

void check_ids(const std::vector<int64_t>& ids, int64_t vocab) {
  for (int64_t id : ids)
    if (!(id == attn::text::kUnkId || (id >= 4 && id < vocab))) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tokenizers();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const bool valid = attn::text::is_valid_utf8(in);
  const Tokenizers& t = tokenizers();
  for (const auto* tok : {t.chars.get(), t.sp.get()}) {
    std::vector<int64_t> ids;
    try {
      ids = tok->encode(in);
    } catch (const attn::Error&) {
      if (valid) __builtin_trap();   // only invalid UTF-8 may be refused
      continue;
    }
    if (!valid) __builtin_trap();
    check_ids(ids, tok->vocab_size());
    const std::string back = tok->decode(ids);
    if (!attn::text::is_valid_utf8(back)) __builtin_trap();
    if (tok == t.chars.get()) {
      if (ids.size() != attn::text::decode_utf8(in).size()) __builtin_trap();
      bool unk = false;
      for (int64_t id : ids) unk |= id == attn::text::kUnkId;
      if (!unk && back != in) __builtin_trap();
    }
  }
  if (valid) {
    const auto own = attn::text::CharTokenizer::build({std::string(in)});
    const auto again = attn::text::Tokenizer::deserialize(own->serialize());
    const auto ids = own->encode(in);
    if (again->encode(in) != ids || own->decode(ids) != in) __builtin_trap();
  }
  return 0;
}

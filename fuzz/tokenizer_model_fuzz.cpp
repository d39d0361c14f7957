// libFuzzer target for text::Tokenizer::deserialize: the tokenizer bytes a translation checkpoint
// carries (base64 inside its metadata), from any source. Also io::base64_decode on the same bytes.
//
//   scripts/fuzz.sh tokenizer_model_fuzz # or: build-fuzz/fuzz/tokenizer_model_fuzz fuzz/corpus/tokenizer_model_fuzz
//
// Seeds: serialized char tokenizers and small SentencePiece models (unigram and BPE, one with a
// normalization trie), written by fuzz/write_seeds.cpp.
// An attn::Error is the expected outcome for malformed input. Anything else is a finding: a
// sanitizer report, a crash (SentencePiece is not instrumented: reading outside a crafted model
// shows as a crash or as garbage ids), a leak, another exception, or a broken property:
//   * a tokenizer that deserializes encodes fixed texts (ASCII, Spanish, CJK, NUL, long runs) to ids
//     in [0, vocab_size), decodes any of its ids to valid UTF-8, and names every piece;
//   * it serializes to bytes that deserialize to a tokenizer with the same encodings;
//   * base64_decode accepts exactly the canonical encodings: encode(decode(x)) == x.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "attn/core/error.h"
#include "attn/io/base64.h"
#include "attn/text/tokenizer.h"
#include "attn/text/utf8.h"

namespace {

const char* kTexts[] = {
    "In the beginning God created the heaven and the earth.",
    "¿Quién es éste? ¡Oh Jehová! año ñandú … ﬁve ＦＵＬＬ ½",
    "日本語のテキスト 😀 \xF4\x8F\xBF\xBF",
    "",
    "    many     spaces\t\tand\nnew\rlines    ",
    "a",
};

std::vector<std::vector<int64_t>> encodings(const attn::text::Tokenizer& t) {
  std::vector<std::vector<int64_t>> out;
  for (const char* s : kTexts) out.push_back(t.encode(s));
  out.push_back(t.encode(std::string_view("nul\0byte", 8)));
  return out;
}

void check(const attn::text::Tokenizer& t) {
  const int64_t vocab = t.vocab_size();
  if (vocab < 4) __builtin_trap();   // pad, unk, bos and eos exist
  const auto all = encodings(t);
  for (const auto& ids : all) {
    for (int64_t id : ids)
      if (id < 0 || id >= vocab) __builtin_trap();
    if (!attn::text::is_valid_utf8(t.decode(ids))) __builtin_trap();
  }
  std::vector<int64_t> every;
  for (int64_t id = 0; id < vocab && id < 300; ++id) {
    every.push_back(id);
    (void)t.id_to_piece(id);
  }
  if (!attn::text::is_valid_utf8(t.decode(every))) __builtin_trap();
  const auto again = attn::text::Tokenizer::deserialize(t.serialize());
  if (again->kind() != t.kind() || again->vocab_size() != vocab || encodings(*again) != all) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  try {
    const std::string bytes = attn::io::base64_decode(in, "<fuzz>");
    if (bytes.size() > in.size() || attn::io::base64_encode(bytes) != in) __builtin_trap();
  } catch (const attn::Error&) {
  }
  std::unique_ptr<attn::text::Tokenizer> t;
  try {
    t = attn::text::Tokenizer::deserialize(in);
  } catch (const attn::Error&) {
    return 0;
  }
  try {
    check(*t);
  } catch (const attn::Error&) {
    // SentencePiece refused to encode or decode with this model (an error status): a clean refusal.
  }
  return 0;
}

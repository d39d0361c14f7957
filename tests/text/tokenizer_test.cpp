// Tokenizers (SentencePiece unigram/BPE trained in memory, characters) and the UTF-8 helpers they
// stand on: round trips in English and Spanish, unknown characters -> unk, invalid UTF-8 -> an
// error naming the offset, serialize/deserialize, training determinism and training time.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <set>

#include "attn/core/error.h"
#include "attn/data/text_pairs.h"
#include "attn/text/tokenizer.h"
#include "attn/text/utf8.h"
#include "errors.h"

using namespace attn;
using test::error_of;
using namespace attn::text;

namespace {

const std::vector<data::TextPair>& bible() {
  static const auto pairs = data::load_bible_pairs();
  return pairs;
}

// Every 5th verse pair, both languages: ~12k sentences.
std::vector<std::string> training_sentences() {
  std::vector<std::string> s;
  for (size_t i = 0; i < bible().size(); i += 5) {
    s.push_back(bible()[i].src);
    s.push_back(bible()[i].tgt);
  }
  return s;
}

}  // namespace

TEST(Utf8, ValidAndInvalid) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("año ¿qué? \xF0\x9F\x98\x80 \xEF\xBF\xBF"));
  EXPECT_TRUE(is_valid_utf8(std::string("a\0b", 3)));
  const std::pair<std::string, std::string> bad[] = {
      {"ab\x80", "invalid UTF-8 at byte offset 2: bytes 80 (a continuation byte with no lead byte)"},
      {"\xC0\xAF", "invalid UTF-8 at byte offset 0: bytes c0 (an overlong 2-byte lead byte (c0/c1 are never valid))"},
      {"x\xE0\x80\x80",
       "invalid UTF-8 at byte offset 1: bytes e0 80 (expected a continuation byte a0..bf at position 2 of a 3-byte "
       "sequence (overlong, surrogate or above U+10FFFF))"},
      {"\xED\xA0\x80",
       "invalid UTF-8 at byte offset 0: bytes ed a0 (expected a continuation byte 80..9f at position 2 of a 3-byte "
       "sequence (overlong, surrogate or above U+10FFFF))"},
      {"\xF4\x90\x80\x80",
       "invalid UTF-8 at byte offset 0: bytes f4 90 (expected a continuation byte 80..8f at position 2 of a 4-byte "
       "sequence (overlong, surrogate or above U+10FFFF))"},
      {"ok\xF5", "invalid UTF-8 at byte offset 2: bytes f5 (a byte that never occurs in UTF-8 (f5..ff))"},
      {"a\xE2\x82", "invalid UTF-8 at byte offset 1: bytes e2 82 (truncated sequence: lead byte e2 needs 3 bytes, "
                    "found 2 before the end)"},
      {"\xC3\x28", "invalid UTF-8 at byte offset 0: bytes c3 28 (expected a continuation byte 80..bf at position 2 "
                   "of a 2-byte sequence)"},
  };
  for (const auto& [s, msg] : bad) {
    EXPECT_FALSE(is_valid_utf8(s));
    EXPECT_EQ(error_of([&, &s = s] { check_utf8(s, "in"); }), "in: " + msg);
  }
}

TEST(Utf8, SplitDecodeEncode) {
  const std::string s = "añ€\xF0\x9F\x98\x80";
  const auto parts = split_code_points(s);
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts[1], "ñ");
  EXPECT_EQ(parts[2], "€");
  EXPECT_EQ(decode_utf8(s), (std::u32string{U'a', U'ñ', U'€', char32_t(0x1F600)}));
  EXPECT_EQ(encode_utf8(decode_utf8(s)), s);
  EXPECT_EQ(error_of([] { encode_utf8(std::u32string(1, char32_t(0xD800))); }),
            "append_utf8: expected a Unicode scalar value (<= U+10FFFF, not a surrogate), got 55296");
  // Every code point round-trips (surrogates excluded).
  for (char32_t c = 0; c <= 0x10FFFF; c += (c < 0x3000 ? 1 : 97)) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    const std::string e = encode_utf8(std::u32string(1, c));
    ASSERT_TRUE(is_valid_utf8(e)) << uint32_t(c);
    ASSERT_EQ(decode_utf8(e), std::u32string(1, c)) << uint32_t(c);
  }
}

TEST(CharTokenizer, Basics) {
  const auto t = CharTokenizer::build({"hola", "año"});
  EXPECT_EQ(t->kind(), "char");
  EXPECT_EQ(t->vocab_size(), 4 + 5);   // a h l o ñ
  EXPECT_EQ(t->id_to_piece(0), "<pad>");
  EXPECT_EQ(t->id_to_piece(1), "<unk>");
  EXPECT_EQ(t->id_to_piece(2), "<s>");
  EXPECT_EQ(t->id_to_piece(3), "</s>");
  EXPECT_EQ(t->id_to_piece(4), "a");
  EXPECT_EQ(t->id_to_piece(8), "ñ");   // code point order: a h l o ñ
  const auto ids = t->encode("hañol");
  EXPECT_EQ(ids, (std::vector<int64_t>{5, 4, 8, 7, 6}));
  EXPECT_EQ(t->decode(ids), "hañol");
  EXPECT_EQ(t->encode("hoy!"), (std::vector<int64_t>{5, 7, kUnkId, kUnkId}));
  EXPECT_EQ(t->decode({kBosId, 5, kUnkId, 4, kEosId, kPadId, kPadId}), "h⁇a");
  EXPECT_TRUE(t->encode("").empty());
  EXPECT_EQ(error_of([&] { t->encode("ho\xFFla"); }),
            "CharTokenizer::encode: invalid UTF-8 at byte offset 2: bytes ff (a byte that never occurs in UTF-8 "
            "(f5..ff))");
  EXPECT_EQ(error_of([&] { t->decode({9}); }), "CharTokenizer::decode: expected token ids in [0, 9), got 9");
  EXPECT_EQ(error_of([&] { t->id_to_piece(-1); }), "CharTokenizer::id_to_piece: expected token ids in [0, 9), got -1");
  EXPECT_EQ(error_of([] { CharTokenizer(U"aba"); }),
            "CharTokenizer: expected distinct code points, U+97 appears twice");
  // min_count
  EXPECT_EQ(CharTokenizer::build({"aab"}, 2)->vocab_size(), 5);
  // serialize / deserialize
  const auto back = Tokenizer::deserialize(t->serialize());
  EXPECT_EQ(back->kind(), "char");
  EXPECT_EQ(back->vocab_size(), t->vocab_size());
  EXPECT_EQ(back->encode("hañol hoy"), t->encode("hañol hoy"));
}

TEST(Tokenizer, DeserializeErrors) {
  EXPECT_EQ(error_of([] { Tokenizer::deserialize("xyz"); }),
            "Tokenizer::deserialize: expected bytes starting with 'attn-tokenizer 1 ', found 'xyz'");
  EXPECT_EQ(error_of([] { Tokenizer::deserialize(std::string("\x89PNG\r\n\0", 7)); }),
            "Tokenizer::deserialize: expected bytes starting with 'attn-tokenizer 1 ', found "
            "'\\x89PNG\\x0d\\x0a\\x00'");
  EXPECT_EQ(error_of([] { Tokenizer::deserialize("attn-tokenizer 1 wordpiece\n"); }),
            "Tokenizer::deserialize: unknown tokenizer kind 'wordpiece', expected sentencepiece or char");
  EXPECT_EQ(error_of([] { Tokenizer::deserialize("attn-tokenizer 1 char\n\xC3"); }).substr(0, 69),
            "Tokenizer::deserialize: char alphabet: invalid UTF-8 at byte offset 0");
  EXPECT_EQ(error_of([] { Tokenizer::deserialize("attn-tokenizer 1 sentencepiece\nnot a proto"); }),
            "SentencePiece model: ModelProto: field 13 at offset 1 has wire type 6, expected 0 "
            "(varint), 1 (64-bit), 2 (length-delimited) or 5 (32-bit)");
  // Wire-format-valid bytes that are not a model still reach SentencePiece's own check.
  const std::string e = error_of([] { Tokenizer::deserialize("attn-tokenizer 1 sentencepiece\n\x08\x01"); });
  EXPECT_EQ(e.rfind("SentencePieceTokenizer: expected a serialized SentencePiece ModelProto (2 bytes), found: ", 0), 0u)
      << e;
}

namespace {

std::string varint(uint64_t v) {
  std::string s;
  for (; v >= 0x80; v >>= 7) s += char(0x80 | (v & 0x7F));
  return s + char(v);
}

// A small unigram model (pad 0, unk 1, bos 2, eos 3) with SentencePiece's normalization `rule`.
std::unique_ptr<SentencePieceTokenizer> small_model(const std::string& rule) {
  std::vector<std::string> s;
  for (int i = 0; i < 30; ++i)
    for (const char* x : {"In the beginning God created the heaven and the earth.",
                          "Y la tierra estaba desordenada y vacía, y las tinieblas … sobre la haz del abismo.",
                          "ﬁve ＦＵＬＬＷＩＤＴＨ letters ½ and ligatures"})
      s.push_back(x + std::string(size_t(i % 3), ' ') + std::to_string(i));
  SentencePieceOptions o;
  o.vocab_size = 60;
  o.normalization = rule;
  o.num_threads = 1;
  return SentencePieceTokenizer::train(s, o);
}

// `model` with a NormalizerSpec appended whose precompiled_charsmap is `charsmap` (protobuf merges
// it over the model's own: the last value of a field wins).
std::string with_charsmap(const SentencePieceTokenizer& model, const std::string& charsmap) {
  const std::string spec = "\x12" + varint(charsmap.size()) + charsmap;
  return model.serialize() + "\x1a" + varint(spec.size()) + spec;
}

// A charsmap: `units` (little-endian u32 each) and the replacement strings.
std::string charsmap(const std::vector<uint32_t>& units, const std::string& strings) {
  std::string b;
  auto put = [&](uint32_t v) {
    for (int k = 0; k < 4; ++k) b += char((v >> (8 * k)) & 0xFF);
  };
  put(uint32_t(units.size() * 4));
  for (uint32_t u : units) put(u);
  return b + strings;
}

}  // namespace

// SentencePiece follows a model's normalization trie without bounds checks; deserialize checks the
// wire format and every trie before a model gets there.
TEST(Tokenizer, DeserializeRefusesHostileModels) {
  // A length claiming 2^60 bytes.
  const std::string huge = "attn-tokenizer 1 sentencepiece\n\x0a" + varint(uint64_t(1) << 60);
  EXPECT_EQ(error_of([&] { Tokenizer::deserialize(huge); }),
            "SentencePiece model: ModelProto: field 1 at offset 1 claims 1152921504606846976 "
            "bytes, but only 0 remain");
  EXPECT_EQ(error_of([] { Tokenizer::deserialize("attn-tokenizer 1 sentencepiece\n\x0a\xff\xff"); }),
            "SentencePiece model: ModelProto: expected a varint, found the end of the bytes at "
            "offset 3");
  const auto model = small_model("identity");
  const std::string where = "SentencePiece model: normalizer_spec.precompiled_charsmap: ";
  // The root's offset leads out of a 256-unit array.
  std::vector<uint32_t> units(256, 0);
  units[0] = 512u << 10;
  EXPECT_EQ(error_of([&] { Tokenizer::deserialize(with_charsmap(*model, charsmap(units, std::string(1, '\0')))); }),
            where + "the trie reaches unit 512 of 256 (out of bounds)");
  // A leaf whose value points past the replacement strings ('a' -> byte 353 of 1).
  units[0] = 0;
  units['a'] = 'a' | 0x100;
  EXPECT_EQ(error_of([&] { Tokenizer::deserialize(with_charsmap(*model, charsmap(units, std::string(1, '\0')))); }),
            where + "a leaf points at byte 353 of replacement strings 1 bytes long");
  // An inner node (no leaf) whose child block lies past the array.
  units['a'] = (1024u << 10) | 'a';
  EXPECT_EQ(error_of([&] { Tokenizer::deserialize(with_charsmap(*model, charsmap(units, std::string(1, '\0')))); }),
            where + "the trie reaches unit 1121 of 256 (out of bounds)");
  // Strings that do not end with NUL; a trie size past the blob.
  EXPECT_EQ(error_of([&] { Tokenizer::deserialize(with_charsmap(*model, charsmap({0}, "ab"))); }),
            where + "expected the replacement strings to end with a NUL byte");
  EXPECT_EQ(error_of([&] { Tokenizer::deserialize(with_charsmap(*model, std::string("\x10\0\0\0\0\0\0\0\0", 9))); }),
            where + "expected a trie of whole 4-byte units followed by replacement strings within its 9 bytes, found a "
                    "trie size of 16");
  // Replacement strings and pieces must be UTF-8 (decode hands them on as text).
  const std::string bad_strings = charsmap({0}, std::string("\xe2\x2c\0", 3));
  EXPECT_EQ(error_of([&] { Tokenizer::deserialize(with_charsmap(*model, bad_strings)); }),
            where + "expected replacement strings of valid UTF-8, found invalid UTF-8 at byte offset 0: bytes e2 2c "
                    "(expected a continuation byte 80..bf at position 2 of a 3-byte sequence)");
  const std::string piece = "\x0a\x07\x0a\x03\xe2\x2c\x81\x18\x01";   // pieces += {piece: e2 2c 81, type: NORMAL}
  EXPECT_EQ(error_of([&] { Tokenizer::deserialize(model->serialize() + piece); }),
            "SentencePiece model: piece 60 is not UTF-8: invalid UTF-8 at byte offset 0: bytes e2 2c (expected a "
            "continuation byte 80..bf at position 2 of a 3-byte sequence)");
  // An empty piece (SentencePiece's trie builder throws its own exception type for it) and a repeated one.
  const std::string empty_piece("\x0a\x04\x0a\x00\x18\x01", 6);
  EXPECT_EQ(error_of([&] { Tokenizer::deserialize(model->serialize() + empty_piece); }),
            "SentencePiece model: piece 60 is empty");
  EXPECT_EQ(error_of([&] { Tokenizer::deserialize(model->serialize() + "\x0a\x07\x0a\x03<s>\x18\x01"); }),
            "SentencePiece model: piece 60 ('<s>') repeats piece 2");
  // The same checks for a model file.
  const auto path = std::filesystem::temp_directory_path() / ("attn_bad_" + std::to_string(::getpid()) + ".model");
  std::ofstream(path, std::ios::binary) << model->model_proto() << empty_piece;
  EXPECT_EQ(error_of([&] { SentencePieceTokenizer::load(path.string()); }),
            path.string() + ": SentencePiece model: piece 60 is empty");
  std::filesystem::remove(path);
  // SentencePiece's own tries pass, and the model encodes as before.
  for (const char* rule : {"nmt_nfkc", "nfkc_cf"}) {
    SCOPED_TRACE(rule);
    const auto sp = small_model(rule);
    const auto back = Tokenizer::deserialize(sp->serialize());
    const std::string text = "ﬁve … ＦＵＬＬ ½ God";
    EXPECT_EQ(back->encode(text), sp->encode(text));
  }
}

TEST(SentencePiece, TrainRoundTripSerialize) {
  const auto sentences = training_sentences();
  const auto t0 = std::chrono::steady_clock::now();
  const auto sp = SentencePieceTokenizer::train(sentences, 4000, "unigram", 1.0);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "SentencePiece unigram, vocab 4000, " << sentences.size() << " sentences: " << secs << " s\n";
  EXPECT_EQ(sp->kind(), "sentencepiece");
  EXPECT_EQ(sp->vocab_size(), 4000);
  EXPECT_EQ(sp->id_to_piece(kPadId), "<pad>");
  EXPECT_EQ(sp->id_to_piece(kUnkId), "<unk>");
  EXPECT_EQ(sp->id_to_piece(kBosId), "<s>");
  EXPECT_EQ(sp->id_to_piece(kEosId), "</s>");

  // Round trip on every verse (held out ones too) whose characters the model has seen.
  const auto chars = CharTokenizer::build(sentences);
  int64_t checked = 0, tokens = 0;
  for (size_t i = 0; i < bible().size(); ++i) {
    for (const std::string* s : {&bible()[i].src, &bible()[i].tgt}) {
      const auto cid = chars->encode(*s);
      if (std::find(cid.begin(), cid.end(), kUnkId) != cid.end()) continue;
      const auto ids = sp->encode(*s);
      ASSERT_EQ(sp->decode(ids), *s) << "verse pair " << i;
      for (int64_t id : ids) ASSERT_TRUE(id >= 4 && id < 4000) << id;
      tokens += int64_t(ids.size());
      ++checked;
    }
  }
  EXPECT_GT(checked, 60000);
  std::cout << "round trips: " << checked << " sentences, " << double(tokens) / double(checked)
            << " tokens per sentence\n";
  // Spanish and English examples spelled out.
  for (const std::string s : {"In the beginning God created the heaven and the earth.",
                              "¿Quién es éste? ¡Oh Jehová, cuánto se han multiplicado mis enemigos!"})
    EXPECT_EQ(sp->decode(sp->encode(s)), s);

  // Unknown characters -> unk; specials are skipped by decode.
  const auto ids = sp->encode("God 日本 loves");
  EXPECT_NE(std::find(ids.begin(), ids.end(), kUnkId), ids.end());
  std::vector<int64_t> framed = {kBosId};
  const auto hello = sp->encode("the earth");
  framed.insert(framed.end(), hello.begin(), hello.end());
  framed.push_back(kEosId);
  framed.push_back(kPadId);
  EXPECT_EQ(sp->decode(framed), "the earth");
  // Invalid UTF-8 -> error naming the offset.
  EXPECT_EQ(error_of([&] { sp->encode("the \xE2\x82 earth"); }),
            "SentencePieceTokenizer::encode: invalid UTF-8 at byte offset 4: bytes e2 82 20 (expected a continuation "
            "byte 80..bf at position 3 of a 3-byte sequence)");
  EXPECT_EQ(error_of([&] { sp->decode({4000}); }),
            "SentencePieceTokenizer::decode: expected token ids in [0, 4000), got 4000");

  // serialize / deserialize / .model file give identical encodings.
  const auto back = Tokenizer::deserialize(sp->serialize());
  EXPECT_EQ(back->kind(), "sentencepiece");
  const auto path = std::filesystem::temp_directory_path() / ("attn_sp_" + std::to_string(::getpid()) + ".model");
  std::ofstream(path, std::ios::binary) << sp->model_proto();
  const auto loaded = SentencePieceTokenizer::load(path.string());
  std::filesystem::remove(path);
  for (size_t i = 0; i < bible().size(); i += 97) {
    ASSERT_EQ(back->encode(bible()[i].src), sp->encode(bible()[i].src));
    ASSERT_EQ(back->encode(bible()[i].tgt), sp->encode(bible()[i].tgt));
    ASSERT_EQ(loaded->encode(bible()[i].tgt), sp->encode(bible()[i].tgt));
  }
  EXPECT_EQ(back->serialize(), sp->serialize());

  // Deterministic: the same sentences give the same model, byte for byte.
  const auto again = SentencePieceTokenizer::train(sentences, 4000, "unigram", 1.0);
  EXPECT_EQ(again->model_proto(), sp->model_proto());
}

TEST(SentencePiece, BpeAndErrors) {
  std::vector<std::string> s;
  for (size_t i = 0; i < bible().size(); i += 20) s.push_back(bible()[i].tgt);
  const auto bpe = SentencePieceTokenizer::train(s, 1000, "bpe", 1.0);
  EXPECT_EQ(bpe->vocab_size(), 1000);
  for (const auto& x : s) ASSERT_EQ(bpe->decode(bpe->encode(x)), x);
  EXPECT_EQ(SentencePieceTokenizer::train(s, 1000, "bpe", 1.0)->model_proto(), bpe->model_proto());
  EXPECT_EQ(error_of([&] { SentencePieceTokenizer::train(s, 1000, "word2vec", 1.0); }),
            "SentencePieceTokenizer::train: expected model_type unigram or bpe, got 'word2vec'");
  EXPECT_EQ(error_of([&] { SentencePieceTokenizer::train({"ok", "b\xFF"}, 100); }).substr(0, 80),
            "SentencePieceTokenizer::train: sentence 1: invalid UTF-8 at byte offset 1: bytes");
  const std::string e = error_of([] { SentencePieceTokenizer::train({"tiny text"}, 5000); });
  EXPECT_EQ(e.rfind("SentencePieceTokenizer::train (unigram, vocab 5000, 1 sentences): ", 0), 0u) << e;
  std::cout << "too-large vocab: " << e << "\n";
  EXPECT_NE(e.find("lower the vocabulary size, e.g. attn train --vocab-size"), std::string::npos) << e;
  EXPECT_EQ(error_of([] { SentencePieceTokenizer::load("/nonexistent.model"); }),
            "SentencePieceTokenizer::load: cannot open /nonexistent.model");
}

// The full Bible (both languages, ~62k sentences) with the vocabulary the translation issue uses.
TEST(SentencePiece, TrainFullBibleSlow) {
  std::vector<std::string> s;
  for (const auto& p : bible()) {
    s.push_back(p.src);
    s.push_back(p.tgt);
  }
  for (const char* type : {"unigram", "bpe"}) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto sp = SentencePieceTokenizer::train(s, 8000, type, 1.0);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "SentencePiece " << type << ", vocab 8000, " << s.size() << " sentences, 2 threads: " << secs
              << " s\n";
    EXPECT_LT(secs, 60.0);
    EXPECT_EQ(sp->decode(sp->encode(s[12345])), s[12345]);
  }
}

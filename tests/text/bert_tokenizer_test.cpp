// The BERT WordPiece tokenizer against an independent Python implementation of Hugging Face's
// BertTokenizer (tests/golden/gen/bert_tokenizer.py, Python 3.11's unicodedata and str), on
// bert-base-uncased's real vocabulary (scripts/fetch_bert_vocab.sh) and on a small one built here:
// accents, CJK, Hangul, emoji, control characters, digit runs, over-long words, mixed scripts, special
// tokens in the text, random strings; pairs, truncation, padding, batches and decode. Anchored by
// published bert-base-uncased ids ("hello world" -> 7592 2088). Offsets, errors and configs directly.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "attn/core/error.h"
#include "attn/core/rng.h"
#include "attn/text/bert_tokenizer.h"
#include "attn/text/utf8.h"
#include "bert_vocab.h"
#include "errors.h"
#include "files.h"
#include "torch_ref.h"

using namespace attn;
using namespace attn::text;
using test::error_of;
using namespace std::string_literals;

namespace {

const BertTokenizer& uncased() {
  static const BertTokenizer t = BertTokenizer::from_files(test::bert_vocab_path());
  return t;
}

nlohmann::json vocab_args() { return {{"vocab_path", test::bert_vocab_path()}, {"vocab_md5", test::kBertVocabMd5}}; }

// Texts that exercise each step of the tokenizer.
std::vector<std::string> edge_texts() {
  return {
      "hello world", "Hello, World!", "Führer", "The man went to the [MASK].", "[CLS] a [SEP] b [SEP]",
      "[mask] [Mask] [MASK][MASK]x[UNK]", "a[MASK]b", "[MA\x01SK] [MA\xc2\xa0SK]",
      "naïve café résumé Ångström crème brûlée", "Straße ŒUVRE ǅemal ﬁne",
      "İstanbul ΣΑΣ ΟΔΟΣ. σοφός ς", "e\xcc\x81 a\xcc\x8a\xcc\x81 \xe1\xba\xa1\xcc\x82",
      "中文字符 你好，世界！ 漢字 𠀀𪜀 豈", "한국어 텍스트 안녕하세요", "ひらがな カタカナ ｶﾀｶﾅ", "emoji 😀👍🏽 👨‍👩‍👧 🇩🇪 ❤️",
      "tab\there\nnew\r\nline\x0bvt\x0c ff\x1c fs \xc2\x85 nel",
      "zero\xe2\x80\x8bwidth soft\xc2\xadhyphen bom\xef\xbb\xbf!",
      "nul\x00" "byte rep\xef\xbf\xbdlacement"s,
      "nbsp\xc2\xa0x\xe3\x80\x80ideo\xe2\x80\xa8ls\xe2\x80\xa9ps\xe2\x80\x83" "em",
      "1234567890 3.14159 1,000,000 2021-03-25 ＄１２３", "isn't it? \"quoted\" (paren) [brack] {brace} a/b\\c",
      "Ελληνικά Русский текст עברית العربية हिन्दी ไทย ქართული",
      std::string(99, 'a'), std::string(100, 'b'), std::string(101, 'c'), std::string(150, 'x') + " ok",
      "supercalifragilisticexpialidocious antidisestablishmentarianism", "unaffable unbelievable",
      "¿Quién? ¡Hola! «guillemets» „quotes“ ‘single’ — dash … ellipsis · middle",
      "\xef\xbc\xa8\xef\xbd\x85\xef\xbd\x8c\xef\xbd\x8c\xef\xbd\x8f fullwidth", "㈱ ℃ Ⅻ ½ ² ﬀ", "",
      "   ", "\x07\x1b", "U.S.A. e.g. Mr. O'Neil's", "\xef\xb7\xba arabic ligature",
      "priv\xee\x80\x80use unassigned\xf0\xb2\x8e\xaf x", "\xf4\x8f\xbf\xbf max",
  };
}

// Random valid UTF-8: code points from pools that hit every branch, and from anywhere.
std::vector<std::string> random_texts(uint64_t seed, int n) {
  const std::u32string pool = U"aeiouAEIOUxyzqnst  \t\n.,!?'\"-()[]#@0123456789éÉüÜñçßøØİıΣσςÅ\u0301\u0308\u0327"
                              U"中文字漢你好한국어ひらカナ😀👍\u200d\u00a0\u3000\u2028\u0000\ufffd\u0007\u00ad\ufeff"
                              U"ﬁ①²ǅ\u05d0\u0627\u0915\u093f\u0e01\u0e34";
  Generator g(seed);
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    std::string s;
    const int64_t len = g.randint(40);
    for (int64_t k = 0; k < len; ++k) {
      char32_t c;
      if (g.randint(8) == 0) {
        do c = char32_t(g.randint(0x110000)); while (c >= 0xD800 && c <= 0xDFFF);
      } else {
        c = pool[size_t(g.randint(int64_t(pool.size())))];
      }
      append_utf8(s, c);
    }
    if (g.randint(6) == 0) s += " [MASK] ";
    if (g.randint(10) == 0) s += std::string(size_t(95 + g.randint(10)), 'k');
    out.push_back(s);
  }
  return out;
}

std::vector<int64_t> longs(const Tensor& t) { return t.to_vector<int64_t>(); }

// The reference's rows, cut at "lens".
std::vector<std::vector<int64_t>> rows(const test::Tensors& ref, const std::string& name, const std::string& lens) {
  const auto flat = longs(ref.at(name)), len = longs(ref.at(lens));
  std::vector<std::vector<int64_t>> out;
  size_t at = 0;
  for (int64_t n : len) {
    out.emplace_back(flat.begin() + ptrdiff_t(at), flat.begin() + ptrdiff_t(at + size_t(n)));
    at += size_t(n);
  }
  return out;
}

std::string bytes_of(const std::vector<int64_t>& v) { return std::string(v.begin(), v.end()); }

std::string hex_of(const std::string& s) {
  std::string out;
  char b[4];
  for (unsigned char c : s) std::snprintf(b, sizeof b, "%02x ", c), out += b;
  return out;
}

// encode() of every text against the reference: ids, types, mask, decode with and without specials.
void expect_matches_reference(const BertTokenizer& tok, const std::vector<std::string>& texts, nlohmann::json args,
                              const BertEncodeOptions& o = {}) {
  args["texts"] = texts;
  const auto ref = test::torch_ref("bert_tokenizer.encode", {}, args);
  const auto ids = rows(ref, "ids", "lens"), types = rows(ref, "token_type_ids", "lens"),
             mask = rows(ref, "attention_mask", "lens"), dec = rows(ref, "decoded", "decoded_lens"),
             skip = rows(ref, "decoded_skip", "decoded_skip_lens");
  const auto too_long = longs(ref.at("too_long"));
  std::vector<BertEncoding> mine;
  if (o.padding == BertPadding::longest) mine = tok.encode_batch(texts, o);
  for (size_t i = 0; i < texts.size(); ++i) {
    SCOPED_TRACE("text " + std::to_string(i) + ": bytes " + hex_of(texts[i]));
    if (too_long[i]) {
      EXPECT_NE(error_of([&] { tok.encode(texts[i], o); }), test::kNoError);
      continue;
    }
    const BertEncoding e = o.padding == BertPadding::longest ? mine[i] : tok.encode(texts[i], o);
    EXPECT_EQ(e.ids, ids[i]);
    EXPECT_EQ(e.token_type_ids, types[i]);
    EXPECT_EQ(e.attention_mask, mask[i]);
    EXPECT_EQ(e.offsets.size(), e.ids.size());
    EXPECT_EQ(tok.decode(e.ids), bytes_of(dec[i]));
    EXPECT_EQ(tok.decode(e.ids, true), bytes_of(skip[i]));
  }
}

// A small vocabulary, always there (no download): specials, whole words, continuations, characters.
std::vector<std::string> small_vocab() {
  std::vector<std::string> v = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "aff",
                                "hello", "world", "##s", "##ing", "run", "the", "a", "##a", "!", ",", ".", "?",
                                "'", "t", "##t", "isn", "e", "##e", "é", "中", "文", "ᄋ", "##ᅡ", "##ᆫ", "σ",
                                "##σ", "##ς", "i", "##i", "s", "##x", "[", "]", "1", "##2", "##3", "k", "##k",
                                "Hello", "World", "É", "##́"};
  return v;
}

}  // namespace

TEST(BertTokenizer, PublishedIdsOfBertBaseUncased) {
  ATTN_NEED_BERT_VOCAB(test::bert_vocab_path());
  const BertTokenizer& t = uncased();
  EXPECT_EQ(t.vocab_size(), 30522);
  EXPECT_EQ(t.unk_id(), 100);
  EXPECT_EQ(t.cls_id(), 101);
  EXPECT_EQ(t.sep_id(), 102);
  EXPECT_EQ(t.mask_id(), 103);
  EXPECT_EQ(t.pad_id(), 0);
  EXPECT_EQ(t.encode("hello world").ids, (std::vector<int64_t>{101, 7592, 2088, 102}));
  EXPECT_EQ(t.encode("Führer").ids, (std::vector<int64_t>{101, 11865, 17875, 102}));
  EXPECT_EQ(t.id_to_token(17875), "##hrer");
  EXPECT_EQ(t.token_to_id("hello"), 7592);
  EXPECT_EQ(t.token_to_id("no-such-token"), 100);
}

TEST(BertTokenizer, EdgeTextsMatchReferenceUncased) {
  ATTN_NEED_BERT_VOCAB(test::bert_vocab_path());
  expect_matches_reference(uncased(), edge_texts(), vocab_args());
}

TEST(BertTokenizer, EdgeTextsMatchReferenceCasedAndAccentOptions) {
  ATTN_NEED_BERT_VOCAB(test::bert_vocab_path());
  const auto vocab = BertTokenizer::parse_vocab(test::slurp(test::bert_vocab_path()));
  struct Mode {
    bool lower;
    std::optional<bool> strip;
  };
  for (const Mode m : {Mode{false, std::nullopt}, Mode{false, true}, Mode{true, false}, Mode{true, true}}) {
    SCOPED_TRACE(std::string("do_lower_case ") + (m.lower ? "true" : "false") + ", strip_accents " +
                 (m.strip ? (*m.strip ? "true" : "false") : "null"));
    BertTokenizerConfig c;
    c.do_lower_case = m.lower;
    c.strip_accents = m.strip;
    nlohmann::json args = vocab_args();
    args["do_lower_case"] = m.lower;
    args["strip_accents"] = m.strip ? nlohmann::json(*m.strip) : nlohmann::json(nullptr);
    expect_matches_reference(BertTokenizer(vocab, c), edge_texts(), args);
  }
}

TEST(BertTokenizer, RandomTextsMatchReference) {
  ATTN_NEED_BERT_VOCAB(test::bert_vocab_path());
  expect_matches_reference(uncased(), random_texts(11, 600), vocab_args());
  const auto vocab = BertTokenizer::parse_vocab(test::slurp(test::bert_vocab_path()));
  BertTokenizerConfig cased;
  cased.do_lower_case = false;
  nlohmann::json args = vocab_args();
  args["do_lower_case"] = false;
  expect_matches_reference(BertTokenizer(vocab, cased), random_texts(12, 300), args);
}

TEST(BertTokenizer, SmallVocabularyMatchesReference) {
  // Runs without the download: continuations, [UNK] for partial matches, accents, Hangul jamo.
  std::vector<std::string> texts = edge_texts();
  for (const auto& s : random_texts(5, 200)) texts.push_back(s);
  texts.push_back("unaffable unaff affable runs running hello, world! isn't it? 123 1232 kkkk");
  const nlohmann::json args = {{"vocab", small_vocab()}};
  expect_matches_reference(BertTokenizer(small_vocab()), texts, args);
  BertTokenizerConfig cased;
  cased.do_lower_case = false;
  nlohmann::json cargs = args;
  cargs["do_lower_case"] = false;
  expect_matches_reference(BertTokenizer(small_vocab(), cased), texts, cargs);
}

TEST(BertTokenizer, PairsTruncationAndPaddingMatchReference) {
  ATTN_NEED_BERT_VOCAB(test::bert_vocab_path());
  const auto texts = random_texts(21, 120);
  std::vector<std::pair<std::string, std::string>> pairs;
  nlohmann::json jp = nlohmann::json::array();
  for (size_t i = 0; i + 1 < texts.size(); i += 2) {
    pairs.emplace_back(texts[i], texts[i + 1]);
    jp.push_back({texts[i], texts[i + 1]});
  }
  pairs.emplace_back("The man went to the store.", "He bought a gallon of milk.");
  jp.push_back({"The man went to the store.", "He bought a gallon of milk."});
  for (int64_t max_length : {3, 9, 16, 40}) {
    SCOPED_TRACE("max_length " + std::to_string(max_length));
    nlohmann::json args = vocab_args();
    args["pairs"] = jp;
    args["max_length"] = max_length;
    args["truncation"] = true;
    args["padding"] = "longest";
    const auto ref = test::torch_ref("bert_tokenizer.encode", {}, args);
    BertEncodeOptions o;
    o.truncation = true;
    o.max_length = max_length;
    o.padding = BertPadding::longest;
    o.warn = false;
    const auto batch = uncased().encode_pair_batch(pairs, o);
    const auto ids = rows(ref, "ids", "lens"), types = rows(ref, "token_type_ids", "lens"),
               mask = rows(ref, "attention_mask", "lens");
    const auto cut = longs(ref.at("truncated"));
    ASSERT_EQ(batch.size(), ids.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      EXPECT_EQ(batch[i].ids, ids[i]) << "pair " << i;
      EXPECT_EQ(batch[i].token_type_ids, types[i]) << "pair " << i;
      EXPECT_EQ(batch[i].attention_mask, mask[i]) << "pair " << i;
      EXPECT_EQ(batch[i].truncated, cut[i]) << "pair " << i;
    }
  }
}

TEST(BertTokenizer, SingleTextTruncationPaddingAndErrorsMatchReference) {
  ATTN_NEED_BERT_VOCAB(test::bert_vocab_path());
  BertEncodeOptions o;
  o.max_length = 12;
  o.padding = BertPadding::max_length;
  nlohmann::json args = vocab_args();
  args["max_length"] = 12;
  args["padding"] = "max_length";
  // Truncation off: texts over 12 tokens are errors (the reference marks them too long).
  expect_matches_reference(uncased(), edge_texts(), args, o);
  o.truncation = true;
  o.warn = false;
  args["truncation"] = true;
  const std::vector<std::string> texts = edge_texts();
  expect_matches_reference(uncased(), texts, args, o);
  o.padding = BertPadding::longest;
  args["padding"] = "longest";
  expect_matches_reference(uncased(), texts, args, o);
}

TEST(BertTokenizer, OverMaxLengthIsAnErrorOrTruncatedWithWarning) {
  const BertTokenizer t(small_vocab());
  BertEncodeOptions o;
  o.max_length = 4;
  EXPECT_EQ(error_of([&] { t.encode("hello world hello", o); }),
            "BertTokenizer: the text has 5 tokens with [CLS] and [SEP], more than max_length 4 (turn truncation on "
            "in BertEncodeOptions, or shorten the text)");
  o.truncation = true;
  testing::internal::CaptureStderr();
  const BertEncoding e = t.encode("hello world hello", o);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(e.ids, (std::vector<int64_t>{2, 9, 10, 3}));
  EXPECT_EQ(e.truncated, 1);
  EXPECT_NE(err.find("warning: BertTokenizer: 1 tokens cut to fit max_length 4"), std::string::npos) << err;
  o.max_length = 2;
  EXPECT_EQ(error_of([&] { t.encode("hello", o); }),
            "BertTokenizer: max_length 2 leaves no room for the text's tokens after 2 special tokens");
  EXPECT_EQ(t.encode("", o).ids, (std::vector<int64_t>{2, 3}));
}

TEST(BertTokenizer, OffsetsAreByteSpansOfTheOriginalText) {
  const BertTokenizer t(small_vocab());
  const std::string s = "Hello, wörld! [MASK] é中文 unaffable";
  const BertEncoding e = t.encode(s);
  ASSERT_EQ(e.ids.size(), e.offsets.size());
  std::vector<std::string> spans;
  for (const auto& [begin, end] : e.offsets) spans.push_back(s.substr(begin, end - begin));
  // [CLS] hello , world ! [MASK] e 中 文 un ##aff ##able [SEP]: each token's span before lowering and NFD
  const std::vector<std::string> want = {"",  "Hello", ",",  "wörld", "!",    "[MASK]", "é",
                                         "中", "文",    "un", "aff",   "able", ""};
  EXPECT_EQ(spans, want);
  EXPECT_EQ(e.special_tokens_mask.front(), 1);
  EXPECT_EQ(e.special_tokens_mask[1], 0);
  // An accent stripped after NFD stays inside the span of its character; a composed pair spans both.
  const std::string d = "e\xcc\x81";   // e + U+0301 -> NFC é
  const BertEncoding de = t.encode(d);
  ASSERT_EQ(de.ids.size(), 3u);
  EXPECT_EQ(de.offsets[1], (std::pair<size_t, size_t>(0, 3)));
  if (std::filesystem::exists(test::bert_vocab_path())) {
    const BertEncoding f = uncased().encode("Führer");
    EXPECT_EQ(f.offsets[1], (std::pair<size_t, size_t>(0, 3)));   // "Fü"
    EXPECT_EQ(f.offsets[2], (std::pair<size_t, size_t>(3, 7)));   // "hrer"
  }
}

TEST(BertTokenizer, PairOffsetsPointIntoTheirOwnText) {
  const BertTokenizer t(small_vocab());
  const BertEncoding e = t.encode_pair("hello world", "the run");
  EXPECT_EQ(e.token_type_ids, (std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(e.offsets[4], (std::pair<size_t, size_t>(0, 3)));
  EXPECT_EQ(e.offsets[5], (std::pair<size_t, size_t>(4, 7)));
}

TEST(BertTokenizer, InvalidUtf8IsAnErrorNamingTheOffset) {
  const BertTokenizer t(small_vocab());
  EXPECT_EQ(error_of([&] { t.encode("ab\xc3("); }),
            "BertTokenizer: text: invalid UTF-8 at byte offset 2: bytes c3 28 (expected a continuation byte 80..bf "
            "at position 2 of a 2-byte sequence)");
  EXPECT_NE(error_of([&] { t.encode_pair("ok", "\xff"); }).find("byte offset 0"), std::string::npos);
  EXPECT_EQ(error_of([&] { t.encode_batch({"fine", "a\xc3"}); }),
            "encode_batch: text 1: BertTokenizer: text: invalid UTF-8 at byte offset 1: bytes c3 (truncated sequence: "
            "lead byte c3 needs 2 bytes, found 1 before the end)");
}

TEST(BertTokenizer, VocabularyErrorsNameTheTokens) {
  auto v = small_vocab();
  v.push_back("hello");
  v.push_back("[CLS]");
  EXPECT_EQ(error_of([&] { BertTokenizer t(v); }),
            "BertTokenizer: expected each token once in the vocabulary, found duplicates: \"hello\" (lines 10 and 52), "
            "\"[CLS]\" (lines 3 and 53)");
  std::vector<std::string> no_mask = {"[PAD]", "[UNK]", "[CLS]", "a"};
  EXPECT_EQ(error_of([&] { BertTokenizer t(no_mask); }),
            "BertTokenizer: the vocabulary (4 tokens) lacks the special tokens [SEP], [MASK]");
  EXPECT_EQ(error_of([&] { BertTokenizer::parse_vocab("a\nb\xc3\n", "v.txt"); }),
            "v.txt line 2: invalid UTF-8 at byte offset 3: bytes c3 0a (expected a continuation byte 80..bf at "
            "position 2 of a 2-byte sequence)");
  auto bad = small_vocab();
  bad[5] = "u\xff";
  EXPECT_NE(error_of([&] { BertTokenizer t(bad); }).find("BertTokenizer: vocabulary line 6: invalid UTF-8 at byte offset 1"),
            std::string::npos);
  EXPECT_EQ(BertTokenizer::parse_vocab("a\r\nb\rc\n\nd"), (std::vector<std::string>{"a", "b", "c", "", "d"}));
  EXPECT_NE(error_of([] { BertTokenizer::from_files("/no/such/vocab.txt"); }).find("cannot open"), std::string::npos);
  const BertTokenizer t(small_vocab());
  EXPECT_EQ(error_of([&] { t.decode({0, 51}); }), "BertTokenizer: expected a token id in [0, 51), got 51");
  EXPECT_EQ(error_of([&] { t.id_to_token(-1); }), "BertTokenizer: expected a token id in [0, 51), got -1");
}

TEST(BertTokenizer, ConfigFromHuggingFaceJson) {
  const auto c = BertTokenizerConfig::from_json(R"({"do_lower_case": false, "strip_accents": null,
      "model_max_length": 1000000000000000019884624838656, "tokenizer_class": "BertTokenizer",
      "mask_token": {"__type": "AddedToken", "content": "[MASK]", "lstrip": false}, "unk_token": "[UNK]"})");
  EXPECT_FALSE(c.do_lower_case);
  EXPECT_FALSE(c.strip_accents.has_value());
  EXPECT_FALSE(c.strips_accents());
  EXPECT_EQ(c.model_max_length, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(c.mask_token, "[MASK]");
  const auto d =
      BertTokenizerConfig::from_json(R"({"do_lower_case": true, "model_max_length": 512, "strip_accents": false})");
  EXPECT_TRUE(d.do_lower_case);
  EXPECT_FALSE(d.strips_accents());
  EXPECT_EQ(d.model_max_length, 512);
  EXPECT_EQ(error_of([] { BertTokenizerConfig::from_json(R"({"do_lower_case": "yes"})", "cfg.json"); }),
            "cfg.json: key \"do_lower_case\": expected true or false, found the string \"yes\"");
  EXPECT_EQ(error_of([] { BertTokenizerConfig::from_json("[1]", "cfg.json"); }),
            "cfg.json: expected a JSON object, found the list [1]");
  const std::string dir = test::fresh_tmp_dir("attn_bert", "config");
  std::ofstream(dir + "/vocab.txt") << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nHello\nhello\n";
  std::ofstream(dir + "/tokenizer_config.json") << R"({"do_lower_case": false})";
  const auto cased = BertTokenizer::from_files(dir + "/vocab.txt", dir + "/tokenizer_config.json");
  EXPECT_EQ(cased.encode("Hello").ids, (std::vector<int64_t>{2, 5, 3}));
  EXPECT_EQ(BertTokenizer::from_files(dir + "/vocab.txt").encode("Hello").ids, (std::vector<int64_t>{2, 6, 3}));
  std::filesystem::remove_all(dir);
}

TEST(BertTokenizer, DecodeJoinsContinuationsAndCleansSpaces) {
  const BertTokenizer t(small_vocab());
  const BertEncoding e = t.encode("unaffable, isn't it?");
  EXPECT_EQ(t.decode(e.ids), "[CLS] unaffable, isn't it? [SEP]");
  EXPECT_EQ(t.decode(e.ids, true), "unaffable, isn't it?");
  EXPECT_EQ(t.convert_tokens_to_string({"un", "##aff", "##able", "!"}), "unaffable !");
}

TEST(BertTokenizer, BatchToModelInputs) {
  const BertTokenizer t(small_vocab());
  BertEncodeOptions o;
  o.padding = BertPadding::longest;
  const auto batch = t.encode_pair_batch({{"hello", "world"}, {"hello world run", "the"}}, o);
  const BertInputs in = to_inputs(batch);
  EXPECT_EQ(in.input_ids.shape(), (Shape{2, 7}));
  EXPECT_EQ(in.input_ids.dtype(), DType::i64);
  EXPECT_EQ(in.input_ids.to_vector<int64_t>(),
            (std::vector<int64_t>{2, 9, 3, 10, 3, 0, 0, 2, 9, 10, 13, 3, 14, 3}));
  EXPECT_EQ(in.token_type_ids.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(in.attention_mask.to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(error_of([&] { to_inputs(t.encode_batch({"hello", "hello world"})); }),
            "to_inputs: expected every encoding to have 3 tokens (pad the batch), encoding 1 has 4");
  EXPECT_EQ(error_of([] { to_inputs({}); }), "to_inputs: expected at least one encoding, got an empty batch");
}

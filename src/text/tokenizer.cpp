// SentencePiece and character tokenizers (include/attn/text/tokenizer.h).
#include "attn/text/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "attn/core/error.h"
#include "attn/text/utf8.h"

namespace attn::text {

namespace {

constexpr std::string_view kMagic = "attn-tokenizer 1 ";

std::string header(const std::string& kind) { return std::string(kMagic) + kind + "\n"; }

// Feeds a vector of sentences to the trainer without files.
class VectorIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorIterator(const std::vector<std::string>& v) : v_(v) {}
  bool done() const override { return i_ >= v_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return v_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& v_;
  size_t i_ = 0;
};

void check_id(int64_t id, int64_t n, const char* who) {
  ATTN_CHECK(id >= 0 && id < n, who, ": expected token ids in [0, ", n, "), got ", id);
}

constexpr const char* kModelWhere = "SentencePiece model: ";

// Up to `n` bytes of `s` for an error message: printable ASCII as is, the rest as \xNN.
std::string shown(std::string_view s, size_t n) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < n; ++i) {
    const auto c = uint8_t(s[i]);
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += char(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(c));
      out += buf;
    }
  }
  if (s.size() > n) out += "...";
  return out;
}

// ---- a SentencePiece ModelProto from untrusted bytes ----
//
// SentencePiece trusts a model's precompiled normalization rules (NormalizerSpec.precompiled_charsmap:
// a u32 trie size, a darts-clone double-array trie, then NUL-terminated replacement strings): it
// follows the trie's offsets and leaf values without bounds checks, so a crafted model would make
// encode() read outside the model. Before a model reaches SentencePiece, the protobuf wire format
// is walked (every length checked against the bytes left), each piece checked (non-empty, UTF-8,
// unique) and each charsmap checked: every node the trie can reach from any input byte lies inside
// the array, every value inside the strings, and the strings are UTF-8.

struct Wire {
  std::string_view buf;
  size_t pos = 0;
  const char* what;   // the message being read, for errors

  bool done() const { return pos >= buf.size(); }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      ATTN_CHECK(pos < buf.size(), kModelWhere, what,
                 ": expected a varint, found the end of the bytes at offset ", pos);
      const auto b = uint8_t(buf[pos++]);
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    fail(kModelWhere, what, ": a varint longer than 10 bytes at offset ", pos);
  }
  // Skips (or returns, for wire type 2) one field's value; `field` is its number.
  std::string_view value(uint64_t field, int wire) {
    const size_t at = pos;
    size_t n = 0;
    switch (wire) {
      case 0: varint(); return {};
      case 1: n = 8; break;
      case 5: n = 4; break;
      case 2: {
        const uint64_t len = varint();
        ATTN_CHECK(len <= buf.size() - pos, kModelWhere, what, ": field ", field,
                   " at offset ", at, " claims ", len, " bytes, but only ", buf.size() - pos, " remain");
        n = size_t(len);
        break;
      }
      default:
        fail(kModelWhere, what, ": field ", field, " at offset ", at,
             " has wire type ", wire, ", expected 0 (varint), 1 (64-bit), 2 (length-delimited) or 5 (32-bit)");
    }
    ATTN_CHECK(n <= buf.size() - pos, kModelWhere, what, ": field ", field,
               " at offset ", at, " needs ", n, " bytes, but only ", buf.size() - pos, " remain");
    std::string_view v = buf.substr(pos, n);
    pos += n;
    return v;
  }
};

// darts-clone's unit layout (third_party/darts_clone/darts.h in SentencePiece).
inline bool unit_has_leaf(uint32_t u) { return (u >> 8) & 1; }
inline uint32_t unit_value(uint32_t u) { return u & ((1u << 31) - 1); }
inline uint32_t unit_label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
inline uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

void check_charsmap(std::string_view blob, const char* spec) {
  const std::string where = detail::cat(kModelWhere, spec, ".precompiled_charsmap");
  ATTN_CHECK(blob.size() > 4, where, ": expected a 4-byte trie size, a trie and replacement strings, found ",
             blob.size(), " bytes");
  const uint32_t trie_bytes = uint32_t(uint8_t(blob[0])) | uint32_t(uint8_t(blob[1])) << 8 |
                              uint32_t(uint8_t(blob[2])) << 16 | uint32_t(uint8_t(blob[3])) << 24;
  ATTN_CHECK(trie_bytes >= 4 && trie_bytes % 4 == 0 && trie_bytes < blob.size() - 4, where,
             ": expected a trie of whole 4-byte units followed by replacement strings within its ", blob.size(),
             " bytes, found a trie size of ", trie_bytes);
  const std::string_view strings = blob.substr(4 + size_t(trie_bytes));
  ATTN_CHECK(strings.back() == '\0', where, ": expected the replacement strings to end with a NUL byte");
  if (const auto bad = find_utf8_problem(strings))
    fail(where, ": expected replacement strings of valid UTF-8, found ", bad->message);
  const size_t n = trie_bytes / 4;
  auto unit = [&](size_t i) {
    const char* p = blob.data() + 4 + 4 * i;
    return uint32_t(uint8_t(p[0])) | uint32_t(uint8_t(p[1])) << 8 | uint32_t(uint8_t(p[2])) << 16 |
           uint32_t(uint8_t(p[3])) << 24;
  };
  // Every node an input can reach: the 256 units its next byte may select must be in the array.
  std::vector<bool> seen(n, false);
  std::vector<size_t> todo = {size_t(unit_offset(unit(0)))};
  while (!todo.empty()) {
    const size_t node = todo.back();
    todo.pop_back();
    ATTN_CHECK((node | 0xFF) < n, where, ": the trie reaches unit ", node, " of ", n, " (out of bounds)");
    if (seen[node]) continue;
    seen[node] = true;
    for (uint32_t c = 0; c < 256; ++c) {
      const size_t child = node ^ c;
      const uint32_t u = unit(child);
      if (unit_label(u) != c) continue;
      const size_t next = child ^ unit_offset(u);
      if (unit_has_leaf(u)) {
        ATTN_CHECK(next < n, where, ": a leaf of the trie lies at unit ", next, " of ", n, " (out of bounds)");
        ATTN_CHECK(unit_value(unit(next)) < strings.size(), where, ": a leaf points at byte ", unit_value(unit(next)),
                   " of replacement strings ", strings.size(), " bytes long");
      }
      if (next >= n || !seen[next]) todo.push_back(next);   // out of bounds: refused when popped
    }
  }
}

// One SentencePiece message of ModelProto.pieces (its piece = 1, the last one written wins): a
// piece must be non-empty UTF-8 (decode() hands it on as text; SentencePiece's trie builder throws
// its own exception type for an empty one) and appear once.
void check_piece(std::string_view message, size_t index, std::unordered_map<std::string_view, size_t>& seen) {
  Wire w{message, 0, "ModelProto.pieces"};
  std::string_view piece;
  while (!w.done()) {
    const uint64_t k = w.varint();
    const std::string_view v = w.value(k >> 3, int(k & 7));
    if ((k >> 3) == 1 && (k & 7) == 2) piece = v;
  }
  ATTN_CHECK(!piece.empty(), kModelWhere, "piece ", index, " is empty");
  if (const auto bad = find_utf8_problem(piece)) fail(kModelWhere, "piece ", index, " is not UTF-8: ", bad->message);
  const auto [it, fresh] = seen.emplace(piece, index);
  ATTN_CHECK(fresh, kModelWhere, "piece ", index, " ('", piece, "') repeats piece ", it->second);
}

// ModelProto: pieces = 1 (each checked above); normalizer_spec = 3 and denormalizer_spec = 5 are
// NormalizerSpecs, whose precompiled_charsmap is field 2. Every other field is left to protobuf.
void check_model_proto(std::string_view proto) {
  Wire top{proto, 0, "ModelProto"};
  std::unordered_map<std::string_view, size_t> pieces;
  while (!top.done()) {
    const uint64_t key = top.varint();
    const uint64_t field = key >> 3;
    ATTN_CHECK(field != 0, kModelWhere, "ModelProto: field number 0 at offset ", top.pos, " (not a protobuf message)");
    const std::string_view v = top.value(field, int(key & 7));
    if (field == 1 && (key & 7) == 2) check_piece(v, pieces.size(), pieces);
    if ((field != 3 && field != 5) || (key & 7) != 2) continue;
    const char* spec = field == 3 ? "normalizer_spec" : "denormalizer_spec";
    Wire sub{v, 0, spec};
    while (!sub.done()) {
      const uint64_t k = sub.varint();
      const std::string_view sv = sub.value(k >> 3, int(k & 7));
      if ((k >> 3) == 2 && (k & 7) == 2 && !sv.empty()) check_charsmap(sv, spec);
    }
  }
}

}  // namespace

// ---- Tokenizer ----

std::unique_ptr<Tokenizer> Tokenizer::deserialize(std::string bytes) {
  ATTN_CHECK(bytes.compare(0, kMagic.size(), kMagic) == 0,
             "Tokenizer::deserialize: expected bytes starting with 'attn-tokenizer 1 ', found ",
             bytes.empty() ? std::string("no bytes") : "'" + shown(bytes, 24) + "'");
  const size_t nl = bytes.find('\n', kMagic.size());
  ATTN_CHECK(nl != std::string::npos && nl - kMagic.size() <= 32,
             "Tokenizer::deserialize: expected a kind of at most 32 bytes and a newline after the magic, found '",
             shown(std::string_view(bytes).substr(kMagic.size()), 32), "'");
  const std::string kind = bytes.substr(kMagic.size(), nl - kMagic.size());
  const std::string_view payload = std::string_view(bytes).substr(nl + 1);
  if (kind == "sentencepiece") return SentencePieceTokenizer::from_serialized_proto(payload);
  // decode_utf8 checks the alphabet is UTF-8; at most one code point per byte is allocated.
  if (kind == "char") return std::make_unique<CharTokenizer>(decode_utf8(payload, "Tokenizer::deserialize: char alphabet"));
  fail("Tokenizer::deserialize: unknown tokenizer kind '", shown(kind, 32), "', expected sentencepiece or char");
}

// ---- SentencePiece ----

SentencePieceTokenizer::SentencePieceTokenizer() : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::train(const std::vector<std::string>& sentences,
                                                                      int64_t vocab_size,
                                                                      const std::string& model_type,
                                                                      double character_coverage) {
  SentencePieceOptions o;
  o.vocab_size = vocab_size;
  o.model_type = model_type;
  o.character_coverage = character_coverage;
  return train(sentences, o);
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::train(const std::vector<std::string>& sentences,
                                                                      const SentencePieceOptions& o) {
  ATTN_CHECK(o.model_type == "unigram" || o.model_type == "bpe",
             "SentencePieceTokenizer::train: expected model_type unigram or bpe, got '", o.model_type, "'");
  ATTN_CHECK(o.vocab_size > 4, "SentencePieceTokenizer::train: expected vocab_size > 4, got ", o.vocab_size);
  ATTN_CHECK(o.character_coverage > 0 && o.character_coverage <= 1,
             "SentencePieceTokenizer::train: expected character_coverage in (0, 1], got ", o.character_coverage);
  ATTN_CHECK(!sentences.empty(), "SentencePieceTokenizer::train: expected at least one sentence, got none");
  for (size_t i = 0; i < sentences.size(); ++i)
    check_utf8(sentences[i], detail::cat("SentencePieceTokenizer::train: sentence ", i));
  std::ostringstream cov;
  cov.precision(17);
  cov << o.character_coverage;
  const std::unordered_map<std::string, std::string> kwargs = {
      {"model_type", o.model_type},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"character_coverage", cov.str()},
      {"normalization_rule_name", o.normalization},
      {"pad_id", "0"}, {"unk_id", "1"}, {"bos_id", "2"}, {"eos_id", "3"},
      {"num_threads", std::to_string(std::max(1, o.num_threads))},
      {"max_sentence_length", std::to_string(o.max_sentence_length)},
      {"input_sentence_size", "0"},          // every sentence, no sampling
      {"shuffle_input_sentence", "false"},
      {"minloglevel", "1"},                  // no INFO lines on stderr
  };
  VectorIterator it(sentences);
  std::string proto;
  const auto status = sentencepiece::SentencePieceTrainer::Train(kwargs, &it, &proto);
  // A corpus too small for the vocabulary is the likely user error (e.g. --limit-train with the default
  // --vocab-size): say which setting to lower.
  const bool too_big = !status.ok() && status.ToString().find("Vocabulary size too high") != std::string::npos;
  ATTN_CHECK(status.ok(), "SentencePieceTokenizer::train (", o.model_type, ", vocab ", o.vocab_size, ", ",
             sentences.size(), " sentences): ", status.ToString(),
             too_big ? " (these sentences hold fewer pieces than the vocabulary asks: lower the vocabulary size, "
                       "e.g. attn train --vocab-size)"
                     : "");
  return from_serialized_proto(proto);
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_serialized_proto(std::string_view proto) {
  check_model_proto(proto);
  std::unique_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer());
  sentencepiece::util::Status status;
  try {
    status = t->sp_->LoadFromSerializedProto(proto);
  } catch (const std::exception& e) {   // SentencePiece's own checks failing in an unforeseen way
    fail("SentencePieceTokenizer: SentencePiece failed on a model of ", proto.size(), " bytes: ", e.what());
  }
  ATTN_CHECK(status.ok(), "SentencePieceTokenizer: expected a serialized SentencePiece ModelProto (",
             proto.size(), " bytes), found: ", status.ToString());
  const auto& sp = *t->sp_;
  ATTN_CHECK(sp.pad_id() == kPadId && sp.unk_id() == kUnkId && sp.bos_id() == kBosId && sp.eos_id() == kEosId,
             "SentencePieceTokenizer: expected special ids pad 0, unk 1, bos 2, eos 3 (models/seq2seq.h), "
             "found pad ", sp.pad_id(), ", unk ", sp.unk_id(), ", bos ", sp.bos_id(), ", eos ", sp.eos_id());
  t->proto_ = std::string(proto);
  return t;
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::load(const std::string& model_path) {
  std::ifstream f(model_path, std::ios::binary);
  ATTN_CHECK(bool(f), "SentencePieceTokenizer::load: cannot open ", model_path);
  std::ostringstream ss;
  ss << f.rdbuf();
  try {
    return from_serialized_proto(ss.str());
  } catch (const Error& e) {
    fail(model_path, ": ", e.what());
  }
}

std::vector<int64_t> SentencePieceTokenizer::encode(std::string_view text) const {
  check_utf8(text, "SentencePieceTokenizer::encode");
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  ATTN_CHECK(status.ok(), "SentencePieceTokenizer::encode: ", status.ToString());
  return std::vector<int64_t>(ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::decode(const std::vector<int64_t>& ids) const {
  const int64_t n = vocab_size();
  std::vector<int> keep;
  keep.reserve(ids.size());
  for (int64_t id : ids) {
    check_id(id, n, "SentencePieceTokenizer::decode");
    if (id == kPadId || id == kBosId || id == kEosId) continue;
    keep.push_back(int(id));
  }
  std::string out;
  const auto status = sp_->Decode(keep, &out);
  ATTN_CHECK(status.ok(), "SentencePieceTokenizer::decode: ", status.ToString());
  return out;
}

int64_t SentencePieceTokenizer::vocab_size() const { return sp_->GetPieceSize(); }

std::string SentencePieceTokenizer::id_to_piece(int64_t id) const {
  check_id(id, vocab_size(), "SentencePieceTokenizer::id_to_piece");
  return sp_->IdToPiece(int(id));
}

std::string SentencePieceTokenizer::serialize() const { return header("sentencepiece") + proto_; }

// ---- characters ----

CharTokenizer::CharTokenizer(std::u32string alphabet) : alphabet_(std::move(alphabet)) {
  index_.reserve(alphabet_.size());
  for (size_t i = 0; i < alphabet_.size(); ++i) {
    const char32_t c = alphabet_[i];
    ATTN_CHECK(c <= 0x10FFFF && !(c >= 0xD800 && c <= 0xDFFF), "CharTokenizer: expected Unicode scalar values, got ",
               uint32_t(c), " at position ", i);
    index_.emplace_back(c, int64_t(i) + 4);
  }
  std::sort(index_.begin(), index_.end());
  for (size_t i = 1; i < index_.size(); ++i)
    ATTN_CHECK(index_[i].first != index_[i - 1].first, "CharTokenizer: expected distinct code points, U+",
               uint32_t(index_[i].first), " appears twice");
}

std::unique_ptr<CharTokenizer> CharTokenizer::build(const std::vector<std::string>& texts, int64_t min_count) {
  std::unordered_map<char32_t, int64_t> counts;
  for (size_t i = 0; i < texts.size(); ++i)
    for (char32_t c : decode_utf8(texts[i], detail::cat("CharTokenizer::build: text ", i))) ++counts[c];
  std::u32string alphabet;
  for (const auto& [c, n] : counts)
    if (n >= min_count) alphabet.push_back(c);
  std::sort(alphabet.begin(), alphabet.end());
  return std::make_unique<CharTokenizer>(std::move(alphabet));
}

std::vector<int64_t> CharTokenizer::encode(std::string_view text) const {
  const std::u32string cps = decode_utf8(text, "CharTokenizer::encode");
  std::vector<int64_t> ids;
  ids.reserve(cps.size());
  for (char32_t c : cps) {
    auto it = std::lower_bound(index_.begin(), index_.end(), std::make_pair(c, int64_t(0)));
    ids.push_back(it != index_.end() && it->first == c ? it->second : kUnkId);
  }
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int64_t>& ids) const {
  const int64_t n = vocab_size();
  std::string out;
  for (int64_t id : ids) {
    check_id(id, n, "CharTokenizer::decode");
    if (id == kPadId || id == kBosId || id == kEosId) continue;
    if (id == kUnkId) out += "\xE2\x81\x87";   // U+2047
    else append_utf8(out, alphabet_[size_t(id - 4)]);
  }
  return out;
}

std::string CharTokenizer::id_to_piece(int64_t id) const {
  check_id(id, vocab_size(), "CharTokenizer::id_to_piece");
  static const char* kSpecial[4] = {"<pad>", "<unk>", "<s>", "</s>"};
  if (id < 4) return kSpecial[id];
  std::string s;
  append_utf8(s, alphabet_[size_t(id - 4)]);
  return s;
}

std::string CharTokenizer::serialize() const { return header("char") + encode_utf8(alphabet_); }

}  // namespace attn::text

// BERT fine-tuning inputs (see include/attn/data/text_classification.h).
#include "attn/data/text_classification.h"

#include <algorithm>

#include "attn/core/error.h"
#include "attn/data/bert_batch.h"

namespace attn::data {

uint64_t seeded_next(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The modulo bias is below 2^-40 for the sizes used here.
int64_t seeded_draw(uint64_t& s, int64_t n) { return int64_t(seeded_next(s) % uint64_t(n)); }

std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> idx(size_t(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) idx[size_t(i)] = i;
  uint64_t s = seed;
  for (int64_t i = n - 1; i > 0; --i) std::swap(idx[size_t(i)], idx[size_t(seeded_draw(s, i + 1))]);
  return idx;
}

std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch) {
  uint64_t s = seed ^ (0xE90C4ULL + uint64_t(epoch) * 0x100000001B3ULL);
  return seeded_permutation(n, seeded_next(s));
}

EncodedText encode_text(const text::BertTokenizer& tok, const std::string& a, const std::string& b, int64_t label,
                        int64_t max_length) {
  text::BertEncodeOptions o;
  o.truncation = true;
  o.max_length = max_length;
  o.warn = false;
  const text::BertEncoding e = b.empty() ? tok.encode(a, o) : tok.encode_pair(a, b, o);
  return {e.ids, e.token_type_ids, {label}, {}, {}};
}

EncodedText encode_tagged(const text::BertTokenizer& tok, const std::vector<std::string>& words,
                          const std::vector<int64_t>& tags, int64_t max_length) {
  ATTN_CHECK(words.size() == tags.size(), "encode_tagged: expected one tag per word, got ", words.size(),
             " words and ", tags.size(), " tags");
  ATTN_CHECK(max_length >= 3, "encode_tagged: expected max_length >= 3, got ", max_length);
  EncodedText e;
  e.ids.push_back(tok.cls_id());
  e.labels.push_back(kIgnoreLabel);
  e.word_token.assign(words.size(), -1);
  e.word_tags = tags;
  for (size_t w = 0; w < words.size(); ++w) {
    const std::vector<text::BertToken> pieces = tok.tokenize(words[w]);
    for (size_t k = 0; k < pieces.size() && int64_t(e.ids.size()) < max_length - 1; ++k) {
      if (k == 0) e.word_token[w] = int64_t(e.ids.size());
      e.ids.push_back(pieces[k].id);
      e.labels.push_back(k == 0 ? tags[w] : kIgnoreLabel);
    }
  }
  e.ids.push_back(tok.sep_id());
  e.labels.push_back(kIgnoreLabel);
  e.types.assign(e.ids.size(), 0);
  return e;
}

TextBatch make_text_batch(const std::vector<EncodedText>& examples, const std::vector<int64_t>& index,
                          int64_t pad_id) {
  ATTN_CHECK(!index.empty(), "make_text_batch: expected at least one example, got none");
  const auto B = int64_t(index.size());
  int64_t T = 0;
  auto per_token = [](const EncodedText& e) { return e.labels.size() == e.ids.size() && !e.word_tags.empty(); };
  bool token_labels = false;
  for (size_t k = 0; k < index.size(); ++k) {
    const int64_t i = index[k];
    ATTN_CHECK(i >= 0 && i < int64_t(examples.size()), "make_text_batch: example ", i, " outside [0, ",
               examples.size(), ")");
    const EncodedText& e = examples[size_t(i)];
    ATTN_CHECK(e.types.size() == e.ids.size() && (per_token(e) || e.labels.size() == 1), "make_text_batch: example ",
               i, " has ", e.ids.size(), " ids, ", e.types.size(), " types and ", e.labels.size(),
               " labels (expected one label, or one per token)");
    if (k == 0) token_labels = per_token(e);
    ATTN_CHECK(per_token(e) == token_labels, "make_text_batch: example ", i, " has ",
               token_labels ? "one label" : "a label per token", ", example ", index[0], " ",
               token_labels ? "a label per token" : "one label");
    T = std::max<int64_t>(T, int64_t(e.ids.size()));
  }
  // ids, segments and mask padded as every BERT batch is (data/bert_batch.h); the labels here.
  std::vector<BertSequence> seqs;
  seqs.reserve(size_t(B));
  for (const int64_t i : index) seqs.push_back({examples[size_t(i)].ids, examples[size_t(i)].types});
  BertBatchOptions pad;
  pad.pad_id = pad_id;
  const BertBatch padded = make_bert_batch(seqs, pad);
  std::vector<int64_t> labels(size_t(token_labels ? B * T : B), kIgnoreLabel);
  for (int64_t b = 0; b < B; ++b) {
    const EncodedText& e = examples[size_t(index[size_t(b)])];
    if (token_labels) std::copy(e.labels.begin(), e.labels.end(), labels.begin() + b * T);
    else labels[size_t(b)] = e.labels.at(0);
  }
  TextBatch out{padded.input_ids, padded.token_type_ids, padded.attention_mask, Tensor(), padded.tokens};
  out.labels = token_labels ? Tensor::from_vector(labels, {B, T}) : Tensor::from_vector(labels, {B});
  return out;
}

}  // namespace attn::data

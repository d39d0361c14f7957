// Fine-tuned BERT classifiers and taggers, and their metrics (attn/infer/text_classify.h).
#include "attn/infer/text_classify.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "attn/autograd/grad_mode.h"
#include "attn/core/error.h"
#include "attn/data/text_classification.h"
#include "attn/data/wordnet_tasks.h"
#include "attn/io/checkpoint.h"
#include "attn/ops/softmax.h"

namespace attn::infer {

double macro_f1(const std::vector<int64_t>& gold, const std::vector<int64_t>& pred, int64_t num_classes) {
  ATTN_CHECK(gold.size() == pred.size(), "macro_f1: expected as many predictions as gold labels, got ", pred.size(),
             " and ", gold.size());
  std::vector<int64_t> tp(size_t(num_classes), 0), fp(size_t(num_classes), 0), fn(size_t(num_classes), 0);
  for (size_t i = 0; i < gold.size(); ++i) {
    ATTN_CHECK(gold[i] >= 0 && gold[i] < num_classes && pred[i] >= 0 && pred[i] < num_classes, "macro_f1: labels ",
               gold[i], " / ", pred[i], " outside [0, ", num_classes, ")");
    if (gold[i] == pred[i]) {
      ++tp[size_t(gold[i])];
    } else {
      ++fp[size_t(pred[i])];
      ++fn[size_t(gold[i])];
    }
  }
  double sum = 0;
  int64_t classes = 0;
  for (size_t c = 0; c < size_t(num_classes); ++c) {
    if (tp[c] + fp[c] + fn[c] == 0) continue;
    sum += 2.0 * double(tp[c]) / double(2 * tp[c] + fp[c] + fn[c]);
    ++classes;
  }
  return classes ? sum / double(classes) : 0.0;
}

std::vector<Span> bio_spans(const std::vector<std::string>& tags) {
  std::vector<Span> spans;
  std::string type;   // the open chunk's type ("": none)
  for (size_t i = 0; i <= tags.size(); ++i) {
    const std::string tag = i < tags.size() ? tags[i] : "O";
    const char kind = tag.size() >= 2 && tag[1] == '-' && (tag[0] == 'B' || tag[0] == 'I') ? tag[0] : 'O';
    const std::string t = kind == 'O' ? "" : tag.substr(2);
    const bool continues = kind == 'I' && !type.empty() && t == type;
    if (!type.empty() && !continues) {
      spans.back().last = int64_t(i) - 1;
      type.clear();
    }
    if (kind != 'O' && !continues) {
      spans.push_back({int64_t(i), int64_t(i), t});
      type = t;
    }
  }
  return spans;
}

SpanScore span_f1(const std::vector<std::vector<std::string>>& gold, const std::vector<std::vector<std::string>>& pred) {
  ATTN_CHECK(gold.size() == pred.size(), "span_f1: expected as many predicted sentences as gold ones, got ",
             pred.size(), " and ", gold.size());
  SpanScore s;
  for (size_t i = 0; i < gold.size(); ++i) {
    ATTN_CHECK(gold[i].size() == pred[i].size(), "span_f1: sentence ", i, " has ", gold[i].size(),
               " gold tags and ", pred[i].size(), " predicted");
    const std::vector<Span> g = bio_spans(gold[i]), p = bio_spans(pred[i]);
    s.gold += int64_t(g.size());
    s.predicted += int64_t(p.size());
    for (const Span& x : p) s.correct += std::find(g.begin(), g.end(), x) != g.end();
  }
  s.precision = s.predicted ? double(s.correct) / double(s.predicted) : 0.0;
  s.recall = s.gold ? double(s.correct) / double(s.gold) : 0.0;
  s.f1 = s.precision + s.recall > 0 ? 2 * s.precision * s.recall / (s.precision + s.recall) : 0.0;
  return s;
}

TextModel load_text_model(const std::string& checkpoint, DType linear_dtype) {
  BertSource src;
  src.checkpoint = checkpoint;
  src.linear_dtype = linear_dtype;
  TextModel m{load_bert_pipeline(src), false, {}, 128};
  const models::BertConfig& c = m.pipeline.model->cfg();
  ATTN_CHECK(c.architecture == models::BertArchitecture::sequence_classification ||
                 c.architecture == models::BertArchitecture::token_classification,
             "'", checkpoint, "' holds a ", models::bert_architecture_name(c.architecture),
             ": expected a BertForSequenceClassification or BertForTokenClassification (attn train --task classify | tag)");
  m.tagger = c.architecture == models::BertArchitecture::token_classification;
  ATTN_CHECK(int64_t(c.id2label.size()) == c.num_labels, "'", checkpoint, "': expected id2label with ", c.num_labels,
             " labels (num_labels) in its config, found ", c.id2label.size());
  for (const auto& [id, name] : c.id2label) m.labels.push_back(name);
  m.max_length = m.pipeline.max_length;
  const nlohmann::json meta = io::read_checkpoint_metadata(checkpoint);
  if (meta.contains("text_task") && meta["text_task"].contains("max_length"))
    m.max_length = std::min(m.max_length, meta["text_task"]["max_length"].get<int64_t>());
  return m;
}

namespace {

// Logits of one encoded text: (labels) or (T, labels).
Tensor text_logits(const TextModel& m, const data::EncodedText& e) {
  const data::TextBatch b = data::make_text_batch({e}, {0}, m.pipeline.tokenizer.pad_id());
  NoGradGuard ng;
  Tensor logits = m.pipeline.model->forward({b.input_ids, b.token_type_ids, b.attention_mask}).logits;
  return logits.select(0, 0).contiguous();
}

int64_t argmax_row(const float* p, int64_t n) { return int64_t(std::max_element(p, p + n) - p); }

}  // namespace

TextClass classify_text(const TextModel& m, const std::string& text, const std::string& text_b) {
  ATTN_CHECK(!m.tagger, "classify-text: the model is a token classifier (BertForTokenClassification): use attn tag");
  const Tensor probs = softmax(text_logits(m, data::encode_text(m.pipeline.tokenizer, text, text_b, 0, m.max_length)));
  TextClass c;
  c.probs = probs.to_vector<float>();
  c.index = argmax_row(c.probs.data(), int64_t(c.probs.size()));
  c.label = m.labels.at(size_t(c.index));
  return c;
}

TaggedText tag_text(const TextModel& m, const std::string& text) {
  ATTN_CHECK(m.tagger, "tag: the model is a sequence classifier (BertForSequenceClassification): use attn classify-text");
  TaggedText t;
  t.words = data::split_words(text);
  const data::EncodedText e = data::encode_tagged(m.pipeline.tokenizer, t.words,
                                                  std::vector<int64_t>(t.words.size(), 0), m.max_length);
  const Tensor logits = text_logits(m, e);   // (T, L)
  const int64_t L = logits.size(1);
  const float* p = logits.data<float>();
  for (size_t k = 0; k < e.ids.size(); ++k) {
    t.tokens.push_back(m.pipeline.tokenizer.id_to_token(e.ids[k]));
    t.token_tags.push_back(m.labels.at(size_t(argmax_row(p + int64_t(k) * L, L))));
  }
  for (size_t w = 0; w < t.words.size(); ++w)
    t.tags.push_back(e.word_token[w] < 0 ? "O" : t.token_tags[size_t(e.word_token[w])]);
  t.spans = bio_spans(t.tags);
  return t;
}

}  // namespace attn::infer

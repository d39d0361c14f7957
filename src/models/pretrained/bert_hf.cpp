// Hugging Face transformers' BERT layout -> attn's BERT (attn/models/bert_foreign.h): config.json, the
// key map (prefix, legacy LayerNorm names, packed q/k/v, the tied decoder), the checks against the
// model, and the streamed load.
#include "attn/models/bert_foreign.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>

#include "attn/autograd/grad_mode.h"
#include "attn/core/error.h"
#include "attn/core/json_config.h"
#include "attn/core/memory.h"
#include "attn/models/name_maps.h"
#include "attn/nn/init.h"
#include "attn/ops/combine.h"

namespace attn::models {

// ---------------------------------------------------------------- config.json

BertConfig bert_config_from_hf(const nlohmann::json& j, BertConfig c) {
  if (!j.is_object())
    throw ConfigError("foreign weights: expected a Hugging Face config.json object, got " + describe_json(j));
  // transformers writes null for a setting left unset: its default. Keys attn does not use are allowed.
  ConfigReader r(j, "foreign weights: config.json");
  r.null_is_absent();
  if (r.has("model_type"))
    r.check(j.at("model_type") == "bert", "model_type", "\"bert\" (a BERT config)", j.at("model_type"));
  const std::string act = r.get_or("hidden_act", "gelu");
  r.check(act == "gelu", "hidden_act", "\"gelu\" (attn's BERT uses the exact GELU)", act);
  const std::string pos = r.get_or("position_embedding_type", "absolute");
  r.check(pos == "absolute", "position_embedding_type", "\"absolute\"", pos);
  c.vocab_size = r.get_or("vocab_size", c.vocab_size, Range::positive);
  c.hidden_size = r.get_or("hidden_size", c.hidden_size, Range::positive);
  c.num_hidden_layers = r.get_or("num_hidden_layers", c.num_hidden_layers, Range::positive);
  c.num_attention_heads = r.get_or("num_attention_heads", c.num_attention_heads, Range::positive);
  c.intermediate_size = r.get_or("intermediate_size", c.intermediate_size, Range::positive);
  c.max_position_embeddings = r.get_or("max_position_embeddings", c.max_position_embeddings, Range::positive);
  c.type_vocab_size = r.get_or("type_vocab_size", c.type_vocab_size, Range::positive);
  c.layer_norm_eps = r.get_or("layer_norm_eps", c.layer_norm_eps, Range::positive);
  c.hidden_dropout_prob = r.get_or("hidden_dropout_prob", c.hidden_dropout_prob, Range::probability);
  c.attention_probs_dropout_prob =
      r.get_or("attention_probs_dropout_prob", c.attention_probs_dropout_prob, Range::probability);
  c.pad_token_id = r.get_or("pad_token_id", c.pad_token_id, Range::non_negative);
  if (r.has("classifier_dropout")) c.classifier_dropout = r.get<double>("classifier_dropout", Range::probability);
  if (r.has("architectures")) {
    const auto archs = r.get<std::vector<std::string>>("architectures");
    if (!archs.empty()) {
      try {
        c.architecture = parse_bert_architecture(archs.front());
      } catch (const Error&) {
        r.fail("architectures", "a BERT class attn has (BertModel, BertForPreTraining, BertForMaskedLM, "
               "BertForSequenceClassification, BertForTokenClassification; or give \"architecture\" in the "
               "model config)", nlohmann::json(archs.front()).dump());
      }
    }
  }
  c.id2label.clear();
  if (r.has("id2label")) {
    ConfigReader labels = r.object("id2label");
    const nlohmann::json& map = j.at("id2label");
    bool placeholder = true;
    std::map<int64_t, std::string> names;
    for (const auto& [k, v] : map.items()) {
      char* end = nullptr;
      const long long id = std::strtoll(k.c_str(), &end, 10);
      labels.check(!k.empty() && end && *end == '\0' && id >= 0 && id < int64_t(map.size()), k,
                   "a label id in [0, " + std::to_string(map.size()) + ")", k);
      names[id] = labels.get<std::string>(k);
      placeholder &= names[id] == "LABEL_" + std::to_string(id);
    }
    c.num_labels = int64_t(map.size());
    if (!placeholder) c.id2label = names;   // transformers' LABEL_k placeholders name nothing
  }
  if (r.has("num_labels")) c.num_labels = r.get<int64_t>("num_labels", Range::positive);
  if (!c.id2label.empty() && int64_t(c.id2label.size()) != c.num_labels) c.id2label.clear();
  return c;
}

namespace {

// ---------------------------------------------------------------- keys

// A file key (an alias too) with its entry in the file.
struct BertSrc {
  std::string name;
  size_t entry = 0;
  Shape shape;
};

// A model key and the file keys it is loaded from (3 for a packed qkv: query, key, value).
struct BertTarget {
  std::string key;
  std::vector<std::optional<size_t>> parts;   // indices into the sources
};

// A file key without "module." and "bert.", with LayerNorm's legacy names and the decoder's bias alias
// resolved: transformers' key as a BertModel / BertFor* class without prefix names it.
std::string bert_canonical(std::string k) {
  if (k.starts_with("module.")) k = k.substr(7);
  if (k.starts_with("bert.")) k = k.substr(5);
  if (k.ends_with("LayerNorm.gamma")) k = k.substr(0, k.size() - 5) + "weight";
  else if (k.ends_with("LayerNorm.beta")) k = k.substr(0, k.size() - 4) + "bias";
  if (k == "cls.predictions.decoder.bias") k = "cls.predictions.bias";
  return k;
}

bool bert_base_key(const std::string& k) {
  return k.starts_with("embeddings.") || k.starts_with("encoder.") || k.starts_with("pooler.");
}

// "encoder.layer.3.attention.self.key.weight" -> {"encoder.layer.3.attention.self.qkv.weight", 1}.
std::optional<std::pair<std::string, size_t>> bert_qkv_part(const std::string& k) {
  static const char* parts[] = {"query", "key", "value"};
  for (size_t p = 0; p < 3; ++p) {
    const std::string mid = std::string(".attention.self.") + parts[p] + ".";
    const size_t at = k.find(mid);
    if (at != std::string::npos && k.starts_with("encoder.layer."))
      return std::make_pair(k.substr(0, at) + ".attention.self.qkv." + k.substr(at + mid.size()), p);
  }
  return std::nullopt;
}

// A model key as transformers names it in a file (qkv: its three parts).
std::string bert_hf_name(const std::string& key, size_t part = 3) {
  static const char* parts[] = {"query", "key", "value"};
  const std::string mid = ".attention.self.qkv.";
  const size_t at = key.find(mid);
  if (at == std::string::npos) return key;
  const std::string which = part < 3 ? parts[part] : "{query,key,value}";
  return key.substr(0, at) + ".attention.self." + which + "." + key.substr(at + mid.size());
}

struct BertPlan {
  std::vector<BertTarget> targets;
  std::optional<size_t> decoder_weight;   // cls.predictions.decoder.weight (tied: checked, not read)
  std::vector<std::string> skipped, unexpected;
};

BertPlan bert_plan(const std::vector<BertSrc>& src, const std::map<std::string, Tensor>& mine, bool prefixed) {
  BertPlan plan;
  std::map<std::string, size_t> at;   // model key -> target
  for (size_t i = 0; i < src.size(); ++i) {
    const std::string c = bert_canonical(src[i].name);
    if (c == "embeddings.position_ids" || c == "embeddings.token_type_ids") continue;   // buffers
    if (c == "cls.predictions.decoder.weight") {
      if (mine.count(c) && !plan.decoder_weight) plan.decoder_weight = i;
      else if (!mine.count(c)) plan.skipped.push_back(src[i].name);
      continue;
    }
    const auto qkv = bert_qkv_part(c);
    const std::string base = qkv ? qkv->first : c;
    const std::string key = (prefixed && bert_base_key(base) ? "bert." : "") + base;
    if (!mine.count(key)) {
      const bool head = c.starts_with("cls.") || c.starts_with("classifier.") || c.starts_with("pooler.");
      (head ? plan.skipped : plan.unexpected).push_back(src[i].name);
      continue;
    }
    auto [it, fresh] = at.try_emplace(key, plan.targets.size());
    if (fresh) plan.targets.push_back({key, std::vector<std::optional<size_t>>(qkv ? 3 : 1)});
    auto& slot = plan.targets[it->second].parts[qkv ? qkv->second : 0];
    if (!slot) slot = i;   // a repeated key (an alias): the first is loaded
  }
  return plan;
}

// ---------------------------------------------------------------- checks

std::string bert_shape_text(const Shape& s) { return shape_str(s); }

// The sizes the weights imply, against the model's config: "hidden_size 768 expected (...), the weights
// have 256 (embeddings.word_embeddings.weight is (30522, 256))"; "" when they agree.
std::string bert_size_mismatch(const std::vector<BertSrc>& src, const BertConfig& c, bool has_classifier) {
  std::map<std::string, const BertSrc*> by;
  int64_t layers = 0;
  for (const BertSrc& s : src) {
    const std::string k = bert_canonical(s.name);
    by.emplace(k, &s);
    if (k.starts_with("encoder.layer.")) {
      const int64_t n = std::strtoll(k.c_str() + 14, nullptr, 10);
      layers = std::max(layers, n + 1);
    }
  }
  std::string out;
  auto check = [&](const char* what, int64_t want, const char* key, size_t dim) {
    auto it = by.find(key);
    if (it == by.end() || it->second->shape.size() <= dim || it->second->shape[dim] == want) return;
    out += detail::cat(out.empty() ? "" : "; ", what, " ", want, " expected, the weights have ", it->second->shape[dim],
                       " (", it->second->name, " is ", bert_shape_text(it->second->shape), ")");
  };
  check("vocab_size", c.vocab_size, "embeddings.word_embeddings.weight", 0);
  check("hidden_size", c.hidden_size, "embeddings.word_embeddings.weight", 1);
  check("max_position_embeddings", c.max_position_embeddings, "embeddings.position_embeddings.weight", 0);
  check("type_vocab_size", c.type_vocab_size, "embeddings.token_type_embeddings.weight", 0);
  check("intermediate_size", c.intermediate_size, "encoder.layer.0.intermediate.dense.weight", 0);
  if (has_classifier) check("num_labels", c.num_labels, "classifier.weight", 0);
  if (layers > 0 && layers != c.num_hidden_layers)
    out += detail::cat(out.empty() ? "" : "; ", "num_hidden_layers ", c.num_hidden_layers,
                       " expected, the weights have ", layers, " (encoder.layer.0 to ", layers - 1, ")");
  return out;
}

// Missing and mis-shaped keys by transformers' names, and unexpected ones ("" when the plan loads).
std::string bert_key_mismatch(const BertPlan& plan, const std::vector<BertSrc>& src,
                              const std::map<std::string, Tensor>& mine, const std::vector<std::string>& order,
                              bool strict) {
  std::vector<std::string> missing, shaped;
  std::set<std::string> given;
  const Tensor& word = mine.at(mine.count("bert.embeddings.word_embeddings.weight")
                                   ? "bert.embeddings.word_embeddings.weight" : "embeddings.word_embeddings.weight");
  if (plan.decoder_weight && src[*plan.decoder_weight].shape != word.shape())
    shaped.push_back(detail::cat(src[*plan.decoder_weight].name, " is ", bert_shape_text(src[*plan.decoder_weight].shape),
                                 ", the model expects ", bert_shape_text(word.shape()), " (tied to the word embeddings)"));
  for (const BertTarget& t : plan.targets) {
    given.insert(t.key);
    bool whole = true;
    for (size_t p = 0; p < t.parts.size(); ++p)
      if (!t.parts[p]) {
        missing.push_back(bert_hf_name(t.key, p));
        whole = false;
      }
    if (!whole) continue;
    const Shape want = mine.at(t.key).shape();
    for (size_t p = 0; p < t.parts.size(); ++p) {
      Shape part = want;
      if (t.parts.size() == 3 && !part.empty()) part[0] /= 3;
      const BertSrc& s = src[*t.parts[p]];
      if (s.shape != part)
        shaped.push_back(detail::cat(s.name, " is ", bert_shape_text(s.shape), ", the model expects ", bert_shape_text(part)));
    }
  }
  for (const std::string& k : order)   // the model's own order
    if (!given.count(k) && k != "cls.predictions.decoder.weight") missing.push_back(bert_hf_name(k));
  std::string out;
  auto list = [&](const char* what, const std::vector<std::string>& v) {
    if (v.empty()) return;
    out += detail::cat(out.empty() ? "" : "; ", what, ": ");
    for (size_t i = 0; i < v.size() && i < 8; ++i) out += (i ? ", " : "") + v[i];
    if (v.size() > 8) out += detail::cat(", ... (", v.size() - 8, " more)");
  };
  if (strict) list("missing", missing);
  list("mis-shaped", shaped);
  if (strict) list("unexpected", plan.unexpected);
  return out;
}

std::vector<BertSrc> bert_sources(const io::SafetensorsReader& file) {
  std::vector<BertSrc> src;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < file.entries().size(); ++i) {
    src.push_back({file.entries()[i].name, i, file.entries()[i].shape});
    index.emplace(file.entries()[i].name, i);
  }
  for (const auto& [dup, kept] : alias_pairs(file.metadata(), [&](const std::string& k) { return index.count(k) > 0; }))
    src.push_back({dup, index.at(kept), file.entries()[index.at(kept)].shape});
  return src;
}

std::string bert_first_names(const std::vector<BertSrc>& src, size_t n) {
  std::string s;
  for (size_t i = 0; i < src.size() && i < n; ++i) s += (i ? ", " : "") + src[i].name;
  if (src.size() > n) s += detail::cat(", ... (", src.size() - n, " more)");
  return s.empty() ? "(none)" : s;
}

// The model: the registry entry's config, config.json, the overrides.
std::shared_ptr<BertPreTrainedModel> bert_build(const ForeignBertOptions& o) {
  const ModelEntry& entry = model_entry(o.model);
  nlohmann::json cfg = entry.defaults;
  ATTN_CHECK(cfg.contains("hidden_size") && cfg.contains("num_hidden_layers"), "foreign weights: model '", o.model,
             "' is a ", entry.task, " model, not a BERT");
  ATTN_CHECK(o.overrides.is_object(), "foreign weights: expected the model overrides as a JSON object, got ",
             o.overrides.dump());
  if (!o.hf_config.is_null()) {
    nlohmann::json hf = o.hf_config;
    if (o.overrides.contains("architecture") && hf.is_object()) hf.erase("architectures");   // the override decides
    cfg = bert_config_to_json(bert_config_from_hf(hf, bert_config_from_json(cfg)));
  }
  for (const auto& [k, v] : o.overrides.items()) cfg[k] = v;
  std::optional<nn::init::SkipRandomInit> skip;   // a strict load overwrites every parameter
  if (o.strict) skip.emplace(nn::init::SkipRandomInit::Fill::none);
  return create_bert(o.model, cfg);
}

}  // namespace

bool looks_like_bert(const io::SafetensorsReader& file) {
  bool words = false, layers = false;
  for (const BertSrc& s : bert_sources(file)) {
    const std::string k = bert_canonical(s.name);
    words |= k == "embeddings.word_embeddings.weight";
    layers |= k.starts_with("encoder.layer.");
  }
  return words && layers;
}

ForeignBert load_foreign_bert(const io::SafetensorsReader& file, const ForeignBertOptions& o) {
  const std::vector<BertSrc> src = bert_sources(file);
  const std::string where = "foreign weights '" + file.path() + "'";
  ATTN_CHECK(looks_like_bert(file), where, ": expected a BERT checkpoint ([bert.]embeddings.word_embeddings.weight "
             "and [bert.]encoder.layer.N.* keys), found other keys: ", bert_first_names(src, 6));
  ForeignBert r;
  try {
    r.model = bert_build(o);
  } catch (const Error& e) {
    fail(where, ": ", e.what());
  }
  const BertConfig& c = r.model->cfg();
  const std::string model = detail::cat("model '", o.model, "' (", bert_architecture_name(c.architecture),
                                        o.hf_config.is_null() ? "" : ", with config.json", ")");
  std::map<std::string, Tensor> mine;
  std::vector<std::string> order;
  for (auto& [k, t] : r.model->state_dict()) {
    mine.emplace(k, t);
    order.push_back(k);
  }
  const bool prefixed = mine.count("bert.embeddings.word_embeddings.weight") > 0;
  if (const std::string why = bert_size_mismatch(src, c, mine.count("classifier.weight") > 0); !why.empty())
    fail(where, ": the weights do not match ", model, ": ", why);
  BertPlan plan = bert_plan(src, mine, prefixed);
  if (const std::string why = bert_key_mismatch(plan, src, mine, order, o.strict); !why.empty())
    fail(where, ": the weights (transformers' names) do not match ", model, ": ", why);
  r.skipped = plan.skipped;
  NoGradGuard ng;
  for (const BertTarget& t : plan.targets) {
    if (std::any_of(t.parts.begin(), t.parts.end(), [](const auto& p) { return !p; })) continue;   // not strict
    Tensor& dst = mine.at(t.key);
    if (t.parts.size() == 1) {
      dst.copy_(file.read(src[*t.parts[0]].entry));
    } else {
      dst.copy_(concat({file.read(src[*t.parts[0]].entry), file.read(src[*t.parts[1]].entry),
                        file.read(src[*t.parts[2]].entry)}, 0));
    }
    release_cached_memory();
  }
  r.model->eval();
  return r;
}

}  // namespace attn::models

// BERT against a PyTorch module tree in transformers' layout (tests/golden/gen/bert.py), loaded through
// the real path: the generator's checkpoint file and config.json on disk, models::load_pretrained.
// Outputs (last hidden state, pooler, MLM and NSP logits, hidden states, attentions) at batch 4 with
// padding and token types, and one fine-tuning step's gradients (sequence and token classification with
// the fine-tuning tasks' loss, masked LM; cross-entropy)
// within 1e-4 * max(1, max |reference|) per tensor; the parameter counts of the registry's BERTs; the key
// variants of transformers' checkpoints; the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "attn/attn.h"
#include "attn/autograd/grad_mode.h"
#include "attn/models/bert.h"
#include "attn/models/bert_foreign.h"
#include "attn/models/pretrained.h"
#include "attn/nn/init.h"
#include "attn/ops/loss.h"
#include "attn/train/checkpoint.h"
#include "attn/train/tasks/pretrain.h"
#include "attn/train/tasks/sequence_classification.h"
#include "attn/train/trainer.h"
#include "errors.h"
#include "torch_ref.h"
#include "files.h"

using namespace attn;
using nlohmann::json;

namespace {

// Small, with an FFN width that is no multiple of the hidden size and 4 heads of 8.
const json kSmall = {{"vocab_size", 99},        {"hidden_size", 32},           {"num_hidden_layers", 2},
                     {"num_attention_heads", 4}, {"intermediate_size", 48},     {"max_position_embeddings", 16},
                     {"type_vocab_size", 2},     {"layer_norm_eps", 1e-12},     {"hidden_dropout_prob", 0.0},
                     {"attention_probs_dropout_prob", 0.0}, {"num_labels", 3}};

constexpr int64_t kB = 4, kT = 9;

// input_ids, token_type_ids, attention_mask (B, T): [CLS]-like id 2 first, two segments, rows padded to
// 9, 6, 4 and 7 tokens (padding id 0, type 0, mask 0).
test::Tensors inputs() {
  const int64_t len[kB] = {9, 6, 4, 7};
  std::vector<int64_t> ids(kB * kT), types(kB * kT), mask(kB * kT);
  uint64_t s = 12345;
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t t = 0; t < kT; ++t) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      const bool on = t < len[b];
      ids[b * kT + t] = !on ? 0 : t == 0 ? 2 : 3 + int64_t((s >> 33) % 96);
      types[b * kT + t] = on && t >= len[b] / 2 ? 1 : 0;
      mask[b * kT + t] = on ? 1 : 0;
    }
  return {{"input_ids", Tensor::from_vector(ids, {kB, kT})},
          {"token_type_ids", Tensor::from_vector(types, {kB, kT})},
          {"attention_mask", Tensor::from_vector(mask, {kB, kT})}};
}

models::BertInputs bert_inputs(const test::Tensors& in) {
  return {in.at("input_ids"), in.at("token_type_ids"), in.at("attention_mask")};
}

std::string bytes_of(const Tensor& t) { return std::string(reinterpret_cast<const char*>(t.data<uint8_t>()), size_t(t.numel())); }

// The generator's file and config.json written as transformers keeps them; returns the weights' path.
std::string write_checkpoint(const test::Tensors& ref, const std::string& name, bool with_config = true) {
  const std::string dir = test::scratch_dir("attn_bert_test") + "/" + name;
  std::filesystem::create_directories(dir);
  test::write_bytes(dir + "/model.safetensors", bytes_of(ref.at("file")));
  if (with_config) test::write_bytes(dir + "/config.json", bytes_of(ref.at("config")));
  return dir + "/model.safetensors";
}

json gen_args(const std::string& arch, const json& layout = json::object(), int seed = 5) {
  return {{"seed", seed}, {"architecture", arch}, {"config", kSmall}, {"layout", layout}};
}

std::shared_ptr<models::BertPreTrainedModel> load(const std::string& path, const std::string& model = "bert-mini",
                                                  json overrides = json::object()) {
  models::PretrainedSource s = models::PretrainedSource::foreign(path, model);
  s.image_classifier_only = false;
  s.model_config = std::move(overrides);
  models::Pretrained p = models::load_pretrained(s);
  EXPECT_EQ(p.model, nullptr);
  EXPECT_FALSE(p.module->is_training());
  return std::dynamic_pointer_cast<models::BertPreTrainedModel>(p.module);
}

// max |a - b|, and the bound 1e-4 * max(1, max |b|) it must stay within.
struct Delta {
  double max_abs = 0, bound = 0;
};
Delta delta(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  const auto u = a.to_vector<double>(), v = b.to_vector<double>();
  Delta d;
  double m = 0;
  for (size_t i = 0; i < u.size() && i < v.size(); ++i) {
    d.max_abs = std::max(d.max_abs, std::abs(u[i] - v[i]));
    m = std::max(m, std::abs(v[i]));
  }
  d.bound = 1e-4 * std::max(1.0, m);
  return d;
}

void expect_close(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_TRUE(a.defined()) << what;
  const Delta d = delta(a, b);
  std::printf("  %-58s max |delta| %.3g (bound %.3g)\n", what.c_str(), d.max_abs, d.bound);
  EXPECT_LE(d.max_abs, d.bound) << what;
}

// The rows of t (B, T, ...) at the positions where mask (B, T) is nonzero (on = true) or zero: (N, ...).
Tensor rows_where(const Tensor& t, const Tensor& mask, bool on = true) {
  const auto m = mask.to_vector<int64_t>();
  std::vector<int64_t> idx;
  for (size_t i = 0; i < m.size(); ++i)
    if ((m[i] != 0) == on) idx.push_back(int64_t(i));
  return index_select(t.reshape({t.size(0) * t.size(1), -1}), 0, Tensor::from_vector(idx, {int64_t(idx.size())}));
}

// The packed path's contract: the reference at the valid positions, 0 at the padded ones.
void expect_close_valid(const Tensor& a, const Tensor& ref, const Tensor& mask, const std::string& what) {
  ASSERT_TRUE(a.defined()) << what;
  ASSERT_EQ(a.shape(), ref.shape()) << what;
  expect_close(rows_where(a, mask), rows_where(ref, mask), what + " (valid positions)");
  const Tensor pad = rows_where(a, mask, false);
  if (pad.numel() > 0) EXPECT_EQ(max(abs(pad)).item(), 0.0) << what << " at padded positions";
}

Tensor run_mlm(models::BertPreTrainedModel& m) {
  NoGradGuard ng;
  return m.forward(bert_inputs(inputs())).prediction_logits;
}

}  // namespace

// ---------------------------------------------------------------- registry

TEST(Bert, RegistryParameterCountsEqualTorch) {
  struct Case {
    const char* name;
    json torch_config;
  };
  const json base = {{"vocab_size", 30522}, {"hidden_size", 768},  {"num_hidden_layers", 12},
                     {"num_attention_heads", 12}, {"intermediate_size", 3072}, {"max_position_embeddings", 512},
                     {"type_vocab_size", 2}};
  json cased = base, large = base, mini = base, small = base;
  cased["vocab_size"] = 28996;
  large.update({{"hidden_size", 1024}, {"num_hidden_layers", 24}, {"num_attention_heads", 16}, {"intermediate_size", 4096}});
  json large_cased = large;
  large_cased["vocab_size"] = 28996;
  mini.update({{"hidden_size", 256}, {"num_hidden_layers", 4}, {"num_attention_heads", 4}, {"intermediate_size", 1024}});
  small.update({{"hidden_size", 512}, {"num_hidden_layers", 4}, {"num_attention_heads", 8}, {"intermediate_size", 2048}});
  for (const Case& c : {Case{"bert-base-uncased", base}, Case{"bert-base-cased", cased}, Case{"bert-large-uncased", large},
                        Case{"bert-large-cased", large_cased}, Case{"bert-mini", mini}, Case{"bert-small", small}}) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(models::model_entry(c.name).task, models::kMaskedLM);
    const auto want = test::torch_ref("bert.count", {}, {{"config", c.torch_config}}).at("counts").to_vector<int64_t>();
    std::shared_ptr<models::BertPreTrainedModel> m;
    {
      nn::init::SkipRandomInit skip(nn::init::SkipRandomInit::Fill::none);   // address space only
      m = models::create_bert(c.name);
    }
    EXPECT_EQ(m->num_base_parameters(), want[0]);
    EXPECT_EQ(m->num_parameters(), want[1]);   // BertForPreTraining, the tied decoder counted once
    std::printf("  %-20s BertModel %lld, BertForPreTraining %lld\n", c.name, (long long)want[0], (long long)want[1]);
  }
}

TEST(Bert, ConfigIsCheckedAndRoundTrips) {
  nn::init::SkipRandomInit skip;   // only configs and errors here
  auto m = models::create_bert("bert-mini", {{"architecture", "BertForTokenClassification"}, {"num_labels", 5},
                                              {"id2label", {{"0", "O"}, {"1", "B"}, {"2", "I"}, {"3", "X"}, {"4", "Y"}}}});
  const json cfg = m->config();
  EXPECT_EQ(cfg["model"], "bert-mini");
  EXPECT_EQ(models::create("bert-mini", cfg)->config(), cfg);
  EXPECT_EQ(m->cfg().id2label.at(4), "Y");
  EXPECT_EQ(test::error_of([] { models::create("bert-mini", {{"hiden_size", 3}}); }),
            "create_model(bert-mini): unknown config key 'hiden_size'");
  EXPECT_EQ(test::error_of([] { models::create("bert-mini", {{"hidden_size", "big"}}); }),
            "bert config: key \"hidden_size\": expected a positive integer, found the string \"big\"");
  EXPECT_EQ(test::error_of([] { models::create("bert-mini", {{"num_attention_heads", 3}}); }),
            "bert config: key \"num_attention_heads\": expected a divisor of hidden_size 256, found 3");
  EXPECT_NE(test::error_of([] { models::create("bert-mini", {{"architecture", "BertForQA"}}); })
                .find("expected one of \"BertModel\", \"BertForPreTraining\""),
            std::string::npos);
  EXPECT_NE(test::error_of([] { models::create("bert-mini", {{"id2label", {{"7", "x"}}}}); }).find("id2label.7"),
            std::string::npos);
  EXPECT_EQ(test::error_of([] { models::create_model("bert-mini"); }).rfind("create_model: 'bert-mini' is a masked-lm model", 0),
            0u);
}

// MACs per sequence against the module tree: every per-token Linear weight (the MLM decoder is the word
// embeddings) once per token, the pooled heads once, and Q·Kᵀ and P·V.
TEST(Bert, MacsPerSequenceFollowTheModules) {
  nn::init::SkipRandomInit skip;
  for (const char* arch : {"BertModel", "BertForPreTraining", "BertForMaskedLM", "BertForSequenceClassification",
                           "BertForTokenClassification"}) {
    SCOPED_TRACE(arch);
    auto m = models::create_bert("bert-mini", {{"architecture", arch}, {"num_labels", 5}});
    const int64_t T = 37, H = m->cfg().hidden_size;
    int64_t per_token = 0, pooled = 0;
    for (const auto& [name, p] : m->named_parameters()) {
      if (p.dim() != 2 || name.find("embeddings") != std::string::npos) continue;
      const bool once = name.find("pooler") != std::string::npos || name.find("seq_relationship") != std::string::npos ||
                        (name == "classifier.weight" && std::string(arch) == "BertForSequenceClassification");
      (once ? pooled : per_token) += p.numel();
    }
    const bool mlm = m->cfg().architecture == models::BertArchitecture::pretraining ||
                     m->cfg().architecture == models::BertArchitecture::masked_lm;
    if (mlm) per_token += m->cfg().vocab_size * H;   // the tied decoder
    EXPECT_EQ(m->macs_per_sequence(T), T * per_token + pooled + m->cfg().num_hidden_layers * 2 * T * T * H);
  }
}

// A BERT (registry kind masked-lm) trains on the pre-training task unless --task says otherwise.
TEST(Bert, TrainingPreTrainsByDefault) {
  train::TrainConfig cfg;
  cfg.model = "bert-mini";
  const std::unique_ptr<train::Task> t = train::make_task(cfg);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->checkpoint_extra().at("task"), "pretrain");
  EXPECT_EQ(t->unit(), "seq");
}

// ---------------------------------------------------------------- parity

TEST(Bert, PreTrainingOutputsEqualTorch) {
  const test::Tensors in = inputs();
  json args = gen_args("BertForPreTraining");
  args["extras"] = true;
  const auto ref = test::torch_ref("bert.model", in, args);
  auto m = load(write_checkpoint(ref, "pretraining"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->cfg().architecture, models::BertArchitecture::pretraining);
  EXPECT_EQ(m->cfg().hidden_size, 32);   // config.json over bert-mini's sizes
  NoGradGuard ng;
  // The padded path: every position as transformers computes it.
  const models::BertOutput o = m->forward(bert_inputs(in), {.pack_tokens = false});
  expect_close(o.last_hidden_state, ref.at("last_hidden_state"), "last_hidden_state");
  expect_close(o.pooler_output, ref.at("pooler_output"), "pooler_output");
  expect_close(o.prediction_logits, ref.at("prediction_logits"), "prediction_logits (MLM)");
  expect_close(o.seq_relationship_logits, ref.at("seq_relationship_logits"), "seq_relationship_logits (NSP)");
  // The packed path (the default here: eval, no gradients, padding): valid positions, zeros elsewhere.
  const Tensor& mask = in.at("attention_mask");
  const models::BertOutput p = m->forward(bert_inputs(in));
  expect_close_valid(p.last_hidden_state, ref.at("last_hidden_state"), mask, "packed last_hidden_state");
  expect_close_valid(p.prediction_logits, ref.at("prediction_logits"), mask, "packed prediction_logits");
  expect_close(p.pooler_output, ref.at("pooler_output"), "packed pooler_output");
  expect_close(p.seq_relationship_logits, ref.at("seq_relationship_logits"), "packed seq_relationship_logits");
  // The materialising path with every layer's outputs and attention weights.
  const models::BertOutput w = m->forward(bert_inputs(in), {.attentions = true, .hidden_states = true});
  ASSERT_EQ(w.hidden_states.size(), 3u);
  ASSERT_EQ(w.attentions.size(), 2u);
  expect_close(stack(w.hidden_states, 0), ref.at("hidden_states"), "hidden_states");
  expect_close(stack(w.attentions, 0), ref.at("attentions"), "attentions");
  expect_close(w.prediction_logits, ref.at("prediction_logits"), "prediction_logits (materialising path)");
  // Padded keys get no weight.
  EXPECT_EQ(max(abs(w.attentions[0].select(0, 2).slice(2, 4, kT))).item(), 0.0);
}

TEST(Bert, HeadModelsEqualTorch) {
  const test::Tensors in = inputs();
  for (const char* arch : {"BertModel", "BertForMaskedLM", "BertForSequenceClassification", "BertForTokenClassification"}) {
    SCOPED_TRACE(arch);
    const auto ref = test::torch_ref("bert.model", in, gen_args(arch, json::object(), 7));
    auto m = load(write_checkpoint(ref, arch));
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(models::bert_architecture_name(m->cfg().architecture), std::string(arch));
    NoGradGuard ng;
    const Tensor& mask = in.at("attention_mask");
    for (bool pack : {false, true}) {
      const std::string what = std::string(arch) + (pack ? " packed " : " padded ");
      const models::BertOutput o = m->forward(bert_inputs(in), {.pack_tokens = pack});
      // (B, T, ...) outputs: every position on the padded path, the valid ones on the packed path.
      const auto per_token = [&](const Tensor& a, const Tensor& r, const std::string& w) {
        if (pack) expect_close_valid(a, r, mask, w);
        else expect_close(a, r, w);
      };
      per_token(o.last_hidden_state, ref.at("last_hidden_state"), what + "last_hidden_state");
      EXPECT_EQ(o.pooler_output.defined(), ref.count("pooler_output") > 0);
      if (ref.count("pooler_output")) expect_close(o.pooler_output, ref.at("pooler_output"), what + "pooler");
      if (ref.count("prediction_logits")) per_token(o.prediction_logits, ref.at("prediction_logits"), what + "prediction_logits");
      if (ref.count("logits")) {
        if (o.logits.dim() == 3) per_token(o.logits, ref.at("logits"), what + "logits");
        else expect_close(o.logits, ref.at("logits"), what + "logits");
      }
    }
  }
}

namespace {

// Every parameter's gradient against the reference's "grad.<transformers key>" (the packed qkv gradient
// split into transformers' query / key / value).
void expect_grads_like_torch(models::BertPreTrainedModel& m, const test::Tensors& ref) {
  size_t compared = 0;
  for (const auto& [name, p] : m.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    const std::string qkv = ".attention.self.qkv.";
    const size_t at = name.find(qkv);
    if (at == std::string::npos) {
      expect_close(p.grad(), ref.at("grad." + name), "grad " + name);
      ++compared;
      continue;
    }
    const int64_t H = p.size(0) / 3;
    const char* parts[] = {"query", "key", "value"};
    for (int64_t k = 0; k < 3; ++k) {
      const std::string hf = name.substr(0, at) + ".attention.self." + parts[k] + "." + name.substr(at + qkv.size());
      expect_close(p.grad().slice(0, k * H, (k + 1) * H), ref.at("grad." + hf), "grad " + hf);
      ++compared;
    }
  }
  size_t want = 0;
  for (const auto& [k, v] : ref) want += k.starts_with("grad.");
  EXPECT_EQ(compared, want);
}

// The generator's weights, loaded to be trained (train mode, plain Linear weights).
std::shared_ptr<models::BertPreTrainedModel> load_for_training(const test::Tensors& ref, const std::string& name) {
  models::PretrainedSource s = models::PretrainedSource::foreign(write_checkpoint(ref, name), "bert-mini");
  s.image_classifier_only = false;
  s.pack_linear_weights = false;   // trained next
  auto m = std::dynamic_pointer_cast<models::BertPreTrainedModel>(models::load_pretrained(s).module);
  EXPECT_NE(m, nullptr);
  if (m) m->train();
  return m;
}

// One training step against torch's: the loss and every parameter's gradient. Classifiers:
// cross-entropy of the logits; masked LM: of the MLM logits at every token (the tied word embeddings
// get the gradients of both their uses).
void expect_step_like_torch(const std::string& arch, const Tensor& labels, int seed) {
  test::Tensors in = inputs();
  in["labels"] = labels;
  json args = gen_args(arch, json::object(), seed);
  args["grad"] = true;
  const auto ref = test::torch_ref("bert.model", in, args);
  auto m = load_for_training(ref, "grad_" + arch);
  ASSERT_NE(m, nullptr);
  const models::BertOutput o = m->forward(bert_inputs(in));
  // Classifiers: the fine-tuning tasks' loss (train/tasks/sequence_classification.h; -100 ignored).
  const Tensor loss = o.logits.defined()
                          ? train::text_task_loss(o.logits, labels, 0.0)
                          : cross_entropy(o.prediction_logits.reshape({-1, o.prediction_logits.size(-1)}), labels.reshape({-1}));
  loss.backward();
  expect_close(loss.reshape({1}), ref.at("loss"), "loss");
  expect_grads_like_torch(*m, ref);
}

}  // namespace

TEST(Bert, FineTuningGradientsEqualTorch) {
  expect_step_like_torch("BertForSequenceClassification", Tensor::from_vector(std::vector<int64_t>{0, 2, 1, 2}, {kB}), 9);
}

// Sequence labelling as the "tag" task trains it: labels on some tokens, -100 (ignored, as torch's
// cross_entropy) on the padding and on continuation pieces.
TEST(Bert, TokenClassificationGradientsEqualTorch) {
  const test::Tensors in = inputs();
  const auto mask = in.at("attention_mask").to_vector<int64_t>();
  std::vector<int64_t> labels(mask.size());
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = mask[i] == 0 || i % 4 == 3 ? -100 : int64_t(i % 3);
  expect_step_like_torch("BertForTokenClassification", Tensor::from_vector(labels, {kB, kT}), 11);
}

TEST(Bert, MaskedLmGradientsEqualTorch) {
  expect_step_like_torch("BertForMaskedLM", inputs().at("input_ids"), 10);
}

// A bert-mini pre-training step (train::pretraining_loss: the MLM head at the masked rows only, + NSP)
// against transformers' BertForPreTraining total_loss (MLM logits at every token, ignore_index -100):
// the losses and every gradient. The batch: four instances of 61, 34, 50 and 19 tokens (padding),
// masked by Google's rule (data/pretraining.h), two of them random-next.
TEST(Bert, PretrainingStepEqualsTorch) {
  const json mini = {{"vocab_size", 30522}, {"hidden_size", 256}, {"num_hidden_layers", 4},
                     {"num_attention_heads", 4}, {"intermediate_size", 1024}, {"max_position_embeddings", 512},
                     {"type_vocab_size", 2}, {"layer_norm_eps", 1e-12}, {"hidden_dropout_prob", 0.0},
                     {"attention_probs_dropout_prob", 0.0}};
  std::vector<data::PretrainingInstance> inst;
  Generator g(4);
  for (int32_t len : {61, 34, 50, 19}) {
    data::PretrainingInstance in;
    in.tokens.push_back(101);
    for (int32_t t = 1; t < len - 1; ++t) in.tokens.push_back(t == len / 2 ? 102 : int32_t(1000 + g.randint(29000)));
    in.tokens.push_back(102);
    in.a_end = len / 2 + 1;
    in.is_random_next = len % 2 == 0;
    inst.push_back(std::move(in));
  }
  const data::MaskVocab mv{.ids = {101, 102, 103}, .vocab_size = 30522, .continuation = {}};
  const data::PretrainingBatch b = data::make_pretraining_batch(inst, {0, 1, 2, 3}, mv, {}, 7, 0);
  ASSERT_GT(b.num_masked, 4 * 2);
  const int64_t B = 4, T = b.inputs.input_ids.size(1);
  std::vector<int64_t> labels(size_t(B * T), -100);
  const auto rows = b.mlm_rows.to_vector<int64_t>(), want = b.mlm_labels.to_vector<int64_t>();
  for (size_t i = 0; i < rows.size(); ++i) labels[size_t(rows[i])] = want[i];
  const test::Tensors in = {{"input_ids", b.inputs.input_ids}, {"token_type_ids", b.inputs.token_type_ids},
                            {"attention_mask", b.inputs.attention_mask}, {"nsp_labels", b.nsp_labels},
                            {"mlm_labels", Tensor::from_vector(labels, {B, T})}};
  const auto ref = test::torch_ref("bert.pretrain", in, {{"seed", 12}, {"config", mini}});
  auto m = load_for_training(ref, "pretrain_mini");
  ASSERT_NE(m, nullptr);
  const train::PretrainingLoss l = train::pretraining_loss(*m, b);
  l.loss.backward();
  expect_close(l.loss.reshape({1}), ref.at("loss"), "loss");
  expect_close(l.mlm_loss.reshape({1}), ref.at("mlm_loss"), "mlm_loss");
  expect_close(l.nsp_loss.reshape({1}), ref.at("nsp_loss"), "nsp_loss");
  expect_grads_like_torch(*m, ref);
  // Evaluation (eval mode, no gradients, padding: the packed path) gives the padded path's MLM logits
  // at the masked rows.
  m->eval();
  NoGradGuard ng;
  const models::BertInputs bi{b.inputs.input_ids, b.inputs.token_type_ids, b.inputs.attention_mask};
  models::BertOutputOptions o;
  o.mlm_rows = b.mlm_rows;
  const Tensor packed = m->forward(bi, o).prediction_logits;
  o.pack_tokens = false;
  const Tensor padded = m->forward(bi, o).prediction_logits;
  EXPECT_EQ(packed.shape(), (Shape{b.num_masked, 30522}));
  // (packed it was: without mlm_rows, a padded position's logits are the packed path's zeros)
  EXPECT_EQ(max(abs(m->forward(bi).prediction_logits.select(0, 3).select(0, T - 1))).item(), 0.0);
  expect_close(packed, padded, "eval MLM logits at the masked rows, packed vs padded");
}

// ---------------------------------------------------------------- packed inference

namespace {

// (B, T) inputs of masks given as strings of 0 / 1 (T = kSmall's 16 positions at most): random ids
// (2 first where the mask is on there), two segments, the padding's id 0.
test::Tensors masked_inputs(const std::vector<std::string>& masks, uint64_t seed) {
  const int64_t B = int64_t(masks.size()), T = int64_t(masks[0].size());
  std::vector<int64_t> ids(size_t(B * T)), types(size_t(B * T)), mask(size_t(B * T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      const size_t i = size_t(b * T + t);
      const bool on = masks[size_t(b)][size_t(t)] == '1';
      ids[i] = !on ? 0 : t == 0 ? 2 : 3 + int64_t((seed >> 33) % 96);
      types[i] = on && t >= T / 2 ? 1 : 0;
      mask[i] = on ? 1 : 0;
    }
  return {{"input_ids", Tensor::from_vector(ids, {B, T})},
          {"token_type_ids", Tensor::from_vector(types, {B, T})},
          {"attention_mask", Tensor::from_vector(mask, {B, T})}};
}

std::string ones(int64_t n, int64_t T, int64_t lead = 0) {
  return std::string(size_t(lead), '0') + std::string(size_t(n), '1') + std::string(size_t(T - n - lead), '0');
}

}  // namespace

// The packed path against torch and against attn's padded path at the valid positions, over a mix of
// lengths 1 .. 16 (the maximum, unpadded), a left-padded sample and one with holes in its mask (a
// token keeps its position). Samples whose position 0 is a token pool it; the left-padded one pools
// a zero row (checked: its pooler output is tanh of the pooler's bias).
TEST(Bert, PackedEqualsPaddedAndTorchOverLengthMixes) {
  const std::vector<std::string> masks = {ones(1, 16), ones(16, 16), ones(7, 16), "1101100111000000",
                                          ones(16, 16), ones(9, 16, 7), ones(3, 16)};
  const test::Tensors in = masked_inputs(masks, 4242);
  const Tensor& mask = in.at("attention_mask");
  const auto ref = test::torch_ref("bert.model", in, gen_args("BertForPreTraining", json::object(), 21));
  auto m = load(write_checkpoint(ref, "packed"));
  ASSERT_NE(m, nullptr);
  NoGradGuard ng;
  const models::BertOutput padded = m->forward(bert_inputs(in), {.pack_tokens = false});
  const models::BertOutput o = m->forward(bert_inputs(in));
  expect_close_valid(o.last_hidden_state, ref.at("last_hidden_state"), mask, "last_hidden_state vs torch");
  expect_close_valid(o.prediction_logits, ref.at("prediction_logits"), mask, "prediction_logits vs torch");
  expect_close_valid(o.last_hidden_state, padded.last_hidden_state, mask, "last_hidden_state vs padded path");
  expect_close_valid(o.prediction_logits, padded.prediction_logits, mask, "prediction_logits vs padded path");
  const Tensor first = Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 3, 4, 6}, {6});
  expect_close(index_select(o.pooler_output, 0, first), index_select(ref.at("pooler_output"), 0, first), "pooler_output");
  expect_close(index_select(o.seq_relationship_logits, 0, first),
               index_select(ref.at("seq_relationship_logits"), 0, first), "seq_relationship_logits");
  const Tensor pooler_bias = m->bert().named_parameters().back().second;   // pooler.dense.bias, registered last
  ASSERT_EQ(m->bert().named_parameters().back().first, "pooler.dense.bias");
  EXPECT_TENSOR_NEAR(o.pooler_output.select(0, 5), tanh(pooler_bias), 1e-7, 1e-7);
}

// Random mixes (batch 1 .. 8, lengths 1 .. 16, each mix with a sample of one token and one of 16):
// the packed path equals the padded path at the valid positions, for the token classifier's logits
// too; a sample with no token at all gets zeros and changes nothing for the others.
TEST(Bert, PackedEqualsPaddedOnRandomMixes) {
  const test::Tensors in0 = inputs();
  const auto ref = test::torch_ref("bert.model", in0, gen_args("BertForTokenClassification", json::object(), 23));
  auto m = load(write_checkpoint(ref, "mixes"));
  ASSERT_NE(m, nullptr);
  NoGradGuard ng;
  uint64_t s = 99;
  const auto draw = [&](int64_t n) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return int64_t((s >> 33) % uint64_t(n));
  };
  for (int mix = 0; mix < 6; ++mix) {
    const int64_t B = 2 + draw(7);
    std::vector<std::string> masks;
    for (int64_t b = 0; b < B; ++b) masks.push_back(ones(b == 0 ? 1 : b == 1 ? 16 : 1 + draw(16), 16));
    if (mix == 5) masks[2] = std::string(16, '0');   // an empty sample
    SCOPED_TRACE("mix " + std::to_string(mix) + ": batch " + std::to_string(B));
    const test::Tensors in = masked_inputs(masks, 1000 + uint64_t(mix));
    const Tensor& mask = in.at("attention_mask");
    const models::BertOutput a = m->forward(bert_inputs(in), {.pack_tokens = false});
    const models::BertOutput b = m->forward(bert_inputs(in));
    expect_close_valid(b.last_hidden_state, a.last_hidden_state, mask, "last_hidden_state");
    expect_close_valid(b.logits, a.logits, mask, "token logits");
  }
  // Every sample empty: nothing to pack; the padded path runs.
  const test::Tensors none = masked_inputs({std::string(16, '0'), std::string(16, '0')}, 5);
  EXPECT_EQ(m->forward(bert_inputs(none)).logits.shape(), Shape({2, 16, 3}));
}

// What keeps the padded path (values at padded positions as transformers' too): attention weights or
// hidden states asked for, training, and gradients that could flow (grad mode on, parameters requiring
// grad); a batch without padding needs no packing.
TEST(Bert, PaddedPathWhereThePackedOneDoesNotApply) {
  const test::Tensors in = inputs();
  const Tensor& mask = in.at("attention_mask");
  json args = gen_args("BertModel", json::object(), 25);
  args["extras"] = true;
  const auto ref = test::torch_ref("bert.model", in, args);
  auto m = load(write_checkpoint(ref, "fallback"));
  ASSERT_NE(m, nullptr);
  const Tensor want = ref.at("last_hidden_state");
  {
    NoGradGuard ng;
    const models::BertOutput w = m->forward(bert_inputs(in), {.attentions = true});
    ASSERT_EQ(w.attentions.size(), 2u);
    expect_close(w.attentions[1], ref.at("attentions").select(0, 1), "attentions");
    expect_close(w.last_hidden_state, want, "last_hidden_state with attentions");
    const models::BertOutput h = m->forward(bert_inputs(in), {.hidden_states = true});
    expect_close(stack(h.hidden_states, 0), ref.at("hidden_states"), "hidden_states");
    expect_close(h.last_hidden_state, want, "last_hidden_state with hidden_states");
  }
  const models::BertOutput g = m->forward(bert_inputs(in));   // grad mode on, parameters require grad
  expect_close(g.last_hidden_state, want, "last_hidden_state with gradients");
  EXPECT_TRUE(g.last_hidden_state.requires_grad());
  NoGradGuard ng;
  EXPECT_GT(max(abs(rows_where(g.last_hidden_state, mask, false))).item(), 0.0);   // padded rows computed
  const models::BertOutput p = m->forward(bert_inputs(in));
  EXPECT_EQ(max(abs(rows_where(p.last_hidden_state, mask, false))).item(), 0.0);   // packed: zeros there
}

// ---------------------------------------------------------------- bf16

// bf16 inference: every Linear weight in bf16 (the encoder's, the pooler's, the heads' and the MLM
// decoder's, which gets its own bf16 copy of the word embeddings) while the embeddings stay f32, bit for
// bit; outputs against torch's f32 ones within the bounds of the ViT bf16 tests: max |d| <= 2e-2 * max
// |reference| (and bf16 rounding shows: they move by more than 1e-4 of it); packed and padded paths.
// load_pretrained with linear_dtype bf16 gives the same model.
TEST(Bert, Bf16InferenceIsCloseToF32) {
  const test::Tensors in = inputs();
  const Tensor& mask = in.at("attention_mask");
  const auto ref = test::torch_ref("bert.model", in, gen_args("BertForPreTraining", json::object(), 27));
  const std::string path = write_checkpoint(ref, "bf16");
  auto m = load(path);
  ASSERT_NE(m, nullptr);
  NoGradGuard ng;
  const models::BertOutput f32 = m->forward(bert_inputs(in), {.pack_tokens = false});
  const Tensor words = m->bert().embeddings().word_embeddings->weight;
  const std::vector<float> words_before = words.to_vector<float>();
  nn::unpack_linear_weights(*m);
  EXPECT_GT(nn::convert_linear_weights_to_bf16(*m), 0);
  for (const auto& [name, p] : m->named_parameters()) {
    const bool linear = p.dim() == 2 && name.find("embeddings") == std::string::npos;
    EXPECT_EQ(p.dtype(), linear ? DType::bf16 : DType::f32) << name;
  }
  int64_t decoders = 0;   // listed now: its own copy, no longer the word embeddings
  for (const auto& [name, p] : m->named_parameters()) decoders += name == "cls.predictions.decoder.weight";
  EXPECT_EQ(decoders, 1);
  EXPECT_TRUE(m->bert().embeddings().word_embeddings->weight.is_same(words));
  EXPECT_EQ(words.to_vector<float>(), words_before);
  const auto bf16_close = [&](const Tensor& a, const Tensor& r, const std::string& what) {
    const auto u = a.to_vector<double>(), v = r.to_vector<double>();
    ASSERT_EQ(u.size(), v.size()) << what;
    double d = 0, mx = 0;
    for (size_t i = 0; i < u.size(); ++i) d = std::max(d, std::abs(u[i] - v[i])), mx = std::max(mx, std::abs(v[i]));
    std::printf("  bf16 %-40s max |delta| %.3g (bound %.3g, at least %.3g)\n", what.c_str(), d, 2e-2 * mx, 1e-4 * mx);
    EXPECT_LE(d, 2e-2 * mx) << what;
    EXPECT_GT(d, 1e-4 * mx) << what;
  };
  nn::pack_linear_weights(*m);
  for (bool pack : {false, true}) {
    const models::BertOutput o = m->forward(bert_inputs(in), {.pack_tokens = pack});
    const std::string p = pack ? "packed " : "padded ";
    bf16_close(rows_where(o.last_hidden_state, mask), rows_where(ref.at("last_hidden_state"), mask), p + "last_hidden_state");
    bf16_close(rows_where(o.prediction_logits, mask), rows_where(ref.at("prediction_logits"), mask), p + "prediction_logits");
    bf16_close(o.pooler_output, ref.at("pooler_output"), p + "pooler_output");
  }
  expect_close(f32.prediction_logits, ref.at("prediction_logits"), "f32 prediction_logits before the conversion");
  models::PretrainedSource src = models::PretrainedSource::foreign(path, "bert-mini");
  src.image_classifier_only = false;
  src.linear_dtype = DType::bf16;
  auto b = std::dynamic_pointer_cast<models::BertPreTrainedModel>(models::load_pretrained(src).module);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->bert().embeddings().word_embeddings->weight.dtype(), DType::f32);
  EXPECT_EQ(b->forward(bert_inputs(in)).prediction_logits.to_vector<float>(),
            m->forward(bert_inputs(in)).prediction_logits.to_vector<float>());
}

// ---------------------------------------------------------------- key variants

TEST(Bert, CheckpointKeyVariantsLoad) {
  const test::Tensors in = inputs();
  const json variants[] = {
      json::object(),                                                     // bert. prefix, decoder.weight + bias
      {{"prefix", false}},                                                // a checkpoint without "bert."
      {{"legacy", true}},                                                 // LayerNorm.gamma / .beta
      {{"decoder_weight", false}, {"decoder_bias", false}},               // model.safetensors: tied keys left out
      {{"position_ids", false}, {"decoder_bias", false}},
      {{"bin", true}},                                                    // pytorch_model.bin via the tool: aliases
      {{"bin", true}, {"legacy", true}, {"prefix", false}, {"decoder_weight", false}},
  };
  int i = 0;
  for (const json& layout : variants) {
    SCOPED_TRACE(layout.dump());
    const auto ref = test::torch_ref("bert.model", in, gen_args("BertForPreTraining", layout, 11));
    auto m = load(write_checkpoint(ref, "variant" + std::to_string(i++)));
    ASSERT_NE(m, nullptr);
    expect_close_valid(run_mlm(*m), ref.at("prediction_logits"), in.at("attention_mask"),
                       "prediction_logits " + layout.dump());
  }
}

// A pre-training checkpoint into the base model or a new classifier head (the heads it lacks skipped,
// as transformers does); the classifier then needs strict = false to keep its initial weights.
TEST(Bert, HeadsTheModelLacksAreSkipped) {
  const test::Tensors in = inputs();
  const auto ref = test::torch_ref("bert.model", in, gen_args("BertForPreTraining", json::object(), 13));
  const std::string path = write_checkpoint(ref, "skip");
  auto base = load(path, "bert-mini", {{"architecture", "BertModel"}});
  NoGradGuard ng;
  expect_close_valid(base->forward(bert_inputs(in)).last_hidden_state, ref.at("last_hidden_state"),
                     in.at("attention_mask"), "base last_hidden_state");
  models::ForeignBertOptions o;
  o.model = "bert-mini";
  o.hf_config = json::parse(bytes_of(ref.at("config")));
  o.overrides = {{"architecture", "BertForSequenceClassification"}};
  const std::string e = test::error_of([&] { models::load_foreign_bert(io::SafetensorsReader(path), o); });
  EXPECT_NE(e.find("missing: classifier.weight, classifier.bias"), std::string::npos) << e;
  o.strict = false;
  const models::ForeignBert r = models::load_foreign_bert(io::SafetensorsReader(path), o);
  EXPECT_FALSE(r.skipped.empty());
  expect_close(r.model->forward(bert_inputs(in)).pooler_output, ref.at("pooler_output"), "classifier's pooler");
}

// attn convert's checkpoint of BERT weights loads back to the same model, bit for bit.
TEST(Bert, ConvertedCheckpointLoadsBack) {
  const test::Tensors in = inputs();
  const auto ref = test::torch_ref("bert.model", in, gen_args("BertForPreTraining", json::object(), 15));
  models::PretrainedSource s = models::PretrainedSource::foreign(write_checkpoint(ref, "convert"), "bert-mini");
  s.image_classifier_only = false;
  s.pack_linear_weights = false;
  const models::Pretrained p = models::load_pretrained(s);
  json extra = p.metadata;
  extra["config"] = p.module->config();
  const std::string ckpt = test::scratch_dir("attn_bert_test") + "/converted.safetensors";
  train::save_checkpoint(ckpt, *p.module, nullptr, extra);
  models::PretrainedSource c = models::PretrainedSource::checkpoint(ckpt);
  EXPECT_NE(test::error_of([&] { models::load_pretrained(c); }).find("not an image classifier"), std::string::npos);
  c.image_classifier_only = false;
  c.pack_linear_weights = false;   // the same GEMMs as the source model's
  const models::Pretrained q = models::load_pretrained(c);
  EXPECT_EQ(q.model_name, "bert-mini");
  EXPECT_EQ(q.source, "hf");
  auto a = std::dynamic_pointer_cast<models::BertPreTrainedModel>(p.module);
  auto b = std::dynamic_pointer_cast<models::BertPreTrainedModel>(q.module);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(run_mlm(*a).to_vector<float>(), run_mlm(*b).to_vector<float>());
}

// ---------------------------------------------------------------- errors

namespace {

// The generator's file with `edit` applied, written beside its config.json; returns load's error.
std::string load_error(const std::string& name, const std::function<void(io::TensorList&)>& edit,
                       const std::string& model = "bert-mini", bool with_config = true,
                       const std::function<void(json&)>& edit_config = nullptr) {
  const auto ref = test::torch_ref("bert.model", inputs(), gen_args("BertForPreTraining", json::object(), 17));
  const std::string path = write_checkpoint(ref, name, false);
  io::SafetensorsFile f = io::load_safetensors(path);
  edit(f.tensors);
  io::save_safetensors(path, f.tensors, f.metadata);
  if (with_config) {
    json cfg = json::parse(bytes_of(ref.at("config")));
    if (edit_config) edit_config(cfg);
    test::write_bytes(path.substr(0, path.rfind('/')) + "/config.json", cfg.dump());
  }
  return test::error_of([&] { load(path, model); });
}

void drop(io::TensorList& sd, const std::string& key) {
  sd.erase(std::remove_if(sd.begin(), sd.end(), [&](const auto& kv) { return kv.first == key; }), sd.end());
}

void reshape(io::TensorList& sd, const std::string& key, const Shape& shape) {
  for (auto& [k, v] : sd)
    if (k == key) v = Tensor::zeros(shape);
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(Bert, MissingKeyIsNamed) {
  const std::string e = load_error("missing", [](io::TensorList& sd) { drop(sd, "bert.encoder.layer.1.attention.self.key.weight"); });
  EXPECT_TRUE(has(e, "missing: bert.encoder.layer.1.attention.self.key.weight")) << e;
  EXPECT_TRUE(has(e, "model 'bert-mini' (BertForPreTraining, with config.json)")) << e;
  const std::string f = load_error("missing2", [](io::TensorList& sd) { drop(sd, "cls.seq_relationship.bias"); });
  EXPECT_TRUE(has(f, "missing: cls.seq_relationship.bias")) << f;
}

TEST(Bert, MisShapedKeyIsNamed) {
  const std::string e = load_error("shape", [](io::TensorList& sd) {
    reshape(sd, "bert.encoder.layer.0.attention.output.dense.weight", {32, 31});
  });
  EXPECT_TRUE(has(e, "mis-shaped: bert.encoder.layer.0.attention.output.dense.weight is [32, 31], the model expects [32, 32]"))
      << e;
  const std::string d = load_error("decoder", [](io::TensorList& sd) { reshape(sd, "cls.predictions.decoder.weight", {98, 32}); });
  EXPECT_TRUE(has(d, "cls.predictions.decoder.weight is [98, 32], the model expects [99, 32] (tied to the word embeddings)"))
      << d;
  const std::string u = load_error("unexpected", [](io::TensorList& sd) { sd.emplace_back("bert.encoder.extra", Tensor::zeros({2})); });
  EXPECT_TRUE(has(u, "unexpected: bert.encoder.extra")) << u;
}

TEST(Bert, ConfigThatDisagreesWithTheWeightsIsNamed) {
  const std::string e = load_error("config", [](io::TensorList&) {}, "bert-mini", true,
                                   [](json& c) { c["hidden_size"] = 64; c["num_hidden_layers"] = 3; });
  EXPECT_TRUE(has(e, "hidden_size 64 expected, the weights have 32 (bert.embeddings.word_embeddings.weight is [99, 32])"))
      << e;
  EXPECT_TRUE(has(e, "num_hidden_layers 3 expected, the weights have 2")) << e;
  const std::string t = load_error("model_type", [](io::TensorList&) {}, "bert-mini", true,
                                   [](json& c) { c["model_type"] = "roberta"; });
  EXPECT_TRUE(has(t, "config.json: key \"model_type\": expected \"bert\" (a BERT config), found \"roberta\"")) << t;
}

TEST(Bert, AnotherSizeOrFamilyIsNamed) {
  // No config.json: bert-base-uncased's sizes against the small weights.
  const std::string e = load_error("size", [](io::TensorList&) {}, "bert-base-uncased", false);
  EXPECT_TRUE(has(e, "model 'bert-base-uncased' (BertForPreTraining)")) << e;
  EXPECT_TRUE(has(e, "vocab_size 30522 expected, the weights have 99")) << e;
  EXPECT_TRUE(has(e, "hidden_size 768 expected, the weights have 32")) << e;
  const std::string v = load_error("family", [](io::TensorList& sd) {
    sd = {{"vit.embeddings.patch_embeddings.projection.weight", Tensor::zeros({8, 3, 4, 4})},
          {"vit.encoder.layer.0.attention.attention.query.weight", Tensor::zeros({8, 8})}};
  });
  EXPECT_TRUE(has(v, "expected a BERT checkpoint")) << v;
  EXPECT_TRUE(has(v, "vit.embeddings.patch_embeddings.projection.weight")) << v;
  // An image command asking for a BERT.
  models::PretrainedSource s = models::PretrainedSource::foreign("x.safetensors", "bert-mini");
  EXPECT_EQ(test::error_of([&] { models::load_pretrained(s); }),
            "load_pretrained: 'bert-mini' is a masked-lm model (BERT), not an image classifier");
}

// config.json's id2label names the classes (load_pretrained's labels, kept in the model's config); an
// architecture attn has no BERT class for is named.
TEST(Bert, ConfigJsonLabelsAndArchitecture) {
  const test::Tensors in = inputs();
  const auto ref = test::torch_ref("bert.model", in, gen_args("BertForSequenceClassification", json::object(), 19));
  const std::string path = write_checkpoint(ref, "labels");
  const std::string cfg_path = path.substr(0, path.rfind('/')) + "/config.json";
  json cfg = json::parse(bytes_of(ref.at("config")));
  cfg["id2label"] = {{"0", "negative"}, {"1", "neutral"}, {"2", "positive"}};
  cfg["label2id"] = {{"negative", 0}, {"neutral", 1}, {"positive", 2}};
  cfg.erase("num_labels");
  test::write_bytes(cfg_path, cfg.dump());
  models::PretrainedSource s = models::PretrainedSource::foreign(path, "bert-mini");
  s.image_classifier_only = false;
  const models::Pretrained p = models::load_pretrained(s);
  EXPECT_EQ(p.labels, (std::vector<std::string>{"negative", "neutral", "positive"}));
  EXPECT_EQ(p.module->config()["id2label"]["2"], "positive");
  cfg["architectures"] = {"BertForQuestionAnswering"};
  test::write_bytes(cfg_path, cfg.dump());
  const std::string e = test::error_of([&] { models::load_pretrained(s); });
  EXPECT_NE(e.find("key \"architectures\": expected a BERT class attn has"), std::string::npos) << e;
  EXPECT_NE(e.find("found \"BertForQuestionAnswering\""), std::string::npos) << e;
}

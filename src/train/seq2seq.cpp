// Translation training and inference: see include/attn/train/seq2seq.h.
#include "attn/train/seq2seq.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "attn/autograd/grad_mode.h"
#include "attn/core/error.h"
#include "attn/core/parallel.h"
#include "attn/core/rng.h"
#include "attn/data/seq_batch.h"
#include "attn/io/checkpoint.h"
#include "attn/train/checkpoint.h"
#include "attn/io/safetensors.h"
#include "attn/nn/init.h"
#include "attn/ops/loss.h"
#include "attn/optim/adam.h"
#include "attn/optim/clip.h"
#include "attn/optim/schedule.h"
#include "attn/viz/plot.h"
#include "attn/train/progress.h"

namespace attn::train {

namespace {

constexpr const char* kKind = "seq2seq";

// ---- base64 (the tokenizer's bytes inside the checkpoint's JSON metadata) ----
const char* kB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64_encode(const std::string& in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = uint32_t(uint8_t(in[i])) << 16 | uint32_t(uint8_t(in[i + 1])) << 8 | uint8_t(in[i + 2]);
    for (int k = 3; k >= 0; --k) out.push_back(kB64[(v >> (6 * k)) & 63]);
  }
  if (i < in.size()) {
    uint32_t v = uint32_t(uint8_t(in[i])) << 16;
    if (i + 1 < in.size()) v |= uint32_t(uint8_t(in[i + 1])) << 8;
    out.push_back(kB64[(v >> 18) & 63]);
    out.push_back(kB64[(v >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? kB64[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

std::string base64_decode(const std::string& in, const std::string& what) {
  auto val = [&](char c) -> int {
    const char* p = std::strchr(kB64, c);
    ATTN_CHECK(c != '\0' && p, what, ": expected base64, found the byte 0x", std::hex, int(uint8_t(c)));
    return int(p - kB64);
  };
  ATTN_CHECK(in.size() % 4 == 0, what, ": expected base64 (a multiple of 4 characters), found ", in.size());
  std::string out;
  out.reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    const int a = val(in[i]), b = val(in[i + 1]);
    out.push_back(char((a << 2) | (b >> 4)));
    if (in[i + 2] == '=') break;
    const int c = val(in[i + 2]);
    out.push_back(char(((b & 15) << 4) | (c >> 2)));
    if (in[i + 3] == '=') break;
    out.push_back(char(((c & 3) << 6) | val(in[i + 3])));
  }
  return out;
}

std::string fmt(double v, const char* f = "%.4f") {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

bool is_synthetic(const std::string& data) { return data.rfind("synthetic:", 0) == 0; }

}  // namespace

std::unique_ptr<text::Tokenizer> train_translation_tokenizer(const Seq2SeqConfig& cfg,
                                                             const std::vector<data::TextPair>& train) {
  std::string kind = cfg.tokenizer;
  if (kind == "auto") kind = is_synthetic(cfg.data) ? "char" : "unigram";
  std::vector<std::string> text;
  text.reserve(train.size() * 2);
  for (const auto& p : train) {
    text.push_back(p.src);
    text.push_back(p.tgt);
  }
  if (kind == "char") return text::CharTokenizer::build(text);
  ATTN_CHECK(kind == "unigram" || kind == "bpe", "train: expected --tokenizer auto | unigram | bpe | char, got '",
             kind, "'");
  text::SentencePieceOptions o;
  o.vocab_size = cfg.vocab_size;
  o.model_type = kind;
  o.num_threads = std::max(1, get_num_threads());
  return text::SentencePieceTokenizer::train(text, o);
}

namespace {

std::vector<data::SeqPair> encode_pairs(const text::Tokenizer& tok, const std::vector<data::TextPair>& pairs) {
  std::vector<data::SeqPair> out(pairs.size());
  parallel_for(0, int64_t(pairs.size()), 64, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[size_t(i)] = {tok.encode(pairs[size_t(i)].src), tok.encode(pairs[size_t(i)].tgt)};
  });
  return out;
}

// Teacher-forced loss over a whole split (no label smoothing: the plain per-token NLL).
double split_loss(models::Seq2SeqModel& model, const std::vector<data::SeqPair>& pairs, int64_t max_tokens,
                  int64_t max_length) {
  if (pairs.empty()) return NAN;
  NoGradGuard ng;
  const bool was = model.is_training();
  model.eval();
  data::SeqBatcher batcher(pairs, {.max_tokens = max_tokens, .max_length = max_length,
                                   .over_length = data::OverLength::truncate, .shuffle = false});
  double sum = 0;
  int64_t n = 0;
  for (const auto& idx : batcher.epoch_batches(0)) {
    data::SeqBatch b = batcher.make_batch(idx);
    sum += seq2seq_batch_loss(model, b, 0.0).item() * double(b.num_tgt_tokens);
    n += b.num_tgt_tokens;
  }
  model.train(was);
  return n ? sum / double(n) : NAN;
}

}  // namespace

Tensor seq2seq_batch_loss(models::Seq2SeqModel& model, const data::SeqBatch& b, double label_smoothing) {
  // Only the non-padded target positions reach the output projection and the loss: the same mean as
  // cross_entropy with ignore_index over all of them (the padding contributes nothing to either),
  // without the vocabulary GEMM and softmax of the padding (about 6% of a 4,096-token Bible batch).
  const Tensor flat = b.tgt_out.reshape({-1}).contiguous().to(DType::i64);
  const int64_t* t = flat.data<int64_t>();
  std::vector<int64_t> rows, targets;
  rows.reserve(size_t(flat.numel()));
  targets.reserve(size_t(flat.numel()));
  for (int64_t i = 0; i < flat.numel(); ++i)
    if (t[i] != models::pad_id) { rows.push_back(i); targets.push_back(t[i]); }
  const auto R = int64_t(rows.size());
  Tensor logits = model.forward_rows(b.src, b.src_pad, b.tgt_in, Tensor::from_vector<int64_t>(rows, {R}));
  return cross_entropy(logits, Tensor::from_vector<int64_t>(targets, {R}),
                       {.label_smoothing = label_smoothing, .ignore_index = models::pad_id});
}

// ---- data ----

data::PairSplits load_translation_data(const std::string& data, uint64_t seed, const std::string& sword_dir,
                                       int64_t synthetic_size, int64_t dev_count, int64_t test_count) {
  std::vector<data::TextPair> pairs;
  if (data == "bible-en-es") {
    pairs = data::load_bible_pairs(sword_dir);
  } else if (is_synthetic(data)) {
    pairs = data::make_synthetic_pairs(data.substr(10), synthetic_size, seed);
  } else {
    ATTN_CHECK(std::filesystem::exists(data), "translation data: expected bible-en-es, synthetic:<task> (",
               [] {
                 std::string s;
                 for (const auto& n : data::synthetic_task_names()) s += (s.empty() ? "" : "|") + n;
                 return s;
               }(),
               ") or a TSV file, got '", data, "' (no such file)");
    pairs = data::read_tsv_pairs(data);
  }
  ATTN_CHECK(pairs.size() >= 3, "translation data '", data, "': expected at least 3 sentence pairs, found ",
             pairs.size());
  const int64_t n = int64_t(pairs.size());
  if (data != "bible-en-es") {
    dev_count = std::min(dev_count, std::max<int64_t>(1, n / 10));
    test_count = std::min(test_count, std::max<int64_t>(1, n / 10));
  }
  return data::split_pairs(pairs, dev_count, test_count, seed);
}

// ---- training ----

Seq2SeqResult train_seq2seq(const Seq2SeqConfig& cfg_in) {
  Seq2SeqConfig cfg = cfg_in;
  ATTN_CHECK(cfg.epochs > 0 && cfg.max_tokens > 0, "train: expected epochs > 0 and max_tokens > 0, got epochs ",
             cfg.epochs, ", max_tokens ", cfg.max_tokens);
  std::filesystem::create_directories(cfg.out);
  Seq2SeqResult res;
  res.checkpoint = cfg.out + "/checkpoint.safetensors";
  res.log = cfg.out + "/log.jsonl";
  res.plot = cfg.out + "/curve.svg";
  res.metrics = cfg.out + "/metrics.json";
  res.samples = cfg.out + "/test_translations.txt";

  nlohmann::json meta, train_state;
  if (cfg.resume) {
    meta = io::read_checkpoint_metadata(res.checkpoint);
    ATTN_CHECK(meta.value("kind", "") == std::string(kKind), "train --resume: '", res.checkpoint,
               "' is not a translation checkpoint");
    train_state = meta.at("train_state");
    const auto& d = meta.at("data");
    cfg.data = d.at("data").get<std::string>();
    cfg.seed = d.at("seed").get<uint64_t>();
    cfg.synthetic_size = d.at("synthetic_size").get<int64_t>();
    cfg.dev_count = d.at("dev_count").get<int64_t>();
    cfg.test_count = d.at("test_count").get<int64_t>();
  }
  const auto t_data = std::chrono::steady_clock::now();
  data::PairSplits splits =
      load_translation_data(cfg.data, cfg.seed, cfg.sword_dir, cfg.synthetic_size, cfg.dev_count, cfg.test_count);
  if (cfg.limit_train > 0 && int64_t(splits.train.size()) > cfg.limit_train) splits.train.resize(size_t(cfg.limit_train));
  if (cfg.limit_test > 0 && int64_t(splits.test.size()) > cfg.limit_test) splits.test.resize(size_t(cfg.limit_test));

  std::unique_ptr<text::Tokenizer> tok;
  if (cfg.resume) {
    tok = text::Tokenizer::deserialize(base64_decode(meta.at("tokenizer").get<std::string>(), "checkpoint tokenizer"));
  } else {
    tok = train_translation_tokenizer(cfg, splits.train);
  }
  const std::string tok_b64 = base64_encode(tok->serialize());
  std::vector<data::SeqPair> train_ids = encode_pairs(*tok, splits.train);
  std::vector<data::SeqPair> dev_ids = encode_pairs(*tok, splits.dev);
  if (!cfg.quiet)
    std::fprintf(stderr, "data: %s, %zu train / %zu dev / %zu test pairs, %s vocabulary of %lld (%.1f s)\n",
                 cfg.data.c_str(), splits.train.size(), splits.dev.size(), splits.test.size(), tok->kind().c_str(),
                 (long long)tok->vocab_size(), seconds_since(t_data));

  // Model: weights from the seed.
  manual_seed(cfg.seed);
  nlohmann::json model_cfg;
  if (cfg.resume) {
    model_cfg = meta.at("config");
  } else {
    model_cfg = cfg.model_config;
    model_cfg["vocab_size"] = tok->vocab_size();
  }
  std::shared_ptr<models::Seq2SeqModel> model =
      models::create_seq2seq(cfg.resume ? model_cfg.at("model").get<std::string>() : cfg.model, model_cfg);
  model_cfg = model->config();
  ATTN_CHECK(model->vocab_size() == tok->vocab_size(), "train: the model's vocabulary (", model->vocab_size(),
             ") differs from the tokenizer's (", tok->vocab_size(), ")");
  const std::string model_name = model_cfg.at("model").get<std::string>();
  model->train();

  const int64_t max_len = std::min(cfg.max_length, model->max_length() - 1);
  data::SeqBatcher batcher(train_ids, {.max_tokens = cfg.max_tokens, .max_length = max_len,
                                       .over_length = data::OverLength::drop, .seed = cfg.seed});
  res.train_pairs = batcher.num_pairs();
  ATTN_CHECK(batcher.num_pairs() > 0, "train: no training pair is within max_length ", max_len);
  if (!cfg.quiet && batcher.num_dropped_long() > 0)
    std::fprintf(stderr, "data: %lld training pairs longer than %lld tokens dropped\n",
                 (long long)batcher.num_dropped_long(), (long long)max_len);
  const int64_t per_epoch = batcher.num_batches_in_epoch(0);
  int64_t total = cfg.max_steps > 0 ? cfg.max_steps : cfg.epochs * per_epoch;
  const int64_t stop = cfg.stop_after > 0 ? std::min(total, cfg.stop_after) : total;
  const int64_t eval_every = cfg.eval_every > 0 ? cfg.eval_every : per_epoch;

  const int64_t d_model = model_cfg.value("d_model", model_cfg.value("hidden", int64_t(512)));
  auto groups = optim::param_groups_weight_decay(*model, cfg.weight_decay);
  optim::AdamW opt(groups, {.lr = 0.0, .beta1 = 0.9, .beta2 = cfg.beta2, .eps = 1e-9, .weight_decay = cfg.weight_decay});
  optim::InverseSqrt sched({.d_model = d_model, .warmup_steps = std::max<int64_t>(1, cfg.warmup_steps), .scale = cfg.lr});

  int64_t step = 0;
  double prior_seconds = 0;
  int64_t prior_tokens = 0;
  nlohmann::json history = nlohmann::json::array();
  if (cfg.resume) {
    load_checkpoint(res.checkpoint, *model, &opt);
    step = train_state.at("step").get<int64_t>();
    default_generator().set_state(train_state.at("rng_seed").get<uint64_t>(), train_state.at("rng_offset").get<uint64_t>());
    batcher.seek({train_state.at("epoch").get<int64_t>(), train_state.at("batch").get<int64_t>()});
    history = train_state.value("history", nlohmann::json::array());
    prior_seconds = train_state.value("seconds", 0.0);
    prior_tokens = train_state.value("tokens", int64_t(0));
    if (!cfg.quiet) std::fprintf(stderr, "resuming %s from step %lld\n", res.checkpoint.c_str(), (long long)step);
  }
  {
    std::string text;
    for (const auto& h : history) text += h.dump() + "\n";
    io::write_file_atomic(res.log, text);
  }
  const nlohmann::json data_json = {{"data", cfg.data}, {"seed", cfg.seed}, {"synthetic_size", cfg.synthetic_size},
                                    {"dev_count", cfg.dev_count}, {"test_count", cfg.test_count}};

  const auto t_start = std::chrono::steady_clock::now();
  int64_t tokens = 0;   // this call's
  double window_loss = 0;
  int64_t window_steps = 0;
  auto elapsed = [&] { return prior_seconds + seconds_since(t_start); };
  auto save = [&](int64_t at_step) {
    const data::SeqPosition p = batcher.position();
    nlohmann::json ts = {{"step", at_step}, {"epoch", p.epoch}, {"batch", p.index},
                         {"rng_seed", default_generator().seed()}, {"rng_offset", default_generator().offset()},
                         {"history", history}, {"seconds", elapsed()}, {"tokens", prior_tokens + tokens}};
    save_checkpoint(res.checkpoint, *model, &opt,
                    {{"kind", kKind}, {"config", model_cfg}, {"train_state", ts}, {"data", data_json},
                     {"tokenizer", tok_b64}});
  };
  auto write_plot = [&] {
    Series tl{"train loss", {}, {}}, vl{"dev loss", {}, {}}, vb{"dev BLEU / 100", {}, {}, true};
    for (const auto& h : history) {
      const double x = h.at("step").get<double>();
      tl.x.push_back(x); tl.y.push_back(h.at("train_loss").get<double>());
      vl.x.push_back(x); vl.y.push_back(h.at("dev_loss").get<double>());
      vb.x.push_back(x); vb.y.push_back(h.at("dev_bleu").get<double>() / 100.0);
    }
    write_svg_plot(res.plot, cfg.data + ": " + model_name, "step", {tl, vl, vb});
  };
  std::vector<data::TextPair> dev_sample(splits.dev.begin(),
                                         splits.dev.begin() + std::min<int64_t>(cfg.eval_sentences, splits.dev.size()));

  std::unique_ptr<ProgressBar> bar;
  bool over_time = false;
  while (step < stop && !over_time) {
    if (!bar && cfg.progress) {
      const int64_t upto = std::min(stop, (step / eval_every + 1) * eval_every);
      bar = std::make_unique<ProgressBar>("steps " + std::to_string(step + 1) + "-" + std::to_string(upto) + "/" +
                                              std::to_string(total),
                                          upto - step, "tok");
    }
    data::SeqBatch b = batcher.next();
    sched.apply(opt, step + 1);   // the paper's step_num counts from 1
    Tensor loss = seq2seq_batch_loss(*model, b, cfg.label_smoothing);
    const double lv = loss.item();
    if (!std::isfinite(lv)) {
      if (bar) bar->finish();
      fail("train: the loss became ", std::isnan(lv) ? "nan" : "inf", " at step ", step + 1,
           "; stopped. The last good checkpoint is kept at ", res.checkpoint, " (resume with --resume after lowering --lr)");
    }
    loss.backward();
    if (cfg.clip_grad > 0) optim::clip_grad_norm_(model->parameters(), cfg.clip_grad);
    opt.step();
    opt.zero_grad();
    res.step_losses.push_back(lv);
    ++step;
    tokens += b.num_tgt_tokens;
    window_loss += lv;
    ++window_steps;
    if (bar)
      bar->update(step - (step - 1) / eval_every * eval_every, b.num_tgt_tokens,
                  {{"loss", window_loss / double(window_steps)}, {"lr", sched.lr(step)}});
    over_time = cfg.max_minutes > 0 && elapsed() > cfg.max_minutes * 60.0;
    const bool eval_now = step % eval_every == 0 || step == total || over_time;
    if (eval_now) {
      if (bar) bar->finish();
      bar.reset();
      const double secs = seconds_since(t_start);
      const double dev_loss = split_loss(*model, dev_ids, cfg.max_tokens, max_len);
      double dev_bleu = 0;
      if (!dev_sample.empty()) {
        Translator tr(model, text::Tokenizer::deserialize(tok->serialize()), nlohmann::json::object());
        dev_bleu = tr.bleu(dev_sample, 1).score;
        model->train();
      }
      nlohmann::json rec = {{"step", step}, {"epoch_float", double(step) / double(per_epoch)},
                            {"train_loss", window_loss / double(window_steps)}, {"dev_loss", dev_loss},
                            {"dev_bleu", dev_bleu}, {"lr", sched.lr(step)},
                            {"tokens_per_second", double(tokens) / secs}, {"seconds", elapsed()}};
      history.push_back(rec);
      {
        std::ofstream f(res.log, std::ios::app);
        f << rec.dump() << "\n";
      }
      write_plot();
      save(step);
      if (!cfg.quiet)
        std::fprintf(stderr, "step %lld (epoch %.2f): train loss %s, dev loss %s, dev BLEU (greedy, %zu sentences) "
                             "%.2f, %.0f target tokens/s\n",
                     (long long)step, double(step) / double(per_epoch), fmt(window_loss / double(window_steps)).c_str(),
                     fmt(dev_loss).c_str(), dev_sample.size(), dev_bleu, double(tokens) / secs);
      window_loss = 0;
      window_steps = 0;
      res.dev_bleu = dev_bleu;
    } else if (cfg.checkpoint_every > 0 && step % cfg.checkpoint_every == 0) {
      save(step);
    }
  }
  res.train_seconds = seconds_since(t_start);
  res.steps = step;
  res.tokens_per_second = res.train_seconds > 0 ? double(tokens) / res.train_seconds : 0;
  res.final_train_loss = res.step_losses.empty() ? NAN : res.step_losses.back();
  if (step < total && !over_time) return res;   // stopped as if killed: no final evaluation

  // The test split, decoded with beam search.
  model->eval();
  Translator tr(model, std::move(tok), nlohmann::json::object());
  std::vector<std::string> hyps;
  const auto t_test = std::chrono::steady_clock::now();
  text::BleuScore bleu = tr.bleu(splits.test, cfg.beam, cfg.length_penalty, &hyps);
  const double test_secs = seconds_since(t_test);
  res.test_bleu = bleu.score;
  res.test_bleu_line = bleu.format();
  int64_t exact = 0;
  for (size_t i = 0; i < hyps.size(); ++i) exact += hyps[i] == splits.test[i].tgt;
  res.test_exact_match = hyps.empty() ? 0.0 : double(exact) / double(hyps.size());
  {
    std::string text;
    for (size_t i = 0; i < hyps.size(); ++i)
      text += "SRC " + splits.test[i].src + "\nREF " + splits.test[i].tgt + "\nHYP " + hyps[i] + "\n\n";
    io::write_file_atomic(res.samples, text);
  }
  nlohmann::json m = {{"model", model_cfg}, {"data", data_json}, {"steps", step}, {"test_bleu", bleu.score},
                      {"test_bleu_line", bleu.format()},
                      {"test_exact_match", res.test_exact_match}, {"beam", cfg.beam}, {"length_penalty", cfg.length_penalty},
                      {"dev_bleu_greedy", res.dev_bleu}, {"tokens_per_second", res.tokens_per_second},
                      {"train_seconds", res.train_seconds}, {"test_decode_seconds", test_secs},
                      {"train_pairs", res.train_pairs}, {"threads", get_num_threads()},
                      {"vocab_size", tr.tokenizer().vocab_size()}, {"tokenizer", tr.tokenizer().kind()}};
  io::write_file_atomic(res.metrics, m.dump(2) + "\n");
  return res;
}

// ---- inference ----

Translator::Translator(std::shared_ptr<models::Seq2SeqModel> model, std::unique_ptr<text::Tokenizer> tok,
                       nlohmann::json meta)
    : model_(std::move(model)), tok_(std::move(tok)), meta_(std::move(meta)) {
  ATTN_CHECK(model_ && tok_, "Translator: expected a model and a tokenizer");
  ATTN_CHECK(model_->vocab_size() == tok_->vocab_size(), "Translator: the model's vocabulary (", model_->vocab_size(),
             ") differs from the tokenizer's (", tok_->vocab_size(), ")");
}

std::vector<int64_t> Translator::encode_source(const std::string& s) const {
  ATTN_CHECK(!s.empty(), "translate: the source text is empty");
  std::vector<int64_t> ids = tok_->encode(s);
  ATTN_CHECK(!ids.empty(), "translate: the source text '", s, "' has no tokens");
  const int64_t cap = model_->max_length() - 1;
  if (int64_t(ids.size()) > cap) {
    std::fprintf(stderr, "attn: warning: the source has %zu tokens, more than the model's maximum %lld; "
                         "translating its first %lld\n", ids.size(), (long long)cap, (long long)cap);
    ids.resize(size_t(cap));
  }
  return ids;
}

std::vector<std::string> Translator::translate(const std::vector<std::string>& sources, int64_t beam,
                                               double length_penalty, int64_t max_len, int64_t batch) const {
  ATTN_CHECK(beam >= 1 && batch >= 1, "translate: expected beam >= 1 and batch >= 1, got ", beam, " and ", batch);
  NoGradGuard ng;
  const bool was = model_->is_training();
  model_->eval();
  std::vector<std::vector<int64_t>> ids(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) ids[i] = encode_source(sources[i]);
  // Sorted by length so each batch pads little; results go back to input order.
  std::vector<size_t> order(sources.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids[a].size() < ids[b].size(); });
  std::vector<std::string> out(sources.size());
  for (size_t s = 0; s < order.size(); s += size_t(batch)) {
    const size_t e = std::min(order.size(), s + size_t(batch));
    size_t S = 0;
    for (size_t k = s; k < e; ++k) S = std::max(S, ids[order[k]].size());
    const int64_t B = int64_t(e - s);
    Tensor src = Tensor::zeros({B, int64_t(S)}, DType::i64);
    Tensor pad = Tensor::zeros({B, int64_t(S)}, DType::u8);
    for (size_t k = s; k < e; ++k) {
      const auto& v = ids[order[k]];
      int64_t* row = src.data<int64_t>() + (k - s) * S;
      uint8_t* prow = pad.data<uint8_t>() + (k - s) * S;
      for (size_t j = 0; j < S; ++j) {
        if (j < v.size()) row[j] = v[j];
        else prow[j] = 1;
      }
    }
    // Targets a little longer than the source, within the model's maximum.
    const int64_t cap = max_len > 0 ? max_len : std::min<int64_t>(model_->max_length() - 1, int64_t(S) * 2 + 10);
    models::DecodeResult r = beam == 1 ? models::greedy_decode(*model_, src, pad, cap)
                                       : models::beam_search(*model_, src, pad,
                                                             {.beam = beam, .length_penalty = length_penalty, .max_len = cap});
    for (size_t k = s; k < e; ++k) {
      // Each row's own cap (about twice its source), so a row translates the same in any batch.
      std::vector<int64_t> t = r.tokens[k - s];
      const size_t own = max_len > 0 ? size_t(max_len) : size_t(std::min<int64_t>(cap, int64_t(ids[order[k]].size()) * 2 + 10));
      if (t.size() > own) t.resize(own);
      out[order[k]] = tok_->decode(t);
    }
  }
  model_->train(was);
  return out;
}

Alignment Translator::align(const std::string& source, int64_t beam) const {
  NoGradGuard ng;
  const bool was = model_->is_training();
  model_->eval();
  std::vector<int64_t> ids = encode_source(source);
  const int64_t S = int64_t(ids.size());
  Tensor src = Tensor::from_vector(ids, {1, S});
  Tensor pad = Tensor::zeros({1, S}, DType::u8);
  const int64_t cap = std::min<int64_t>(model_->max_length() - 1, S * 2 + 10);
  models::DecodeResult r = beam == 1 ? models::greedy_decode(*model_, src, pad, cap, true)
                                     : models::beam_search(*model_, src, pad,
                                                           {.beam = beam, .max_len = cap, .with_attention = true});
  Alignment a;
  for (int64_t id : ids) a.src_pieces.push_back(tok_->id_to_piece(id));
  for (int64_t id : r.tokens[0]) a.tgt_pieces.push_back(tok_->id_to_piece(id));
  a.translation = tok_->decode(r.tokens[0]);
  ATTN_CHECK(!r.attention.empty() && r.attention[0].defined(), "align: the decoder returned no attention weights");
  a.weights = r.attention[0].contiguous();
  // One row per generated token, eos included: label the last row "</s>" when eos ended the output.
  if (a.weights.size(0) == int64_t(a.tgt_pieces.size()) + 1) a.tgt_pieces.push_back("</s>");
  ATTN_CHECK(a.weights.size(0) == int64_t(a.tgt_pieces.size()), "align: ", a.weights.size(0),
             " rows of attention for ", a.tgt_pieces.size(), " target tokens");
  model_->train(was);
  return a;
}

text::BleuScore Translator::bleu(const std::vector<data::TextPair>& pairs, int64_t beam, double length_penalty,
                                 std::vector<std::string>* hypotheses) const {
  std::vector<std::string> src, ref;
  for (const auto& p : pairs) {
    src.push_back(p.src);
    ref.push_back(p.tgt);
  }
  std::vector<std::string> hyp = translate(src, beam, length_penalty);
  text::BleuScore s = text::corpus_bleu(hyp, ref);
  if (hypotheses) *hypotheses = std::move(hyp);
  return s;
}

bool is_translation_checkpoint(const std::string& checkpoint) {
  return io::read_checkpoint_metadata(checkpoint).value("kind", "") == std::string(kKind);
}

Translator load_translator(const std::string& checkpoint) {
  nlohmann::json meta = io::read_checkpoint_metadata(checkpoint);
  if (meta.value("kind", "") != std::string(kKind)) {
    std::string what = "no translation model";
    if (meta.contains("config") && meta["config"].is_object() && meta["config"].contains("model"))
      what = "the image model '" + meta["config"]["model"].get<std::string>() + "'";
    fail("'", checkpoint, "' holds ", what, ", not a translation model (expected a checkpoint written by "
         "`attn train --model transformer|rnn-attention`)");
  }
  ATTN_CHECK(meta.contains("tokenizer") && meta["tokenizer"].is_string(), "'", checkpoint,
             "': the translation checkpoint has no tokenizer");
  auto tok = text::Tokenizer::deserialize(base64_decode(meta["tokenizer"].get<std::string>(), "checkpoint tokenizer"));
  const nlohmann::json& cfg = meta.at("config");
  std::shared_ptr<models::Seq2SeqModel> model;
  {
    nn::init::SkipRandomInit skip;   // the strict load below overwrites every parameter
    model = models::create_seq2seq(cfg.at("model").get<std::string>(), cfg);
  }
  load_checkpoint(checkpoint, *model, nullptr);
  model->eval();
  return Translator(std::move(model), std::move(tok), std::move(meta));
}

}  // namespace attn::train

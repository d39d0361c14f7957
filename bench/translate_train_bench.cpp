// Translation training, attn against PyTorch 1.13.1 on the SAME data, SentencePiece vocabulary, batches,
// model configuration, schedule and number of steps: the translation task's recipe (label-smoothed
// cross-entropy, Adam 0.9/0.98/1e-9, the inverse-square-root warm-up), timed in non-padded target tokens
// per second, then greedy test BLEU for both, scored by the same attn code (text::corpus_bleu).
//
//   build/bench/translate_train_bench --steps 30 --limit-test 50            # plumbing check
//   build/bench/translate_train_bench --minutes 6 [--beam 4] [--threads 2]  # attn trains 6 min, torch as many steps
//   build/bench/translate_train_bench --minutes 60 --no-peer               # attn's half of a long run ...
//   build/bench/translate_train_bench --steps N --peer-only                # ... and PyTorch's, later, on the same N batches
//   build/bench/translate_train_bench --minutes 6 --precision bf16 [--compare-f32 20]   # bf16 mixed precision
//
// What it does:
//  1. splits and tokenizer exactly as the translation task (load_translation_data, train_translation_tokenizer),
//     the training pairs encoded and batched by data::SeqBatcher with the trainer's options and seed;
//  2. trains TransformerSeq2Seq on the batcher's sequence for --steps or --minutes, recording each batch;
//  3. writes WORK/batches.safetensors (every step's src / tgt_in / tgt_out as i32, the test sources' ids,
//     the config) and runs bench/peers/translate_train.py on it (OMP_WAIT_POLICY=PASSIVE, same threads),
//     which trains torch.nn.Transformer on those batches and writes its greedy test ids;
//  4. decodes the test split with attn (greedy; beam search too with --beam N > 1), detokenises the
//     peer's ids with the same tokenizer, scores both with text::corpus_bleu, prints a table and writes
//     WORK/results.json.
// Timing: each side times only its training steps (lr set, forward, loss, backward, optimizer step,
// zero_grad); building the batch is outside (attn: SeqBatcher::make_batch; torch: int32 -> int64 copy).
// Tokens/s is reported over all steps and without the first --rate-skip steps (allocator / primitive
// cache warm-up); the ratio uses the latter. OpenMP's wait policy is read by libgomp before main(), so
// set it in the environment (bench/translate.sh uses PASSIVE for both sides; the table says which):
// libgomp's default spinning costs attn ~40% of its rate on a loaded 2-core machine.
// Split runs: the batches depend only on the data, the vocabulary and the seed, so an attn-only run
// (--no-peer) and a later --peer-only run with --steps set to the attn run's step count train on the
// same batches; both print the batches' FNV-1a hash to show it. Speeds from different runs are not
// compared (the ratio needs the same window); BLEU is a property of the steps, not of the window.
// --precision bf16: both sides train under bf16 mixed precision (attn: each timed step's forward, loss
// and backward under AutocastBf16Guard, the optimizer step outside it, as train::Run's step; PyTorch:
// forward and loss under torch.autocast("cpu", dtype=torch.bfloat16)); decoding and BLEU stay f32 (the
// bf16-trained models are evaluated in f32, as the trainer does). It needs a CPU with a native bf16
// matmul; elsewhere the program says so and measures f32. attn's f32-vs-bf16 speed-up is two runs of
// this program, one per precision; --compare-f32 K also trains the run's first K batches once more
// after attn's decoding, alternately in bf16 and in f32 (the learning rate held at the last step's),
// and reports attn's tokens/s in each and their ratio on those batches.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/attn.h"
#include "attn/autograd/grad_mode.h"
#include "attn/data/seq_batch.h"
#include "attn/io/safetensors.h"
#include "attn/models/decode.h"
#include "attn/models/transformer.h"
#include "attn/ops/loss.h"
#include "attn/ops/matmul.h"
#include "attn/optim/adam.h"
#include "attn/optim/schedule.h"
#include "attn/text/bleu.h"
#include "attn/train/tasks/translation.h"
#include "attn/train/trainer.h"
#include "attn/infer/translate.h"
#include "bench_util.h"

using namespace attn;

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Options {
  std::string data = "bible-en-es", work = "runs/translate_bench", sword_dir = "/usr/share/sword";
  int threads = 2;
  int64_t steps = 0;         // 0: --minutes decides
  double minutes = 0;
  int64_t d_model = 256, nhead = 4, encoder_layers = 3, decoder_layers = 3, d_ff = 1024;
  double dropout = 0.1;
  int share_embeddings = -1, tie_output = -1;   // -1: the model's default
  int64_t vocab = 8000, max_tokens = 4096, warmup = 4000, max_length = 128;
  double lr = 1.0, label_smoothing = 0.1, beta2 = 0.98;
  uint64_t seed = 0;
  int64_t limit_train = 0, limit_test = 0, beam = 1, rate_skip = 10, log_every = 100;
  int64_t compare_f32 = 0;   // --compare-f32 K (bf16 only): K batches retrained in bf16 and f32 after the run
  bool peer = true, attn = true;
  std::string precision = "f32";
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "translate_train_bench: %s\n"
               "flags: --steps N | --minutes M, --data bible-en-es|synthetic:TASK|FILE.tsv, --work DIR, --threads N,\n"
               "  --d-model, --heads, --encoder-layers, --decoder-layers, --layers (both), --d-ff, --dropout,\n"
               "  --share-embeddings 0|1, --tie-output 0|1, --vocab, --max-tokens, --max-length, --warmup, --lr,\n"
               "  --label-smoothing, --beta2, --seed, --limit-train, --limit-test, --beam N (attn only, extra),\n"
               "  --rate-skip N, --log-every N, --no-peer, --peer-only (needs --steps), --sword-dir DIR,\n"
               "  --precision f32|bf16, --compare-f32 K (with bf16)\n",
               why.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-peer") { o.peer = false; continue; }
    if (a == "--peer-only") { o.attn = false; continue; }
    if (i + 1 >= argc) usage("flag " + a + " needs a value");
    const std::string v = argv[++i];
    auto I = [&] { return std::stoll(v); };
    auto D = [&] { return std::stod(v); };
    if (a == "--steps") o.steps = I();
    else if (a == "--minutes") o.minutes = D();
    else if (a == "--data") o.data = v;
    else if (a == "--work") o.work = v;
    else if (a == "--sword-dir") o.sword_dir = v;
    else if (a == "--threads") o.threads = int(I());
    else if (a == "--d-model") o.d_model = I();
    else if (a == "--heads") o.nhead = I();
    else if (a == "--encoder-layers") o.encoder_layers = I();
    else if (a == "--decoder-layers") o.decoder_layers = I();
    else if (a == "--layers") o.encoder_layers = o.decoder_layers = I();
    else if (a == "--d-ff") o.d_ff = I();
    else if (a == "--dropout") o.dropout = D();
    else if (a == "--share-embeddings") o.share_embeddings = int(I());
    else if (a == "--tie-output") o.tie_output = int(I());
    else if (a == "--vocab") o.vocab = I();
    else if (a == "--max-tokens") o.max_tokens = I();
    else if (a == "--max-length") o.max_length = I();
    else if (a == "--warmup") o.warmup = I();
    else if (a == "--lr") o.lr = D();
    else if (a == "--label-smoothing") o.label_smoothing = D();
    else if (a == "--beta2") o.beta2 = D();
    else if (a == "--seed") o.seed = uint64_t(I());
    else if (a == "--limit-train") o.limit_train = I();
    else if (a == "--limit-test") o.limit_test = I();
    else if (a == "--beam") o.beam = I();
    else if (a == "--rate-skip") o.rate_skip = I();
    else if (a == "--log-every") o.log_every = I();
    else if (a == "--precision") o.precision = v;
    else if (a == "--compare-f32") o.compare_f32 = I();
    else usage("unknown flag " + a);
  }
  if ((o.steps > 0) == (o.minutes > 0)) usage("give exactly one of --steps N (> 0) or --minutes M (> 0)");
  if (!o.attn && o.steps <= 0) usage("--peer-only needs --steps N (the attn run's step count), not --minutes");
  if (!o.attn && !o.peer) usage("--peer-only and --no-peer together leave nothing to run");
  const bool asked_bf16 = o.precision == "bf16";
  if (!bench::resolve_precision(o.precision)) usage("expected --precision f32 or bf16, got '" + o.precision + "'");
  if (o.compare_f32 < 0 || (o.compare_f32 > 0 && !asked_bf16))
    usage("--compare-f32 K needs K >= 0 and --precision bf16");
  if (o.precision == "f32") o.compare_f32 = 0;   // bf16 asked for, not measurable here
  return o;
}

// A flat i32 tensor of a list of id rows (concatenated).
Tensor flat_i32(const std::vector<int32_t>& v) {
  return Tensor::from_vector(v, {int64_t(v.size())});
}

void append_i32(std::vector<int32_t>& dst, const Tensor& ids) {   // ids (B, L) i64 contiguous
  const Tensor c = ids.contiguous();
  const int64_t* p = c.data<int64_t>();
  for (int64_t i = 0; i < c.numel(); ++i) dst.push_back(int32_t(p[i]));
}

double rate(const std::vector<double>& secs, const std::vector<int64_t>& tok, size_t skip) {
  double s = 0, t = 0;
  for (size_t i = std::min(skip, secs.size()); i < secs.size(); ++i) {
    s += secs[i];
    t += double(tok[i]);
  }
  return s > 0 ? t / s : 0.0;
}

double mean_tail(const std::vector<double>& v, size_t n) {
  if (v.empty()) return NAN;
  const size_t b = v.size() > n ? v.size() - n : 0;
  double s = 0;
  for (size_t i = b; i < v.size(); ++i) s += v[i];
  return s / double(v.size() - b);
}

// --compare-f32 K: attn's tokens/s on the run's first K batches, each trained once more in bf16 mixed
// precision and then in f32 (the model keeps training; the optimizer's learning rate stays as it is).
struct F32Compare {
  int64_t steps = 0;
  double bf16_tps = NAN, f32_tps = NAN;
};

F32Compare compare_f32(models::Seq2SeqModel& model, optim::AdamW& opt, const std::vector<data::SeqBatch>& batches,
                       double label_smoothing) {
  F32Compare c;
  if (batches.empty()) return c;
  model.train();
  double secs[2] = {0, 0};   // [0]: f32, [1]: bf16
  int64_t tokens = 0;
  for (const data::SeqBatch& b : batches) {
    for (int mixed = 1; mixed >= 0; --mixed) {
      const auto t0 = Clock::now();
      {
        const AutocastBf16Guard mp(mixed != 0);
        Tensor loss = train::seq2seq_batch_loss(model, b, label_smoothing);
        (void)loss.item();
        loss.backward();
      }
      opt.step();
      opt.zero_grad();
      secs[mixed] += since(t0);
    }
    tokens += b.num_tgt_tokens;
  }
  c.steps = int64_t(batches.size());
  c.bf16_tps = double(tokens) / secs[1];
  c.f32_tps = double(tokens) / secs[0];
  return c;
}

// The machine's 1/5/15-minute load averages: these numbers are only comparable on a quiet machine.
std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return f ? a + " " + b + " " + c : std::string("unknown");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    const bool bf16 = o.precision == "bf16";
    set_num_threads(o.threads);
    std::filesystem::create_directories(o.work);
    const auto t_all = Clock::now();

    // ---- 1. data, vocabulary, batches: as train_seq2seq makes them.
    train::TrainConfig cfg;
    cfg.data = o.data;
    cfg.translation.sword_dir = o.sword_dir;
    cfg.translation.vocab_size = o.vocab;
    cfg.translation.max_tokens = o.max_tokens;
    cfg.translation.max_length = o.max_length;
    cfg.seed = o.seed;
    const auto t_data = Clock::now();
    data::PairSplits splits = train::load_translation_data(o.data, cfg.seed, cfg.translation.sword_dir, cfg.translation.synthetic_size,
                                                           cfg.translation.dev_count, cfg.translation.test_count);
    if (o.limit_train > 0 && int64_t(splits.train.size()) > o.limit_train) splits.train.resize(size_t(o.limit_train));
    if (o.limit_test > 0 && int64_t(splits.test.size()) > o.limit_test) splits.test.resize(size_t(o.limit_test));
    std::unique_ptr<text::Tokenizer> tok = train::train_translation_tokenizer(cfg.translation.tokenizer, cfg.translation.vocab_size, o.data, splits.train);
    std::vector<data::SeqPair> train_ids(splits.train.size());
    for (size_t i = 0; i < splits.train.size(); ++i)
      train_ids[i] = {tok->encode(splits.train[i].src), tok->encode(splits.train[i].tgt)};
    std::fprintf(stderr, "data: %s, %zu train / %zu test pairs, %s vocabulary of %lld (%.1f s)\n", o.data.c_str(),
                 splits.train.size(), splits.test.size(), tok->kind().c_str(), (long long)tok->vocab_size(),
                 since(t_data));

    manual_seed(cfg.seed);   // the trainer's: weights from the seed
    nlohmann::json mcfg = {{"vocab_size", tok->vocab_size()}, {"d_model", o.d_model}, {"nhead", o.nhead},
                           {"encoder_layers", o.encoder_layers}, {"decoder_layers", o.decoder_layers},
                           {"d_ff", o.d_ff}, {"dropout", o.dropout}};
    if (o.share_embeddings >= 0) mcfg["share_embeddings"] = o.share_embeddings != 0;
    if (o.tie_output >= 0) mcfg["tie_output"] = o.tie_output != 0;
    std::shared_ptr<models::Seq2SeqModel> model = models::create_seq2seq("transformer", mcfg);
    mcfg = model->config();
    model->train();

    const int64_t max_len = std::min(cfg.translation.max_length, model->max_length() - 1);
    data::SeqBatcher batcher(train_ids, {.max_tokens = cfg.translation.max_tokens, .max_length = max_len,
                                         .over_length = data::OverLength::drop, .seed = cfg.seed});
    std::fprintf(stderr, "data: %lld training pairs kept (%lld longer than %lld dropped), %lld batches per epoch\n",
                 (long long)batcher.num_pairs(), (long long)batcher.num_dropped_long(), (long long)max_len,
                 (long long)batcher.num_batches_in_epoch(0));

    // ---- 2. attn training (the train_seq2seq step: batch_loss, AdamW without decay, InverseSqrt).
    const int64_t d_model = mcfg.at("d_model").get<int64_t>();
    optim::AdamW opt(optim::param_groups_weight_decay(*model, 0.0),
                     {.lr = 0.0, .beta1 = 0.9, .beta2 = o.beta2, .eps = 1e-9, .weight_decay = 0.0});
    optim::InverseSqrt sched({.d_model = d_model, .warmup_steps = std::max<int64_t>(1, o.warmup), .scale = o.lr});

    std::vector<int32_t> all_src, all_tin, all_tout, shapes, ntok;
    std::vector<double> step_secs, losses;
    std::vector<int64_t> step_tokens;
    std::vector<data::SeqBatch> replay;   // --compare-f32: the first batches
    const auto t_train = Clock::now();
    int64_t step = 0;
    uint64_t batches_hash = 1469598103934665603ull;   // FNV-1a over every batch's shape and ids
    auto hash_in = [&](int32_t v) {
      for (int i = 0; i < 4; ++i) batches_hash = (batches_hash ^ uint8_t(uint32_t(v) >> (8 * i))) * 1099511628211ull;
    };
    while (o.steps > 0 ? step < o.steps : since(t_train) < o.minutes * 60.0) {
      data::SeqBatch b = batcher.next();
      shapes.insert(shapes.end(), {int32_t(b.src.size(0)), int32_t(b.src.size(1)), int32_t(b.tgt_in.size(1))});
      ntok.push_back(int32_t(b.num_tgt_tokens));
      append_i32(all_src, b.src);
      append_i32(all_tin, b.tgt_in);
      append_i32(all_tout, b.tgt_out);
      if (!o.attn) {   // --peer-only: the batch is recorded, nothing trains
        ++step;
        continue;
      }
      if (int64_t(replay.size()) < o.compare_f32) replay.push_back(b);
      const auto t0 = Clock::now();
      sched.apply(opt, step + 1);   // the paper's step_num counts from 1
      double lv = 0;
      {
        const AutocastBf16Guard mp(bf16);   // forward, loss and backward in bf16 mixed precision where --precision bf16
        Tensor loss = train::seq2seq_batch_loss(*model, b, o.label_smoothing);
        lv = loss.item();
        ATTN_CHECK(std::isfinite(lv), "translate_train_bench: the attn loss became ", lv, " at step ", step + 1);
        loss.backward();
      }
      opt.step();
      opt.zero_grad();
      step_secs.push_back(since(t0));
      losses.push_back(lv);
      step_tokens.push_back(b.num_tgt_tokens);
      ++step;
      if (o.log_every > 0 && step % o.log_every == 0)
        std::fprintf(stderr, "attn step %lld: loss %.4f (mean of last %lld %.4f), %.0f tok/s, %.0f s\n",
                     (long long)step, lv, (long long)o.log_every, mean_tail(losses, size_t(o.log_every)),
                     rate(step_secs, step_tokens, size_t(o.rate_skip)), since(t_train));
    }
    for (int32_t v : shapes) hash_in(v);
    for (const auto* v : {&all_src, &all_tin, &all_tout})
      for (int32_t x : *v) hash_in(x);
    char hash_hex[17];
    std::snprintf(hash_hex, sizeof hash_hex, "%016llx", (unsigned long long)batches_hash);
    std::fprintf(stderr, "batches: %lld steps, FNV-1a %s\n", (long long)step, hash_hex);
    const double attn_wall = since(t_train);
    double attn_step_secs = 0;
    int64_t attn_tokens = 0;
    for (size_t i = 0; i < step_secs.size(); ++i) {
      attn_step_secs += step_secs[i];
      attn_tokens += step_tokens[i];
    }
    const double attn_tps_all = attn_step_secs > 0 ? double(attn_tokens) / attn_step_secs : 0;
    const double attn_tps = rate(step_secs, step_tokens, size_t(o.rate_skip));

    // ---- the test sources (ids as Translator encodes them: cut to the model's maximum - 1).
    std::vector<std::string> test_src, test_ref;
    std::vector<int32_t> test_flat, test_len;
    for (const auto& p : splits.test) {
      test_src.push_back(p.src);
      test_ref.push_back(p.tgt);
      std::vector<int64_t> ids = tok->encode(p.src);
      if (int64_t(ids.size()) > model->max_length() - 1) ids.resize(size_t(model->max_length() - 1));
      test_len.push_back(int32_t(ids.size()));
      for (int64_t id : ids) test_flat.push_back(int32_t(id));
    }

    // ---- 3. the batches file, for the peer.
    const nlohmann::json run_cfg = {{"model", mcfg}, {"seed", o.seed}, {"lr", o.lr}, {"warmup_steps", o.warmup},
                                    {"beta2", o.beta2}, {"label_smoothing", o.label_smoothing},
                                    {"rate_skip_steps", o.rate_skip}, {"data", o.data}, {"max_tokens", o.max_tokens}};
    const std::string batches_path = o.work + "/batches.safetensors";
    io::save_safetensors(batches_path,
                         {{"shapes", Tensor::from_vector(shapes, {step, 3})},
                          {"ntok", flat_i32(ntok)},
                          {"src", flat_i32(all_src)},
                          {"tgt_in", flat_i32(all_tin)},
                          {"tgt_out", flat_i32(all_tout)},
                          {"test_src", flat_i32(test_flat)},
                          {"test_len", flat_i32(test_len)}},
                         {{"config", run_cfg.dump()}});

    // ---- 4a. attn decoding: greedy (and beam with --beam N > 1), by the trainer's Translator.
    infer::Translator tr(model, text::Tokenizer::deserialize(tok->serialize()), nlohmann::json::object());
    auto t_dec = Clock::now();
    const std::vector<std::string> attn_hyps = o.attn ? tr.translate(test_src, 1) : std::vector<std::string>();
    const double attn_dec_secs = o.attn ? since(t_dec) : NAN;
    text::BleuScore attn_bleu;
    if (o.attn) attn_bleu = text::corpus_bleu(attn_hyps, test_ref);
    else attn_bleu.score = NAN;
    text::BleuScore attn_beam_bleu;
    double attn_beam_secs = 0;
    if (o.attn && o.beam > 1) {
      t_dec = Clock::now();
      const std::vector<std::string> h = tr.translate(test_src, o.beam, 0.6);
      attn_beam_secs = since(t_dec);
      attn_beam_bleu = text::corpus_bleu(h, test_ref);
    }
    if (o.attn)
      std::fprintf(stderr, "attn: %lld steps, %.0f tok/s, greedy test %s (%.1f s)\n", (long long)step, attn_tps,
                   attn_bleu.format().c_str(), attn_dec_secs);
    const F32Compare cmp = compare_f32(*model, opt, replay, o.label_smoothing);   // after decoding: BLEU is the run's

    // ---- 3b/4b. the peer.
    nlohmann::json peer = nlohmann::json::object();
    text::BleuScore torch_bleu;
    std::vector<std::string> torch_hyps;
    double peer_wall = NAN;
    if (o.peer) {
      const std::string cmd = "OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 " + std::string(ATTN_SOURCE_DIR) +
                              "/bench/peers/translate_train.py --work '" + o.work + "' --threads " +
                              std::to_string(o.threads) + " --log-every " + std::to_string(o.log_every) +
                              (bf16 ? " --precision bf16" : "");
      const auto t_peer = Clock::now();
      const std::string line = bench::last_line(bench::run_capture(cmd));
      peer_wall = since(t_peer);
      try {
        peer = nlohmann::json::parse(line);
      } catch (const std::exception&) {
        fail("translate_train_bench: the peer (", cmd, ") printed no JSON summary; its last line: '", line, "'");
      }
      std::ifstream f(o.work + "/torch_hyps.json");
      ATTN_CHECK(f.good(), "translate_train_bench: the peer wrote no ", o.work, "/torch_hyps.json");
      const nlohmann::json h = nlohmann::json::parse(f);
      for (const auto& ids : h.at("hyps")) torch_hyps.push_back(tok->decode(ids.get<std::vector<int64_t>>()));
      ATTN_CHECK(torch_hyps.size() == test_ref.size(), "translate_train_bench: expected ", test_ref.size(),
                 " peer hypotheses, found ", torch_hyps.size());
      torch_bleu = text::corpus_bleu(torch_hyps, test_ref);
    } else {
      torch_bleu.score = NAN;   // --no-peer: no PyTorch column (not a BLEU of 0)
    }
    {
      std::string text;
      for (size_t i = 0; i < test_src.size(); ++i)
        text += "SRC " + test_src[i] + "\nREF " + test_ref[i] + "\nATTN " +
                (i < attn_hyps.size() ? attn_hyps[i] : std::string()) + "\nTORCH " +
                (i < torch_hyps.size() ? torch_hyps[i] : std::string()) + "\n\n";
      io::write_file_atomic(o.work + "/test_translations.txt", text);
    }

    // ---- the table.
    const double torch_tps = peer.value("tokens_per_second_after_skip", NAN);
    const double torch_tps_all = peer.value("tokens_per_second", NAN);
    const double torch_train = peer.value("train_seconds", NAN);
    const double torch_dec = peer.value("decode_seconds", NAN);
    const double torch_loss = peer.contains("mean_loss_last_100") && peer["mean_loss_last_100"].is_number()
                                  ? peer["mean_loss_last_100"].get<double>() : NAN;
    const double attn_loss = mean_tail(losses, 100);
    const double ratio = attn_tps / torch_tps;
    const double dbleu = attn_bleu.score - torch_bleu.score;
    std::printf("\nTranslation training, %s: Transformer %lld+%lld layers, d_model %lld, %lld heads, d_ff %lld, "
                "dropout %.2g, vocab %lld, max_tokens %lld, warm-up %lld, %d threads%s\n",
                o.data.c_str(), (long long)o.encoder_layers, (long long)o.decoder_layers, (long long)d_model,
                (long long)o.nhead, (long long)o.d_ff, o.dropout, (long long)tok->vocab_size(),
                (long long)o.max_tokens, (long long)o.warmup, o.threads,
                bf16 ? ", training bf16 mixed precision (PyTorch: CPU autocast), decoding f32" : "");
    std::printf("  %-34s %14s %14s %10s\n", "", "attn", "PyTorch", "attn/torch");
    std::printf("  %-34s %14lld %14lld  (batches FNV-1a %s)\n", "steps (same batches)", o.attn ? (long long)step : 0LL,
                (long long)peer.value("steps", int64_t(0)), hash_hex);
    if (!o.attn) std::printf("  (--peer-only: attn did not train in this run; its columns are empty)\n");
    std::printf("  %-34s %14.0f %14.0f %9.2fx  (target >= 1.5x)\n",
                ("target tokens/s (steps > " + std::to_string(o.rate_skip) + ")").c_str(), attn_tps, torch_tps, ratio);
    std::printf("  %-34s %14.0f %14.0f %9.2fx\n", "target tokens/s (all steps)", attn_tps_all, torch_tps_all,
                attn_tps_all / torch_tps_all);
    std::printf("  %-34s %14.1f %14.1f\n", "training step time, s", attn_step_secs, torch_train);
    std::printf("  %-34s %14.4f %14.4f\n", "train loss, mean of last 100 steps", attn_loss, torch_loss);
    std::printf("  %-34s %14.2f %14.2f %+9.2f  (target within 1)\n", "test BLEU, greedy", attn_bleu.score,
                torch_bleu.score, dbleu);
    std::printf("  %-34s %14.1f %14.1f  (attn: KV cache; torch: no cache)\n", "greedy decode of the test set, s",
                attn_dec_secs, torch_dec);
    if (o.attn && o.beam > 1)
      std::printf("  %-34s %14.2f %14s  (%.1f s)\n", ("test BLEU, attn beam " + std::to_string(o.beam)).c_str(),
                  attn_beam_bleu.score, "-", attn_beam_secs);
    if (cmp.steps > 0)
      std::printf("  %-34s %14.0f %14.0f %9.2fx  (attn bf16 / attn f32 on the first %lld batches, after the run)\n",
                  "attn tokens/s, bf16 and f32", cmp.bf16_tps, cmp.f32_tps, cmp.bf16_tps / cmp.f32_tps,
                  (long long)cmp.steps);
    std::printf("  %-34s %14.1f %14.1f\n", "wall time, training loop / peer, s", attn_wall, peer_wall);
    std::printf("  attn  %s\n  torch %s\n", attn_bleu.format().c_str(), torch_bleu.format().c_str());
    const char* wait = std::getenv("OMP_WAIT_POLICY");
    const std::string attn_setting = std::string("OMP_WAIT_POLICY=") + (wait ? wait : "(unset: libgomp spins)");
    std::printf("  attn run with %s, PyTorch with OMP_WAIT_POLICY=PASSIVE; load average at the end %s\n",
                attn_setting.c_str(), load_average().c_str());
    std::printf("  total wall time %.1f s; translations in %s/test_translations.txt\n", since(t_all), o.work.c_str());

    nlohmann::json res = {
        {"bench", "translate_train"}, {"data", o.data}, {"model", mcfg}, {"threads", o.threads},
        {"max_tokens", o.max_tokens}, {"warmup_steps", o.warmup}, {"lr", o.lr}, {"label_smoothing", o.label_smoothing},
        {"steps", step}, {"test_sentences", test_ref.size()}, {"rate_skip_steps", o.rate_skip},
        {"batches_fnv1a", hash_hex}, {"sides", o.attn ? (o.peer ? "both" : "attn only") : "peer only"},
        {"precision", o.precision},
        {"attn", {{"tokens_per_second", attn_tps}, {"tokens_per_second_all", attn_tps_all},
                  {"train_step_seconds", attn_step_secs}, {"train_wall_seconds", attn_wall},
                  {"mean_loss_last_100", attn_loss}, {"final_loss", losses.empty() ? NAN : losses.back()},
                  {"test_bleu_greedy", attn_bleu.score}, {"test_bleu_greedy_line", attn_bleu.format()},
                  {"greedy_decode_seconds", attn_dec_secs}, {"setting", attn_setting}}},
        {"torch", {{"tokens_per_second", torch_tps}, {"tokens_per_second_all", torch_tps_all},
                   {"train_step_seconds", torch_train}, {"peer_wall_seconds", peer_wall},
                   {"mean_loss_last_100", torch_loss}, {"test_bleu_greedy", torch_bleu.score},
                   {"test_bleu_greedy_line", torch_bleu.format()}, {"greedy_decode_seconds", torch_dec},
                   {"decode", "greedy, batched 64, no KV cache"}, {"setting", "OMP_WAIT_POLICY=PASSIVE"}}},
        {"load_average_at_end", load_average()}, {"ratio_tokens_per_second", ratio}, {"bleu_difference", dbleu}, {"wall_seconds", since(t_all)}};
    if (o.attn && o.beam > 1) {
      res["attn"]["test_bleu_beam"] = attn_beam_bleu.score;
      res["attn"]["beam"] = o.beam;
      res["attn"]["beam_decode_seconds"] = attn_beam_secs;
    }
    if (cmp.steps > 0)
      res["attn"]["compare_f32"] = {{"steps", cmp.steps}, {"bf16_tokens_per_second", cmp.bf16_tps},
                                    {"f32_tokens_per_second", cmp.f32_tps},
                                    {"speedup_over_f32", cmp.bf16_tps / cmp.f32_tps}};
    res["attn"]["losses"] = losses;
    if (peer.contains("losses")) res["torch"]["losses"] = peer["losses"];
    io::write_file_atomic(o.work + "/results.json", res.dump(1) + "\n");
    res["attn"].erase("losses");
    res["torch"].erase("losses");
    std::cout << res.dump() << std::endl;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "translate_train_bench: %s\n", e.what());
    return 1;
  }
}

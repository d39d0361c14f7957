// attn bench --model NAME [--weights W] [--batch B] [--seq-len T] [--lengths L,L,...] [--threads T]
// [--iters N] [--warmup W] [--json]: inference latency of an image classifier, or of a BERT on random
// token ids (B sequences of T tokens, no padding; or one batch of the --lengths given, padded to the
// longest with an attention mask, which BERT runs packed: its valid tokens only), in eval mode without
// gradients.
//
//   attn bench --model vit_base_patch16_224 --batch 1 --threads 2
//   attn bench --model bert-base-uncased --batch 1 --seq-len 128 --model-config '{"architecture": "BertModel"}'
//   attn bench --model bert-base-uncased --lengths 16,32,48,64,80,96,112,128 --dtype bf16
//
// Prints the latency median and p90 over N timed forward passes (after W warm-up passes), images/s
// (BERT: sequences/s and tokens/s, the valid tokens counted),
// GFLOP/s (2 x the model's macs_per_image x batch / median; BERT: the sum of macs_per_sequence over
// the batch's sequences at their own lengths), the fraction of the GEMM ceiling measured
// in the same run (a 2048^3 f32 matmul through attn's matmul, i.e. oneDNN, timed for --gemm-seconds;
// the best repetition counts), the peak resident memory (VmHWM of /proc/self/status) of the load and,
// counted afresh after it, of the passes (steady state), and the tensor bytes of the model and of a
// pass. The ceiling is measured last, so its buffers do not count
// in the steady-state peak. Weights are random (the registry's init) unless --weights gives an attn
// checkpoint or foreign ViT/DeiT weights (timm / hf / torchvision layout, detected from the keys), or
// BERT weights in transformers' layout (with their config.json).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "attn/attn.h"
#include "attn/core/profile.h"
#include "attn/core/parallel.h"
#include "attn/models/pretrained.h"
#include "attn/nn/linear.h"
#include "attn/ops/matmul.h"
#include "attn/ops/quantize.h"
#include "../commands.h"

namespace attn::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A "VmHWM:   123456 kB" line of /proc/self/status, in bytes (0 where /proc is absent).
int64_t proc_status_bytes(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string k = std::string(key) + ":";
  while (std::getline(f, line))
    if (line.rfind(k, 0) == 0) return std::stoll(line.substr(k.size())) * 1024;
  return 0;
}

// nearest-rank percentile of sorted values
double percentile(const std::vector<double>& sorted, double q) {
  const size_t n = sorted.size();
  if (n == 0) return 0;
  if (q == 0.5) return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  const size_t idx = std::min(n - 1, size_t(std::max(0.0, std::ceil(q * double(n)) - 1)));
  return sorted[idx];
}

// GFLOP/s of an n^3 matmul in the model's precision, the best of the repetitions run within
// `budget_s` (at least 2): f32; for bf16 the same linear() a bf16 model's layers run (f32 activations
// rounded to bf16, bf16 weights, f32 result); for int8 likewise (activations quantized per row, the
// int8 weight packed, f32 result).
double gemm_ceiling_gflops(int64_t n, double budget_s, const std::string& dtype) {
  Generator g(1);
  const Tensor a = randn({n, n}, g);
  Tensor b = randn({n, n}, g);
  if (dtype == "bf16") b = b.to(DType::bf16);
  if (dtype == "int8") {
    Int8Weight q = quantize_weight_int8(b);
    b = q.weight;
    set_int8_weight_scale(b, q.scale);
    pack_linear_weight(b);
  }
  NoGradGuard ng;
  auto run = [&] { return dtype == "f32" ? matmul(a, b) : linear(a, b); };
  (void)run();   // primitive creation and first touch
  double best = 1e30;
  const auto t0 = Clock::now();
  for (int r = 0; r < 2 || seconds_since(t0) < budget_s; ++r) {
    const auto t = Clock::now();
    Tensor c = run();
    best = std::min(best, seconds_since(t));
  }
  return 2.0 * double(n) * double(n) * double(n) / best / 1e9;
}

struct BenchOpts {
  std::string model, weights, format = "auto", dtype = "f32", model_config, lengths_arg;
  int64_t batch = 1, seq_len = 128, iters = 20, warmup = 3, gemm_size = 2048;
  double gemm_seconds = 1.0;
  bool json = false, no_pack = false, padded = false, profile = false;
  bool batch_given = false, seq_len_given = false;
  std::vector<int64_t> lengths;   // --lengths parsed: one sequence each
  int threads = 0;
};

// "16,32,48" -> {16, 32, 48}, each >= 1.
std::vector<int64_t> parse_lengths(const std::string& s) {
  std::vector<int64_t> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t end = std::min(s.find(',', at), s.size());
    const std::string item = s.substr(at, end - at);
    char* stop = nullptr;
    const long long v = std::strtoll(item.c_str(), &stop, 10);
    ATTN_CHECK(!item.empty() && stop && *stop == '\0' && v >= 1, "bench: expected --lengths as positive integers "
               "separated by commas (e.g. 16,32,64), got '", s, "'");
    out.push_back(v);
    at = end + 1;
  }
  return out;
}

// The model the options name: random weights, or an attn checkpoint / foreign weights of --model
// streamed in (converted tensor by tensor); eval mode; bf16 Linear weights when asked; packed unless
// --no-pack. `weights_desc` and `packed` say which.
std::shared_ptr<models::Model> load_bench_model(const BenchOpts& o, std::string& weights_desc, int64_t& packed) {
  std::shared_ptr<models::Model> model;
  weights_desc = "random";
  const bool text = models::model_entry(o.model).task == models::kMaskedLM;
  nlohmann::json over = nlohmann::json::object();
  if (!o.model_config.empty()) {
    over = nlohmann::json::parse(o.model_config, nullptr, /*allow_exceptions=*/false);
    ATTN_CHECK(!over.is_discarded() && over.is_object(), "bench: --model-config: expected a JSON object, got '",
               o.model_config, "'");
  }
  if (o.weights.empty()) {
    model = models::create(o.model, over);
  } else {
    models::PretrainedSource src = models::PretrainedSource::foreign(o.weights, o.model);
    src.kind = models::WeightsKind::detect;
    src.format = o.format;
    src.linear_dtype = o.dtype == "bf16" ? DType::bf16 : DType::f32;
    src.pack_linear_weights = false;   // below, unless --no-pack
    src.image_classifier_only = !text;
    if (!o.model_config.empty()) src.model_config = over;
    const models::Pretrained p = models::load_pretrained(src);
    model = p.module;
    weights_desc = p.metadata.contains("format") ? "attn checkpoint" : "foreign";   // a checkpoint's metadata
  }
  model->eval();
  // Random weights; a no-op for loaded ones (bf16 already). BERT's MLM decoder gets its own bf16 copy of
  // the (f32) word embeddings.
  if (o.dtype == "bf16") nn::convert_linear_weights_to_bf16(*model);
  if (o.dtype == "int8") models::quantize_model_int8(*model);
  // Weights packed once into the GEMM's layout, as predict / eval do (nn::pack_linear_weights).
  packed = o.no_pack ? 0 : nn::pack_linear_weights(*model);
  return model;
}

// The text report of a run's JSON record.
void print_bench_text(const BenchOpts& o, const nlohmann::json& j) {
  const auto& lat = j["latency_ms"];
  const double gflops = j["gflops"], ceiling = j["gemm_ceiling_gflops"];
  std::printf("%s  batch %lld  threads %d  %s  %s weights (%.1f MB; %lld Linear weights packed), loaded in %.2f s\n",
              o.model.c_str(), (long long)o.batch, get_num_threads(),
              o.dtype == "f32" ? "f32" : (o.dtype + ", GEMM " + j["gemm_path"].get<std::string>()).c_str(),
              j["weights"].get<std::string>().c_str(), j["weights_mb"].get<double>(),
              (long long)j["packed_linear_weights"].get<int64_t>(), j["load_s"].get<double>());
  std::printf("latency     median %.2f ms  p90 %.2f ms  (min %.2f, max %.2f; %lld timed after %lld warm-up)\n",
              lat["median"].get<double>(), lat["p90"].get<double>(), lat["min"].get<double>(), lat["max"].get<double>(),
              (long long)o.iters, (long long)o.warmup);
  if (j.contains("lengths"))
    std::printf("throughput  %.2f sequences/s, %.0f tokens/s (%lld tokens, lengths %s, padded to %lld, %s)  "
                "%.1f GFLOP/s (%.3f GMACs/sequence on average)\n",
                j["sequences_per_s"].get<double>(), j["tokens_per_s"].get<double>(),
                (long long)j["tokens"].get<int64_t>(), o.lengths_arg.c_str(), (long long)j["seq_len"].get<int64_t>(),
                j["packed_tokens"].get<bool>() ? "packed" : "padded path", gflops, j["gmacs_per_sequence"].get<double>());
  else if (j.contains("seq_len"))
    std::printf("throughput  %.2f sequences/s of %lld tokens, %.0f tokens/s  %.1f GFLOP/s (%.3f GMACs/sequence)\n",
                j["sequences_per_s"].get<double>(), (long long)j["seq_len"].get<int64_t>(),
                j["tokens_per_s"].get<double>(), gflops, j["gmacs_per_sequence"].get<double>());
  else
    std::printf("throughput  %.2f images/s  %.1f GFLOP/s (%.3f GMACs/image)\n", j["images_per_s"].get<double>(), gflops,
                j["gmacs_per_image"].get<double>());
  if (ceiling > 0)
    std::printf("GEMM        ceiling %.1f GFLOP/s (%lld^3 %s matmul): model at %.1f%% of it\n", ceiling,
                (long long)o.gemm_size, o.dtype.c_str(), 100.0 * gflops / ceiling);
  if (j["gemm_time_ms"].get<double>() > 0)
    std::printf("GEMMs       the model's %lld GEMMs alone (oneDNN, same shapes, dtypes and packed weights): %.2f ms; "
                "model / GEMMs = %.3f\n", (long long)j["gemm_calls"].get<int64_t>(), j["gemm_time_ms"].get<double>(),
                j["overhead_vs_gemm"].get<double>());
  std::printf("memory      peak RSS after load %.1f MB, steady state peak %.1f MB (RSS now %.1f MB)\n",
              j["peak_rss_load_mb"].get<double>(), j["peak_rss_steady_mb"].get<double>(), j["rss_steady_mb"].get<double>());
  std::printf("tensors     model %.1f MB, a forward pass's tensors at most %.1f MB more\n",
              j["tensor_bytes_model_mb"].get<double>(), j["tensor_bytes_pass_peak_mb"].get<double>());
}

// What a timed pass runs: the forward on its input, the items (images or sequences) it covers and the
// multiply-accumulates per item.
struct BenchWork {
  std::function<void()> forward;
  int64_t items = 0, macs = 0;   // per pass: images or sequences, and all their multiply-accumulates
  int64_t tokens = 0;            // BERT: the valid tokens per pass
  bool text = false;
};

BenchWork bench_work(const BenchOpts& o, const std::shared_ptr<models::Model>& model) {
  BenchWork w;
  Generator g(0);
  if (auto bert = std::dynamic_pointer_cast<models::BertPreTrainedModel>(model)) {
    const int64_t max_t = bert->cfg().max_position_embeddings;
    std::vector<int64_t> lengths = o.lengths;
    if (lengths.empty()) lengths.assign(size_t(o.batch), o.seq_len);
    const int64_t B = int64_t(lengths.size()), longest = *std::max_element(lengths.begin(), lengths.end());
    const int64_t T = o.lengths.empty() || o.seq_len_given ? o.seq_len : longest;
    ATTN_CHECK(T >= 1 && T <= max_t, "bench: expected --seq-len in [1, ", max_t, "], got ", T);
    ATTN_CHECK(longest <= T, "bench: --lengths up to ", longest, " do not fit in --seq-len ", T);
    const Tensor u = rand({B, T}, g) * double(bert->cfg().vocab_size);
    std::vector<int64_t> ids, mask(size_t(B * T), 0);
    for (float v : u.to_vector<float>()) ids.push_back(std::min<int64_t>(int64_t(v), bert->cfg().vocab_size - 1));
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t = 0; t < lengths[size_t(b)]; ++t) mask[size_t(b * T + t)] = 1;
      w.macs += bert->macs_per_sequence(lengths[size_t(b)]);
      w.tokens += lengths[size_t(b)];
    }
    models::BertInputs in;
    in.input_ids = Tensor::from_vector(ids, {B, T});
    if (!o.lengths.empty()) in.attention_mask = Tensor::from_vector(mask, {B, T});
    const models::BertOutputOptions oo{.pack_tokens = !o.padded};
    w.forward = [bert, in, oo] { (void)bert->forward(in, oo); };
    w.items = B;
    w.text = true;
    return w;
  }
  auto image = std::dynamic_pointer_cast<models::ImageClassifier>(model);
  const nlohmann::json cfg = model->config();
  ATTN_CHECK(image && cfg.contains("image_size") && cfg.contains("in_channels"), "bench: model '", o.model,
             "' is neither an image classifier (with image_size / in_channels) nor a BERT");
  ATTN_CHECK(o.lengths.empty() && !o.padded, "bench: --lengths and --padded are for BERT, not ", o.model);
  const int64_t s = cfg["image_size"].get<int64_t>(), ch = cfg["in_channels"].get<int64_t>();
  const Tensor x = randn({o.batch, ch, s, s}, g);
  w.forward = [image, x] { (void)image->forward(x); };
  w.items = o.batch;
  w.macs = image->macs_per_image() * o.batch;
  return w;
}

// The per-op profile of `iters` more passes (attn/core/profile.h): per op its calls and exclusive
// milliseconds per pass and its share of the pass; "(outside any op)" is the rest of the pass.
nlohmann::json profile_passes(const BenchWork& work, int64_t iters) {
  NoGradGuard ng;
  profile::start();
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < iters; ++i) work.forward();
  const double total = seconds_since(t0);
  const std::vector<profile::OpTime> ops = profile::stop();
  nlohmann::json rows = nlohmann::json::array();
  double in_ops = 0;
  for (const auto& op : ops) {
    rows.push_back({{"op", op.name}, {"calls", double(op.calls) / double(iters)},
                    {"ms", op.seconds * 1e3 / double(iters)}, {"share", op.seconds / total}});
    in_ops += op.seconds;
  }
  rows.push_back({{"op", "(outside any op)"}, {"calls", 0}, {"ms", (total - in_ops) * 1e3 / double(iters)},
                  {"share", (total - in_ops) / total}});
  return {{"pass_ms", total * 1e3 / double(iters)}, {"ops", rows}};
}

void print_profile(const nlohmann::json& p) {
  std::printf("profile     %.2f ms a pass (exclusive times: a GEMM inside linear counts as the GEMM's)\n",
              p["pass_ms"].get<double>());
  for (const auto& r : p["ops"])
    std::printf("  %-20s %7.1f calls %9.3f ms %6.1f%%\n", r["op"].get<std::string>().c_str(), r["calls"].get<double>(),
                r["ms"].get<double>(), 100.0 * r["share"].get<double>());
}

// What a run measured besides the pass times.
struct BenchRecord {
  std::string weights_desc;
  int64_t packed = 0;
  double load_s = 0, ceiling = 0;
  int64_t params_bytes = 0, hwm_load = 0, hwm_steady = 0, rss_steady = 0, live_before = 0, act_peak = 0;
  double gemm_s = 0;        // the model's GEMMs alone (0: not measured)
  int64_t gemm_calls = 0;
};

// The run's JSON record; `times` sorted.
nlohmann::json bench_json(const BenchOpts& o, const BenchWork& work, const std::vector<double>& times,
                          const BenchRecord& r) {
  const double median = percentile(times, 0.5), p90 = percentile(times, 0.9);
  const double gflops = 2.0 * double(work.macs) / median / 1e9;
  const std::string gemm_path = o.dtype == "bf16"   ? bf16_gemm_name(bf16_gemm_mode())
                                : o.dtype == "int8" ? int8_gemm_name()
                                                    : "f32";
  nlohmann::json j = {{"model", o.model},
                      {"weights", r.weights_desc},
                      {"dtype", o.dtype},
                      {"gemm_path", gemm_path},
                      {"packed_linear_weights", r.packed},
                      {"batch", o.batch},
                      {"threads", get_num_threads()},
                      {"iters", o.iters},
                      {"warmup", o.warmup},
                      {"load_s", r.load_s},
                      {"latency_ms", {{"median", median * 1e3}, {"p90", p90 * 1e3},
                                      {"min", times.front() * 1e3}, {"max", times.back() * 1e3}}},
                      {work.text ? "sequences_per_s" : "images_per_s", double(work.items) / median},
                      {work.text ? "gmacs_per_sequence" : "gmacs_per_image", double(work.macs) / double(work.items) / 1e9},
                      {"gflops", gflops},
                      {"gemm_ceiling_gflops", r.ceiling},
                      {"gemm_fraction", r.ceiling > 0 ? gflops / r.ceiling : 0.0},
                      {"gemm_time_ms", r.gemm_s * 1e3},
                      {"gemm_calls", r.gemm_calls},
                      {"overhead_vs_gemm", r.gemm_s > 0 ? median / r.gemm_s : 0.0},
                      {"weights_mb", double(r.params_bytes) / 1e6},
                      {"peak_rss_load_mb", double(r.hwm_load) / 1e6},
                      {"peak_rss_steady_mb", double(r.hwm_steady) / 1e6},
                      {"rss_steady_mb", double(r.rss_steady) / 1e6},
                      {"tensor_bytes_model_mb", double(r.live_before) / 1e6},
                      {"tensor_bytes_pass_peak_mb", double(r.act_peak) / 1e6}};
  if (work.text) {
    j["seq_len"] = o.lengths.empty() || o.seq_len_given ? o.seq_len : *std::max_element(o.lengths.begin(), o.lengths.end());
    j["tokens"] = work.tokens;
    j["tokens_per_s"] = double(work.tokens) / median;
    if (!o.lengths.empty()) {
      j["lengths"] = o.lengths;
      j["packed_tokens"] = !o.padded;
    }
  }
  return j;
}

}  // namespace

void add_bench(CLI::App& app) {
  auto* c = app.add_subcommand("bench", "inference latency, throughput, GEMM-ceiling fraction and memory of a model");
  auto o = std::make_shared<BenchOpts>();
  c->add_option("--model", o->model, "registry name (see `attn info --list`)")->required();
  c->add_option("--weights", o->weights, "attn checkpoint or foreign ViT/DeiT weights (default: random weights)");
  c->add_option("--format", o->format, "auto | timm | hf | torchvision (layout of foreign --weights)")
      ->capture_default_str();
  c->add_option("--batch", o->batch, "images (or sequences) per forward pass")->capture_default_str();
  auto* batch_opt = c->get_option("--batch");
  auto* seq_len_opt =
      c->add_option("--seq-len", o->seq_len, "BERT: tokens per sequence (random ids, no padding; with --lengths: "
                    "the padded width, default the longest)")->capture_default_str();
  c->add_option("--lengths", o->lengths_arg, "BERT: one batch of sequences of these lengths, e.g. 16,32,64 "
                "(padded to the longest, with an attention mask; run packed)");
  c->add_flag("--padded", o->padded, "BERT: run a padded batch on the padded path (every position), not packed");
  c->add_option("--model-config", o->model_config,
                "JSON object of config overrides for --model (e.g. {\"architecture\": \"BertModel\"})");
  c->add_option("--iters", o->iters, "timed forward passes")->capture_default_str();
  c->add_option("--warmup", o->warmup, "untimed forward passes first")->capture_default_str();
  c->add_option("--dtype", o->dtype, "f32 | bf16 (Linear weights in bf16, f32 accumulation) | int8 (Linear weights "
                "int8 per channel, activations int8 per token, int32 sums; see docs/design.md)")->capture_default_str();
  c->add_option("--gemm-seconds", o->gemm_seconds, "how long to time the GEMM ceiling")->capture_default_str();
  c->add_option("--gemm-size", o->gemm_size, "the ceiling's square matmul size")->capture_default_str();
  c->add_flag("--json", o->json, "print one JSON object");
  c->add_flag("--no-pack", o->no_pack, "keep the Linear weights in their plain layout (no nn::pack_linear_weights)");
  c->add_option("--threads", o->threads, "threads (default: ATTN_NUM_THREADS or all cores)");
  c->add_flag("--profile", o->profile, "also time each op over --iters more passes (exclusive times per pass)");
  c->callback([o, batch_opt, seq_len_opt] {
    apply_threads(o->threads);
    ATTN_CHECK(o->batch >= 1, "bench: expected --batch >= 1, got ", o->batch);
    ATTN_CHECK(o->iters >= 1, "bench: expected --iters >= 1, got ", o->iters);
    ATTN_CHECK(o->warmup >= 0, "bench: expected --warmup >= 0, got ", o->warmup);
    ATTN_CHECK(o->gemm_size >= 16, "bench: expected --gemm-size >= 16, got ", o->gemm_size);
    ATTN_CHECK(o->gemm_seconds >= 0, "bench: expected --gemm-seconds >= 0, got ", o->gemm_seconds);
    ATTN_CHECK(o->dtype == "f32" || o->dtype == "bf16" || o->dtype == "int8", "bench: expected --dtype f32, bf16 or "
               "int8, got '", o->dtype, "'");
    o->batch_given = batch_opt->count() > 0;
    o->seq_len_given = seq_len_opt->count() > 0;
    if (!o->lengths_arg.empty()) {
      o->lengths = parse_lengths(o->lengths_arg);
      ATTN_CHECK(!o->batch_given || o->batch == int64_t(o->lengths.size()), "bench: --batch ", o->batch,
                 " disagrees with the ", o->lengths.size(), " --lengths (leave --batch out)");
      o->batch = int64_t(o->lengths.size());
    }

    const auto t_load = Clock::now();
    std::string weights_desc;
    int64_t packed = 0;
    std::shared_ptr<models::Model> model = load_bench_model(*o, weights_desc, packed);
    // Hand freed memory back: the f32 weights a bf16 model replaced, and the temporaries of random
    // initialisation (freed blocks are cached for reuse, and the heap keeps large frees otherwise).
    release_cached_memory();
    const double load_s = seconds_since(t_load);
    const int64_t hwm_load = proc_status_bytes("VmHWM");
    // Restart the high-water mark (Linux: writing 5 to clear_refs resets VmHWM), so that the steady
    // state's peak is its own and not the load's.
    { std::ofstream("/proc/self/clear_refs") << "5"; }

    const BenchWork work = bench_work(*o, model);
    std::vector<double> times;
    const int64_t live_before = memory_stats().live_bytes;
    reset_peak_memory();
    {
      NoGradGuard ng;
      for (int64_t i = 0; i < o->warmup; ++i) work.forward();
      for (int64_t i = 0; i < o->iters; ++i) {
        const auto t = Clock::now();
        work.forward();
        times.push_back(seconds_since(t));
      }
    }
    const int64_t hwm_steady = proc_status_bytes("VmHWM"), rss_steady = proc_status_bytes("VmRSS");
    // The model's own GEMMs (one forward pass's, recorded), timed alone: its overhead over them.
    double gemm_s = 0;
    int64_t gemm_calls = 0;
    if (o->gemm_seconds > 0) {
      std::vector<GemmCall> calls;
      {
        NoGradGuard ng;
        GemmRecorder rec;
        work.forward();
        calls = rec.calls();
      }
      gemm_calls = int64_t(calls.size());
      gemm_s = time_gemm_calls(calls, o->gemm_seconds);
    }
    const int64_t act_peak = memory_stats().peak_bytes - live_before;   // tensors a pass allocates
    std::sort(times.begin(), times.end());
    const double ceiling = o->gemm_seconds > 0 ? gemm_ceiling_gflops(o->gemm_size, o->gemm_seconds, o->dtype) : 0.0;
    int64_t params_bytes = 0;
    for (const Tensor& p : model->parameters()) params_bytes += p.numel() * int64_t(dtype_size(p.dtype()));
    for (const auto& [name, b] : model->named_buffers())   // an int8 weight's scales belong to it
      if (name.ends_with("weight_scale")) params_bytes += b.numel() * int64_t(dtype_size(b.dtype()));
    BenchRecord rec{weights_desc, packed, load_s, ceiling, params_bytes, hwm_load, hwm_steady, rss_steady, live_before,
                    act_peak, gemm_s, gemm_calls};
    nlohmann::json j = bench_json(*o, work, times, rec);
    if (o->profile) j["profile"] = profile_passes(work, o->iters);
    if (o->json) std::printf("%s\n", j.dump().c_str());
    else print_bench_text(*o, j);
    if (o->profile && !o->json) print_profile(j["profile"]);
    std::fflush(stdout);
  });
}

}  // namespace attn::cli

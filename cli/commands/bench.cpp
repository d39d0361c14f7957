// attn bench --model NAME [--weights W] [--batch B] [--seq-len T] [--threads T] [--iters N] [--warmup W]
// [--json]: inference latency of an image classifier, or of a BERT on random token ids (B sequences of
// T tokens, no padding), in eval mode without gradients.
//
//   attn bench --model vit_base_patch16_224 --batch 1 --threads 2
//   attn bench --model bert-base-uncased --batch 1 --seq-len 128 --model-config '{"architecture": "BertModel"}'
//
// Prints the latency median and p90 over N timed forward passes (after W warm-up passes), images/s,
// GFLOP/s (2 x the model's macs_per_image x batch / median), the fraction of the GEMM ceiling measured
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
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "attn/attn.h"
#include "attn/core/parallel.h"
#include "attn/models/pretrained.h"
#include "attn/nn/linear.h"
#include "attn/ops/matmul.h"
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
// `budget_s` (at least 2): f32, or for bf16 the same linear() a bf16 model's layers run (f32
// activations rounded to bf16, bf16 weights, f32 result).
double gemm_ceiling_gflops(int64_t n, double budget_s, bool bf16) {
  Generator g(1);
  const Tensor a = randn({n, n}, g);
  const Tensor b = bf16 ? randn({n, n}, g).to(DType::bf16) : randn({n, n}, g);
  NoGradGuard ng;
  auto run = [&] { return bf16 ? linear(a, b) : matmul(a, b); };
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
  std::string model, weights, format = "auto", dtype = "f32", model_config;
  int64_t batch = 1, seq_len = 128, iters = 20, warmup = 3, gemm_size = 2048;
  double gemm_seconds = 1.0;
  bool json = false, no_pack = false;
  int threads = 0;
};

// The model the options name: random weights, or an attn checkpoint / foreign weights of --model
// streamed in (converted tensor by tensor); eval mode; bf16 Linear weights when asked; packed unless
// --no-pack. `weights_desc` and `packed` say which.
std::shared_ptr<models::Model> load_bench_model(const BenchOpts& o, std::string& weights_desc, int64_t& packed) {
  std::shared_ptr<models::Model> model;
  weights_desc = "random";
  const bool text = models::model_entry(o.model).task == models::kMaskedLM;
  ATTN_CHECK(!text || o.dtype == "f32", "bench: --dtype bf16 is for image classifiers, not ", o.model);
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
  if (o.dtype == "bf16")
    nn::convert_linear_weights_to_bf16(*model);   // random weights; a no-op for loaded ones (bf16 already)
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
              o.dtype == "bf16" ? ("bf16, GEMM " + j["gemm_path"].get<std::string>()).c_str() : "f32",
              j["weights"].get<std::string>().c_str(), j["weights_mb"].get<double>(),
              (long long)j["packed_linear_weights"].get<int64_t>(), j["load_s"].get<double>());
  std::printf("latency     median %.2f ms  p90 %.2f ms  (min %.2f, max %.2f; %lld timed after %lld warm-up)\n",
              lat["median"].get<double>(), lat["p90"].get<double>(), lat["min"].get<double>(), lat["max"].get<double>(),
              (long long)o.iters, (long long)o.warmup);
  if (j.contains("seq_len"))
    std::printf("throughput  %.2f sequences/s of %lld tokens  %.1f GFLOP/s (%.3f GMACs/sequence)\n",
                j["sequences_per_s"].get<double>(), (long long)j["seq_len"].get<int64_t>(), gflops,
                j["gmacs_per_sequence"].get<double>());
  else
    std::printf("throughput  %.2f images/s  %.1f GFLOP/s (%.3f GMACs/image)\n", j["images_per_s"].get<double>(), gflops,
                j["gmacs_per_image"].get<double>());
  if (ceiling > 0)
    std::printf("GEMM        ceiling %.1f GFLOP/s (%lld^3 %s matmul): model at %.1f%% of it\n", ceiling,
                (long long)o.gemm_size, o.dtype.c_str(), 100.0 * gflops / ceiling);
  std::printf("memory      peak RSS after load %.1f MB, steady state peak %.1f MB (RSS now %.1f MB)\n",
              j["peak_rss_load_mb"].get<double>(), j["peak_rss_steady_mb"].get<double>(), j["rss_steady_mb"].get<double>());
  std::printf("tensors     model %.1f MB, a forward pass's tensors at most %.1f MB more\n",
              j["tensor_bytes_model_mb"].get<double>(), j["tensor_bytes_pass_peak_mb"].get<double>());
}

// What a timed pass runs: the forward on its input, the items (images or sequences) it covers and the
// multiply-accumulates per item.
struct BenchWork {
  std::function<void()> forward;
  int64_t macs_per_item = 0;
  bool text = false;
};

BenchWork bench_work(const BenchOpts& o, const std::shared_ptr<models::Model>& model) {
  BenchWork w;
  Generator g(0);
  if (auto bert = std::dynamic_pointer_cast<models::BertPreTrainedModel>(model)) {
    ATTN_CHECK(o.seq_len >= 1 && o.seq_len <= bert->cfg().max_position_embeddings, "bench: expected --seq-len in [1, ",
               bert->cfg().max_position_embeddings, "], got ", o.seq_len);
    const Tensor u = rand({o.batch, o.seq_len}, g) * double(bert->cfg().vocab_size);
    std::vector<int64_t> ids;
    for (float v : u.to_vector<float>()) ids.push_back(std::min<int64_t>(int64_t(v), bert->cfg().vocab_size - 1));
    const Tensor x = Tensor::from_vector(ids, {o.batch, o.seq_len});
    models::BertInputs in;
    in.input_ids = x;
    w.forward = [bert, in] { (void)bert->forward(in); };
    w.macs_per_item = bert->macs_per_sequence(o.seq_len);
    w.text = true;
    return w;
  }
  auto image = std::dynamic_pointer_cast<models::ImageClassifier>(model);
  const nlohmann::json cfg = model->config();
  ATTN_CHECK(image && cfg.contains("image_size") && cfg.contains("in_channels"), "bench: model '", o.model,
             "' is neither an image classifier (with image_size / in_channels) nor a BERT");
  const int64_t s = cfg["image_size"].get<int64_t>(), ch = cfg["in_channels"].get<int64_t>();
  const Tensor x = randn({o.batch, ch, s, s}, g);
  w.forward = [image, x] { (void)image->forward(x); };
  w.macs_per_item = image->macs_per_image();
  return w;
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
  c->add_option("--seq-len", o->seq_len, "BERT: tokens per sequence (random ids, no padding)")->capture_default_str();
  c->add_option("--model-config", o->model_config,
                "JSON object of config overrides for --model (e.g. {\"architecture\": \"BertModel\"})");
  c->add_option("--iters", o->iters, "timed forward passes")->capture_default_str();
  c->add_option("--warmup", o->warmup, "untimed forward passes first")->capture_default_str();
  c->add_option("--dtype", o->dtype, "f32 | bf16 (Linear weights in bf16, f32 accumulation; see docs/design.md)")->capture_default_str();
  c->add_option("--gemm-seconds", o->gemm_seconds, "how long to time the GEMM ceiling")->capture_default_str();
  c->add_option("--gemm-size", o->gemm_size, "the ceiling's square matmul size")->capture_default_str();
  c->add_flag("--json", o->json, "print one JSON object");
  c->add_flag("--no-pack", o->no_pack, "keep the Linear weights in their plain layout (no nn::pack_linear_weights)");
  c->add_option("--threads", o->threads, "threads (default: ATTN_NUM_THREADS or all cores)");
  c->callback([o] {
    apply_threads(o->threads);
    ATTN_CHECK(o->batch >= 1, "bench: expected --batch >= 1, got ", o->batch);
    ATTN_CHECK(o->iters >= 1, "bench: expected --iters >= 1, got ", o->iters);
    ATTN_CHECK(o->warmup >= 0, "bench: expected --warmup >= 0, got ", o->warmup);
    ATTN_CHECK(o->gemm_size >= 16, "bench: expected --gemm-size >= 16, got ", o->gemm_size);
    ATTN_CHECK(o->gemm_seconds >= 0, "bench: expected --gemm-seconds >= 0, got ", o->gemm_seconds);
    ATTN_CHECK(o->dtype == "f32" || o->dtype == "bf16", "bench: expected --dtype f32 or bf16, got '", o->dtype, "'");

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
    const int64_t act_peak = memory_stats().peak_bytes - live_before;   // tensors a pass allocates
    std::sort(times.begin(), times.end());
    const double median = percentile(times, 0.5), p90 = percentile(times, 0.9);
    const int64_t macs = work.macs_per_item;
    const double gflops = 2.0 * double(macs) * double(o->batch) / median / 1e9;
    const double ceiling = o->gemm_seconds > 0 ? gemm_ceiling_gflops(o->gemm_size, o->gemm_seconds, o->dtype == "bf16") : 0.0;
    const double images_s = double(o->batch) / median;
    int64_t params_bytes = 0;
    for (const Tensor& p : model->parameters()) params_bytes += p.numel() * int64_t(dtype_size(p.dtype()));
    const std::string gemm_path = o->dtype == "bf16" ? bf16_gemm_name(bf16_gemm_mode()) : "f32";

    nlohmann::json j = {{"model", o->model},
                        {"weights", weights_desc},
                        {"dtype", o->dtype},
                        {"gemm_path", gemm_path},
                        {"packed_linear_weights", packed},
                        {"batch", o->batch},
                        {"threads", get_num_threads()},
                        {"iters", o->iters},
                        {"warmup", o->warmup},
                        {"load_s", load_s},
                        {"latency_ms", {{"median", median * 1e3}, {"p90", p90 * 1e3},
                                        {"min", times.front() * 1e3}, {"max", times.back() * 1e3}}},
                        {work.text ? "sequences_per_s" : "images_per_s", images_s},
                        {work.text ? "gmacs_per_sequence" : "gmacs_per_image", double(macs) / 1e9},
                        {"gflops", gflops},
                        {"gemm_ceiling_gflops", ceiling},
                        {"gemm_fraction", ceiling > 0 ? gflops / ceiling : 0.0},
                        {"weights_mb", double(params_bytes) / 1e6},
                        {"peak_rss_load_mb", double(hwm_load) / 1e6},
                        {"peak_rss_steady_mb", double(hwm_steady) / 1e6},
                        {"rss_steady_mb", double(rss_steady) / 1e6},
                        {"tensor_bytes_model_mb", double(live_before) / 1e6},
                        {"tensor_bytes_pass_peak_mb", double(act_peak) / 1e6}};
    if (work.text) j["seq_len"] = o->seq_len;
    if (o->json) std::printf("%s\n", j.dump().c_str());
    else print_bench_text(*o, j);
    std::fflush(stdout);
  });
}

}  // namespace attn::cli

// Batched greedy decoding throughput (generated tokens per second) of a post-norm Transformer
// (3 + 3 layers, d_model 256, 8 heads, d_ff 1024, vocab 8000, f32, eval): attn's KV-cached
// TransformerSeq2Seq::start/step against the uncached reference (forward() on the whole prefix each
// step), and PyTorch 1.13 (bench/peers/transformer_decode.py, same run and threads): a functional
// KV-cached decoder and nn.Transformer re-run on the prefix. Every run decodes a fixed number of
// steps (argmax fed back, eos ignored) so both sides do the same work.
//
//   build/bench/transformer_decode_bench [--threads 2] [--reps 3] [--batch 32] [--steps 32] [--no-torch]
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "attn/attn.h"
#include "attn/models/transformer.h"
#include "attn/ops/reduce.h"
#include "bench_util.h"

#ifndef ATTN_SOURCE_DIR
#define ATTN_SOURCE_DIR "."
#endif

using namespace attn;

namespace {

double median_s(const std::function<void()>& fn, int reps) { return bench::time_ms(fn, reps, 1) / 1000.0; }

nlohmann::json run_peer(const std::string& args, bool passive) {
  const std::string peer = std::string(ATTN_SOURCE_DIR) + "/bench/peers/transformer_decode.py";
  const std::string env = passive ? "OMP_WAIT_POLICY=PASSIVE " : "";
  const std::string out = bench::last_line(bench::run_capture(env + "/usr/bin/python3 " + peer + " " + args));
  try { return nlohmann::json::parse(out); } catch (...) { return nlohmann::json(); }
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 3;
  int64_t B = 32, S = 32, steps = 32, uncached_steps = 32, V = 8000;
  bool torch = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--batch") && i + 1 < argc) B = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) steps = uncached_steps = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-torch")) torch = false;
  }
  set_num_threads(threads);
  auto m = models::make_transformer_seq2seq({{"vocab_size", V}, {"d_model", 256}, {"nhead", 8}, {"layers", 3},
                                             {"d_ff", 1024}, {"dropout", 0.0}, {"max_length", 512}});
  m->eval();
  Generator g(1);
  const Tensor src = (rand({B, S}, g) * double(V - 4) + 4.0).to(DType::i64);
  std::printf("transformer decode: 3+3 layers, d 256, 8 heads, d_ff 1024, V %ld, B %ld, S %ld, %ld steps, "
              "%d threads, isa %s\n", long(V), long(B), long(S), long(steps), threads, isa_name(active_isa()));

  NoGradGuard ng;
  auto cached = [&] {
    auto st = m->start(src, Tensor());
    Tensor tok = Tensor::full({B}, double(models::bos_id), DType::i64);
    for (int64_t t = 0; t < steps; ++t) tok = argmax(m->step(*st, tok), -1);
  };
  auto uncached = [&] {
    Tensor prefix = Tensor::full({B, 1}, double(models::bos_id), DType::i64);
    for (int64_t t = 0; t < uncached_steps; ++t) {
      const Tensor logits = m->forward(src, Tensor(), prefix);
      prefix = concat({prefix, argmax(logits.select(1, t), -1).unsqueeze(1)}, 1);
    }
  };
  const double c = double(B * steps) / median_s(cached, reps);
  const double u = double(B * uncached_steps) / median_s(uncached, std::max(1, reps / 2));

  double tc = NAN, tu = NAN;
  if (torch) {
    const std::string args = "--threads " + std::to_string(threads) + " --reps " + std::to_string(reps) +
                             " --batch " + std::to_string(B) + " --src-len " + std::to_string(S) + " --steps " +
                             std::to_string(steps) + " --uncached-steps " + std::to_string(uncached_steps) +
                             " --vocab " + std::to_string(V);
    for (bool passive : {true, false}) {
      const nlohmann::json j = run_peer(args, passive);
      if (j.is_null()) continue;
      const double jc = j.at("cached_tok_s").get<double>(), ju = j.at("uncached_tok_s").get<double>();
      if (std::isnan(tc) || jc > tc) tc = jc;
      if (std::isnan(tu) || ju > tu) tu = ju;
    }
  }
  std::printf("  %-10s %12s %12s %10s\n", "", "attn tok/s", "torch tok/s", "attn/torch");
  std::printf("  %-10s %12.1f %12.1f %9.2fx\n", "cached", c, tc, c / tc);
  std::printf("  %-10s %12.1f %12.1f %9.2fx\n", "uncached", u, tu, u / tu);
  std::printf("  cached / uncached: attn %.2fx, torch %.2fx\n", c / u, tc / tu);
  const nlohmann::json out = {{"bench", "transformer_decode"}, {"threads", threads}, {"batch", B},
                              {"steps", steps}, {"attn_cached_tok_s", c}, {"attn_uncached_tok_s", u},
                              {"torch_cached_tok_s", tc}, {"torch_uncached_tok_s", tu}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

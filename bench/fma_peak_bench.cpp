// The machine's fp32 FMA ceiling: independent 8-wide (AVX2) or 16-wide (AVX-512) FMA chains per
// thread, no memory traffic, at 1 thread and at --threads (default 2). This is the roof every GEMM-bound
// speed target is measured against in docs/results.md: a model whose FLOPs at the target speed need
// more GFLOP/s than this cannot meet that target on this CPU, however good the kernels.
//
//   build/bench/fma_peak_bench [--threads 2] [--reps 5]
//
// Prints GFLOP/s (2 FLOPs per lane per FMA) for each thread count and one JSON line.
#include <immintrin.h>
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "attn/core/isa.h"

namespace {

constexpr long kIters = 40'000'000;
constexpr int kChains = 12;   // enough independent chains to cover FMA latency x throughput

__attribute__((target("avx2,fma"))) float chains_avx2(long iters) {
  __m256 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm256_set1_ps(0.001f * float(i));
  const __m256 b = _mm256_set1_ps(0.9999f), c = _mm256_set1_ps(0.0001f);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) a[i] = _mm256_fmadd_ps(a[i], b, c);
  }
  __m256 s = a[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_ps(s, a[i]);
  float f[8];
  _mm256_storeu_ps(f, s);
  return f[0];
}

__attribute__((target("avx512f"))) float chains_avx512(long iters) {
  __m512 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm512_set1_ps(0.001f * float(i));
  const __m512 b = _mm512_set1_ps(0.9999f), c = _mm512_set1_ps(0.0001f);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) a[i] = _mm512_fmadd_ps(a[i], b, c);
  }
  __m512 s = a[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, a[i]);
  return _mm512_reduce_add_ps(s);
}

double peak(int threads, int reps, bool avx512) {
  const int lanes = avx512 ? 16 : 8;
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    float sink = 0;
    const double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += avx512 ? chains_avx512(kIters) : chains_avx2(kIters);
    const double s = omp_get_wtime() - t0;
    const double gf = double(kIters) * kChains * lanes * 2.0 * threads / s / 1e9;
    if (gf > best) best = gf;
    if (sink == 1234.5f) std::puts("");   // keep the result alive
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "fma_peak_bench: unknown argument '%s' (expected --threads N, --reps N)\n", a.c_str());
      return 2;
    }
  }
  const attn::Isa isa = attn::detected_isa();
  if (isa == attn::Isa::scalar) {
    std::fprintf(stderr, "fma_peak_bench: this CPU has neither AVX2+FMA nor AVX-512\n");
    return 2;
  }
  const bool avx512 = isa == attn::Isa::avx512;
  const double one = peak(1, reps, avx512), many = peak(threads, reps, avx512);
  std::printf("fp32 FMA peak (%s, best of %d): 1 thread %.1f GFLOP/s, %d threads %.1f GFLOP/s\n",
              avx512 ? "AVX-512" : "AVX2", reps, one, threads, many);
  std::printf("{\"bench\":\"fma_peak\",\"isa\":\"%s\",\"gflops_1\":%.2f,\"threads\":%d,\"gflops_n\":%.2f}\n",
              avx512 ? "avx512" : "avx2", one, threads, many);
}

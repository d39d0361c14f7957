// attn's bucketed gradient all-reduce (dist::GradReducer) against a bare MPI_Allreduce of the same
// bytes over the same transport. Run it under mpirun:
//
//   mpirun -np 2 --allow-run-as-root --bind-to none build/test/bench/allreduce_bench [--model NAME]
//          [--reps R] [--json FILE]
//
// The gradients are those of a registry model (default vit_base_patch16_224: 86,567,656 floats), made
// by a backward pass (so they sit in the reducer's bucket slots, as in training); then, R times:
// the bare call (one MPI_Allreduce in place over a buffer of the same size) and attn's (arm + finish:
// every bucket's non-blocking all-reduce, then the waits). Medians; target: attn >= 90% of the bare
// call's speed. Rank 0 prints a line per case and, with --json, appends one JSON line.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/attn.h"

using namespace attn;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "vit_base_patch16_224", json_path;
  int reps = 7;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--model" && i + 1 < argc) model = argv[++i];
    else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else {
      std::fprintf(stderr, "allreduce_bench: unknown argument '%s' (expected --model NAME, --reps R, --json FILE)\n", a.c_str());
      return 2;
    }
  }
  try {
    dist::Communicator& w = dist::world();   // initialises MPI under mpirun
    if (w.size() < 2) {
      std::fprintf(stderr, "allreduce_bench: run it under mpirun with 2 or more ranks\n");
      return 2;
    }
    set_num_threads(1);
    manual_seed(0);
    auto m = models::create(model, nlohmann::json::object());
    std::vector<Tensor> params;
    for (const Tensor& p : m->parameters())
      if (p.requires_grad()) params.push_back(p);
    dist::GradReducer reducer(w, params, {.rebuild = false});   // no backward here to order the buckets
    const int64_t n = reducer.numel();
    // Gradients in their slots: the backward of the sum of every parameter (all ones).
    {
      Tensor loss;
      for (const Tensor& p : params) loss = loss.defined() ? add(loss, sum(p)) : sum(p);
      loss.backward();
    }
    std::vector<float> bare(size_t(n), 1.0f);
    std::vector<double> t_bare, t_attn;
    for (int r = 0; r < reps; ++r) {
      w.barrier();
      double t0 = now();
      MPI_Allreduce(MPI_IN_PLACE, bare.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      t_bare.push_back(now() - t0);
      w.barrier();
      t0 = now();
      reducer.arm();
      reducer.finish();
      t_attn.push_back(now() - t0);
    }
    const double b = median(t_bare), a = median(t_attn);
    const double bytes = double(n) * 4.0, bus = 2.0 * double(w.size() - 1) / double(w.size()) * bytes;
    if (w.rank() == 0) {
      std::printf("all-reduce of %s's gradients: %lld floats (%.1f MB), %d ranks, %s\n", model.c_str(), (long long)n,
                  bytes / 1e6, w.size(), w.transport().c_str());
      std::printf("  bare MPI_Allreduce: %8.1f ms (%.2f GB/s bus bandwidth)\n", b * 1e3, bus / b / 1e9);
      std::printf("  attn GradReducer:   %8.1f ms (%.2f GB/s; %lld buckets)  = %.0f%% of the bare call's speed (target >= 90%%)\n",
                  a * 1e3, bus / a / 1e9, (long long)reducer.num_buckets(), 100.0 * b / a);
      if (!json_path.empty()) {
        const nlohmann::json j = {{"bench", "allreduce"}, {"model", model}, {"floats", n}, {"ranks", w.size()},
                                  {"transport", w.transport()}, {"buckets", reducer.num_buckets()}, {"reps", reps},
                                  {"bare_ms", b * 1e3}, {"attn_ms", a * 1e3}, {"speed_ratio", b / a},
                                  {"bus_gbps_bare", bus / b / 1e9}, {"bus_gbps_attn", bus / a / 1e9}};
        std::ofstream(json_path, std::ios::app) << j.dump() << "\n";
      }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "allreduce_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}

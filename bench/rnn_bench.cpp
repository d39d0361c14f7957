// GRU / LSTM layer forward + backward against torch.nn.GRU / LSTM at the same thread count:
// T=50, B=64, 256 -> 256, one layer, one direction (the issue's reference size). The peer script is
// inline (python3 -c) so that this benchmark is one file.
//
//   ./build/bench/rnn_bench [--threads N]
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "attn/attn.h"
#include "attn/nn/rnn.h"
#include "bench_util.h"

using namespace attn;

namespace {

const char* kPeer = R"PY(
import json, sys, time, torch
threads, T, B, I, H = (int(v) for v in sys.argv[1:6])
torch.set_num_threads(threads)
res = {}
for mode, cls in (("gru", torch.nn.GRU), ("lstm", torch.nn.LSTM)):
    m = cls(I, H)
    x = torch.randn(T, B, I, requires_grad=True)
    def run():
        out, _ = m(x)
        out.sum().backward()
    for _ in range(3): run()
    ts = []
    for _ in range(15):
        t0 = time.perf_counter(); run(); ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    with torch.no_grad():
        for _ in range(3): m(x)
        fs = []
        for _ in range(15):
            t0 = time.perf_counter(); m(x); fs.append((time.perf_counter() - t0) * 1e3)
    fs.sort()
    res[mode] = {"fwdbwd": ts[len(ts) // 2], "fwd": fs[len(fs) // 2]}
print(json.dumps(res))
)PY";

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--threads") threads = std::atoi(argv[i + 1]);
  set_num_threads(threads);
  const int64_t T = 50, B = 64, I = 256, H = 256;
  Generator g(0);
  const Tensor x0 = randn({T, B, I}, g);
  std::string cmd = "OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 -c '" + std::string(kPeer) + "' " +
                    std::to_string(threads) + " " + std::to_string(T) + " " + std::to_string(B) + " " +
                    std::to_string(I) + " " + std::to_string(H);
  const auto peer = nlohmann::json::parse(bench::last_line(bench::run_capture(cmd)));
  std::printf("RNN layer T=%lld B=%lld %lld->%lld, %d threads (ms, median; ratio = attn / torch)\n",
              (long long)T, (long long)B, (long long)I, (long long)H, threads);
  nlohmann::json summary = {{"bench", "rnn"}, {"threads", threads}};
  for (auto mode : {nn::RnnMode::gru, nn::RnnMode::lstm}) {
    nn::RnnOptions o{.input_size = I, .hidden_size = H};
    std::shared_ptr<nn::RnnBase> m;
    if (mode == nn::RnnMode::gru) m = std::make_shared<nn::GRU>(o, g); else m = std::make_shared<nn::LSTM>(o, g);
    Tensor x = x0.clone().requires_grad_();
    const double fb = bench::time_ms([&] { sum(m->run(x, Tensor(), Tensor(), Tensor()).output).backward(); }, 15, 3);
    const double f = bench::time_ms([&] { NoGradGuard ng; m->run(x, Tensor(), Tensor(), Tensor()); }, 15, 3);
    const char* name = mode == nn::RnnMode::gru ? "gru" : "lstm";
    const double pfb = peer[name]["fwdbwd"], pf = peer[name]["fwd"];
    std::printf("%-5s fwd+bwd  attn %8.2f  torch %8.2f  ratio %.2f\n", name, fb, pfb, fb / pfb);
    std::printf("%-5s fwd      attn %8.2f  torch %8.2f  ratio %.2f\n", name, f, pf, f / pf);
    summary[name] = {{"attn_fwdbwd_ms", fb}, {"torch_fwdbwd_ms", pfb}, {"attn_fwd_ms", f}, {"torch_fwd_ms", pf}};
  }
  // The summary line bench/run_all.sh collects (last line of the output).
  std::printf("%s\n", summary.dump().c_str());
  return 0;
}

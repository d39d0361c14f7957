"""PyTorch peer of bench/attention_bench.cpp: softmax(q kᵀ / sqrt(d)) v by hand (torch 1.13 has no
F.scaled_dot_product_attention), B=1, NH=12, HS=64, fp32.

  --mode time: forward (no_grad) at T = 197, 1024, 4096 and forward+backward at T = 1024; prints
               {"fwd": {"197": ms, ...}, "fwdbwd": {"1024": ms}} (median of repeats; one run when a
               single run takes longer than --budget seconds).
  --mode mem:  one forward at --T in a fresh process; prints {"peak_extra_bytes": ...}, the growth of
               the process's max RSS (getrusage) over the forward, inputs already allocated.
"""
import peer_env  # noqa: F401  (before torch: OpenBLAS's kernels for this CPU, see peer_env.py)
import argparse
import json
import math
import resource
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--threads", type=int, default=2)
p.add_argument("--reps", type=int, default=10)
p.add_argument("--mode", choices=["time", "mem"], default="time")
p.add_argument("--T", type=int, default=4096)
p.add_argument("--budget", type=float, default=3.0, help="seconds of repeats per measurement")
p.add_argument("--sizes", type=str, default="197,1024,4096")
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(0)
NH, HS = 12, 64


def attention(q, k, v):
    s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return torch.softmax(s, -1) @ v


def median_ms(fn):
    t0 = time.perf_counter()
    fn()   # warm-up, and the estimate of one run
    first = time.perf_counter() - t0
    if first > a.budget:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    reps = max(3, min(a.reps, int(a.budget / max(first, 1e-6))))
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    return ts[len(ts) // 2]


if a.mode == "mem":
    q, k, v = (torch.randn(1, NH, a.T, HS) for _ in range(3))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with torch.no_grad():
        out = attention(q, k, v)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"peak_extra_bytes": (after - before) * 1024, "T": a.T}))
else:
    res = {"fwd": {}, "fwdbwd": {}}
    for T in [int(t) for t in a.sizes.split(",")]:
        q, k, v = (torch.randn(1, NH, T, HS) for _ in range(3))
        with torch.no_grad():
            res["fwd"][str(T)] = median_ms(lambda: attention(q, k, v))
    T = 1024
    q, k, v = (torch.randn(1, NH, T, HS).requires_grad_() for _ in range(3))
    g = torch.randn(1, NH, T, HS)

    def step():
        for t in (q, k, v):
            t.grad = None
        attention(q, k, v).backward(g)

    res["fwdbwd"][str(T)] = median_ms(step)
    print(json.dumps(res))

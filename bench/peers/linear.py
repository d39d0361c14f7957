"""PyTorch peer of bench/linear_bench.cpp: F.linear at (M x K).(K x N)+bias, fp32 (default 197, 768, 3072)."""
import argparse
import json
import time

import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--threads", type=int, default=2)
p.add_argument("--reps", type=int, default=50)
p.add_argument("--shape", type=str, default="197,768,3072", help="M,K,N")
a = p.parse_args()
M, K, N = (int(v) for v in a.shape.split(","))
torch.set_num_threads(a.threads)
torch.manual_seed(0)
x, w, b = torch.randn(M, K), torch.randn(N, K), torch.randn(N)
ts = []
with torch.no_grad():
    for i in range(a.reps + 3):
        t0 = time.perf_counter()
        F.linear(x, w, b)
        t1 = time.perf_counter()
        if i >= 3:
            ts.append((t1 - t0) * 1e3)
ts.sort()
print(json.dumps({"ms": ts[len(ts) // 2]}))

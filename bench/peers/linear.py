"""PyTorch peer of bench/linear_bench.cpp: F.linear at (197x768).(768x3072)+bias, fp32."""
import argparse
import json
import time

import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--threads", type=int, default=2)
p.add_argument("--reps", type=int, default=50)
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(0)
x, w, b = torch.randn(197, 768), torch.randn(3072, 768), torch.randn(3072)
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

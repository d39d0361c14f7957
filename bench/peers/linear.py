"""PyTorch peer of bench/linear_bench.cpp: F.linear at (M x K).(K x N)+bias, fp32 (default 197, 768, 3072)."""
import peer_env  # noqa: F401  (before torch: OpenBLAS's kernels for this CPU, see peer_env.py)
import argparse
import json
import time

import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--threads", type=int, default=2)
p.add_argument("--reps", type=int, default=50)
p.add_argument("--shape", type=str, default="197,768,3072", help="M,K,N")
p.add_argument("--train", action="store_true", help="time x.W^T+b, dy.W and dy^T.x (linear_bench --train)")
a = p.parse_args()
M, K, N = (int(v) for v in a.shape.split(","))
torch.set_num_threads(a.threads)
torch.manual_seed(0)
x, w, b = torch.randn(M, K), torch.randn(N, K), torch.randn(N)


def median_ms(fn):
    ts = []
    with torch.no_grad():
        for i in range(a.reps + 3):
            t0 = time.perf_counter()
            fn()
            t1 = time.perf_counter()
            if i >= 3:
                ts.append((t1 - t0) * 1e3)
    ts.sort()
    return ts[len(ts) // 2]


if a.train:   # the three products of linear's forward and backward, as autograd runs them
    dy = torch.randn(M, N)
    print(json.dumps({"fwd_ms": median_ms(lambda: F.linear(x, w, b)), "dx_ms": median_ms(lambda: dy.mm(w)),
                      "dw_ms": median_ms(lambda: dy.t().mm(x))}))
else:
    print(json.dumps({"ms": median_ms(lambda: F.linear(x, w, b))}))

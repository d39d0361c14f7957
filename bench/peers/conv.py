"""PyTorch peer of bench/conv_bench.cpp: the same small ResNet training step and per-op timings."""
import peer_env  # noqa: F401  (before torch: OpenBLAS's kernels for this CPU, see peer_env.py)
import argparse
import json
import math
import time

import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--threads", type=int, default=2)
p.add_argument("--reps", type=int, default=10)
p.add_argument("--batch", type=int, default=128)
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(0)
N = a.batch


def median_ms(fn, reps, warmup=2):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    return ts[len(ts) // 2]


def block(cin, cout):
    return {"w": (torch.randn(cout, cin, 3, 3) * math.sqrt(2.0 / (cin * 9))).requires_grad_(),
            "g": torch.ones(cout, requires_grad=True), "b": torch.zeros(cout, requires_grad=True),
            "rm": torch.zeros(cout), "rv": torch.ones(cout)}


def apply(b, x):
    return F.relu(F.batch_norm(F.conv2d(x, b["w"], None, 1, 1), b["rm"], b["rv"], b["g"], b["b"], True))


blocks = [block(1, 32), block(32, 32), block(32, 32), block(32, 32)]
fc_w = (torch.randn(10, 32) * 0.1).requires_grad_()
fc_b = torch.zeros(10, requires_grad=True)
x, r = torch.randn(N, 1, 28, 28), torch.randn(N, 10)
params = [t for b in blocks for t in (b["w"], b["g"], b["b"])] + [fc_w, fc_b]


def step():
    for t in params:
        t.grad = None
    h = apply(blocks[0], x)
    h = apply(blocks[1], h)
    h = apply(blocks[2], h)
    h = F.max_pool2d(h, 2)
    h = apply(blocks[3], h)
    h = F.adaptive_avg_pool2d(h, 1).reshape(N, 32)
    loss = (F.linear(h, fc_w, fc_b) * r).sum() / N
    loss.backward()


res = {"step_ms": median_ms(step, a.reps)}
act = torch.randn(N, 32, 28, 28)
w = torch.randn(32, 32, 3, 3) * 0.06
rm, rv, gamma, beta = torch.zeros(32), torch.ones(32), torch.ones(32), torch.zeros(32)
with torch.no_grad():
    res["conv_f_ms"] = median_ms(lambda: F.conv2d(act, w, None, 1, 1), a.reps)
    res["bn_f_ms"] = median_ms(lambda: F.batch_norm(act, rm, rv, gamma, beta, True), a.reps)
    res["pool_f_ms"] = median_ms(lambda: F.max_pool2d(act, 2), a.reps)
ar, wr = act.clone().requires_grad_(), w.clone().requires_grad_()
gr, br = gamma.clone().requires_grad_(), beta.clone().requires_grad_()
ones, ones_p = torch.ones(N, 32, 28, 28), torch.ones(N, 32, 14, 14)
res["conv_fb_ms"] = median_ms(lambda: F.conv2d(ar, wr, None, 1, 1).backward(ones), a.reps)
res["bn_fb_ms"] = median_ms(lambda: F.batch_norm(ar, rm, rv, gr, br, True).backward(ones), a.reps)
res["pool_fb_ms"] = median_ms(lambda: F.max_pool2d(ar, 2).backward(ones_p), a.reps)
print(json.dumps(res))

"""PyTorch peer of bench/kernels_bench.cpp: layer norm, softmax, GELU forward and backward, add +
GELU and add + layer norm (PyTorch has no fused versions: these are the unfused baselines), at
(8x197x768) and (128x50x192), and cross-entropy at (4096 x 8000), fp32. Prints one JSON object {"op|shape": median ms} on its last
line. Backward rows time torch.autograd.grad on a retained graph. --cpu-time: process CPU time.

    OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/peers/kernels.py --threads 2 --reps 30
"""
import peer_env  # noqa: F401  (before torch: OpenBLAS's kernels for this CPU, see peer_env.py)
import argparse
import json
import time

import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--threads", type=int, default=2)
p.add_argument("--reps", type=int, default=30)
p.add_argument("--cpu-time", action="store_true", help="process CPU time instead of wall time")
p.add_argument("--min", action="store_true", help="the fastest run instead of the median")
a = p.parse_args()
clock = time.process_time if a.cpu_time else time.perf_counter
torch.set_num_threads(a.threads)
torch.manual_seed(0)


def median_ms(fn, reps=a.reps, warmup=3):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        t0 = clock()
        fn()
        ts.append((clock() - t0) * 1e3)
    ts.sort()
    return ts[0] if a.min else ts[len(ts) // 2]


res = {}
for shape in [(8, 197, 768), (128, 50, 192)]:
    sn = "x".join(map(str, shape))
    C = shape[-1]
    x, r, dy = torch.randn(shape), torch.randn(shape), torch.randn(shape)
    w, b = torch.randn(C), torch.randn(C)
    with torch.no_grad():
        dst = torch.empty(shape)
        res[f"memcpy|{sn}"] = median_ms(lambda: dst.copy_(x))
        res[f"layer_norm.fwd|{sn}"] = median_ms(lambda: F.layer_norm(x, (C,), w, b))
        res[f"softmax.fwd|{sn}"] = median_ms(lambda: F.softmax(x, -1))
        res[f"log_softmax.fwd|{sn}"] = median_ms(lambda: F.log_softmax(x, -1))
        res[f"gelu.fwd|{sn}"] = median_ms(lambda: F.gelu(x))
        res[f"gelu_tanh.fwd|{sn}"] = median_ms(lambda: F.gelu(x, approximate="tanh"))
        res[f"bias_gelu.fwd|{sn}"] = median_ms(lambda: F.gelu(x + b))
        res[f"add+gelu.fwd|{sn}"] = res[f"bias_gelu.fwd|{sn}"]
        res[f"add_layer_norm.fwd|{sn}"] = median_ms(lambda: F.layer_norm(x + r, (C,), w, b))
        res[f"add+layer_norm.fwd|{sn}"] = res[f"add_layer_norm.fwd|{sn}"]

    def bwd(f, inputs):
        inputs = [t.detach().clone().requires_grad_(True) for t in inputs]
        y = f(*inputs)
        return median_ms(lambda: torch.autograd.grad(y, inputs, dy, retain_graph=True))

    res[f"layer_norm.bwd|{sn}"] = bwd(lambda x_, w_, b_: F.layer_norm(x_, (C,), w_, b_), [x, w, b])
    res[f"softmax.bwd|{sn}"] = bwd(lambda x_: F.softmax(x_, -1), [x])
    res[f"log_softmax.bwd|{sn}"] = bwd(lambda x_: F.log_softmax(x_, -1), [x])
    res[f"gelu.bwd|{sn}"] = bwd(lambda x_: F.gelu(x_), [x])
    res[f"gelu_tanh.bwd|{sn}"] = bwd(lambda x_: F.gelu(x_, approximate="tanh"), [x])
    res[f"bias_gelu.bwd|{sn}"] = bwd(lambda x_, b_: F.gelu(x_ + b_), [x, b])

# Cross-entropy (label smoothing 0.1) at the translation bench's logits: 4096 positions x 8000 classes.
sn = "4096x8000"
x = torch.randn(4096, 8000)
t = (torch.arange(4096) * 7919) % 8000
with torch.no_grad():
    dst = torch.empty_like(x)
    res[f"memcpy|{sn}"] = median_ms(lambda: dst.copy_(x))
    res[f"cross_entropy.fwd|{sn}"] = median_ms(lambda: F.cross_entropy(x, t, label_smoothing=0.1))
xg = x.clone().requires_grad_(True)
y = F.cross_entropy(xg, t, label_smoothing=0.1)
res[f"cross_entropy.bwd|{sn}"] = median_ms(lambda: torch.autograd.grad(y, [xg], retain_graph=True))

print(json.dumps(res))

"""PyTorch peer of bench/mlp_train_bench.cpp: 784-512-512-10 MLP training step, batch 128, AdamW."""
import peer_env  # noqa: F401  (before torch: OpenBLAS's kernels for this CPU, see peer_env.py)
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--threads", type=int, default=2)
p.add_argument("--steps", type=int, default=200)
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(0)
model = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
decay = [p for p in model.parameters() if p.ndim > 1]
no_decay = [p for p in model.parameters() if p.ndim <= 1]
opt = torch.optim.AdamW([{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": 0.05}], lr=1e-3)
x = torch.rand(128, 1, 28, 28)
y = torch.randint(0, 10, (128,))
ts = []
for i in range(a.steps + 10):
    t0 = time.perf_counter()
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    t1 = time.perf_counter()
    if i >= 10:
        ts.append((t1 - t0) * 1e3)
ts.sort()
print(json.dumps({"ms": ts[len(ts) // 2]}))

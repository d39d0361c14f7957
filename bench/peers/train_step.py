"""The timing shared by the Fashion-MNIST training-step peers (vit_train.py, swin_train.py) of
bench/vit_train_bench.cpp: the training step (batch 128, AdamW lr 1e-3 with weight decay 0.05 on the
matrices but not on norms, biases, tokens, position embeddings or relative-position tables, label
smoothing 0.1) on an in-memory batch, and inference (eval mode, no grad) at batch 256, whole and in
slices. --precision bf16: the training step's forward and loss under torch.autocast("cpu",
dtype=torch.bfloat16) (the backward follows the forward's dtypes, the optimizer's step stays f32);
inference stays f32. Prints one JSON line: ms (median step), infer_ms (best slicing), infer_chunk,
infer_ms_by_chunk."""
import argparse
import json
import time

import torch
import torch.nn.functional as F

NO_DECAY = ("pos_embed", "token", "relative_position_bias_table")


def median(ts):
    ts = sorted(ts)
    return ts[len(ts) // 2]


def parse_args(models, default):
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--infer-reps", type=int, default=10)
    p.add_argument("--model", choices=sorted(models), default=default)
    p.add_argument("--infer-chunks", default="0",
                   help="comma-separated slice sizes to time the inference batch in (0: whole); infer_ms is the best")
    p.add_argument("--precision", choices=["f32", "bf16"], default="f32",
                   help="bf16: the training step's forward and loss under CPU bf16 autocast")
    return p.parse_args()


def optimizer(model):
    decay = lambda n, p: p.ndim > 1 and not any(k in n for k in NO_DECAY)  # noqa: E731
    params = list(model.named_parameters())
    return torch.optim.AdamW([{"params": [p for n, p in params if not decay(n, p)], "weight_decay": 0.0},
                              {"params": [p for n, p in params if decay(n, p)], "weight_decay": 0.05}], lr=1e-3)


def run(model, a):
    """Times model (built with torch.manual_seed(0) already set) as the module docstring says; prints the JSON."""
    opt = optimizer(model)
    x = torch.randn(128, 1, 28, 28)
    y = torch.randint(0, 10, (128,))
    mixed = a.precision == "bf16"
    ts = []
    for i in range(a.steps + 2):
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mixed):
            loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i >= 2:
            ts.append((time.perf_counter() - t0) * 1e3)
    model.eval()
    xi = torch.randn(256, 1, 28, 28)
    by_chunk = {}
    with torch.no_grad():
        for chunk in [int(c) for c in a.infer_chunks.split(",")]:
            ti = []
            for i in range(a.infer_reps + 2 if a.infer_reps > 0 else 0):
                t0 = time.perf_counter()
                if chunk > 0:
                    for c in range(0, len(xi), chunk):
                        model(xi[c:c + chunk])
                else:
                    model(xi)
                if i >= 2:
                    ti.append((time.perf_counter() - t0) * 1e3)
            by_chunk[chunk] = median(ti) if ti else None
    by_chunk = {c: t for c, t in by_chunk.items() if t is not None}
    best = min(by_chunk, key=by_chunk.get) if by_chunk else 0
    print(json.dumps({"ms": median(ts) if ts else None, "infer_ms": by_chunk.get(best), "infer_chunk": best,
                      "infer_ms_by_chunk": {str(c): t for c, t in by_chunk.items()}}))

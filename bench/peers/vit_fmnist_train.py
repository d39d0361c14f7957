"""PyTorch peer of `attn train --model vit_fmnist`: the same architecture (bench/peers/vit_train.py's
ViT) and recipe (AdamW lr 1e-3 wd 0.05 without decay on 1-d params / tokens / positions, linear warm-up
then cosine per step, label smoothing 0.1, optional random crop (padding 2) + horizontal flip, batch
128) trained on Fashion-MNIST; prints per-epoch lines and a final JSON line with the test accuracy,
images/s and seconds. --model picks the size (vit_fmnist or vit_fmnist_small, as attn's registry
defines them); --train-indices FILE trains on the listed images of the training file only (attn's
55,000-image training split, written by build/bench/fmnist_split), as attn does.

  OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/peers/vit_fmnist_train.py --epochs 5 --threads 2 --augment
"""
import peer_env  # noqa: F401  (before torch: OpenBLAS's kernels for this CPU, see peer_env.py)
import argparse
import gzip
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vit_train import MODELS, ViT  # noqa: E402


def load(d, prefix):
    with gzip.open(os.path.join(d, f"{prefix}-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(os.path.join(d, f"{prefix}-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    x = (torch.from_numpy(x.copy()).float() / 255.0 - 0.2860) / 0.3530
    return x, torch.from_numpy(y.astype(np.int64))


def augment(x, g):
    B = x.shape[0]
    pad = F.pad(x, (2, 2, 2, 2), value=(0 - 0.2860) / 0.3530)   # zero pixels, normalised
    i = torch.randint(0, 5, (B,), generator=g)
    j = torch.randint(0, 5, (B,), generator=g)
    out = torch.stack([pad[b, :, i[b]:i[b] + 28, j[b]:j[b] + 28] for b in range(B)])
    flip = torch.rand(B, generator=g) < 0.5
    out[flip] = out[flip].flip(-1)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--min-lr", type=float, default=1e-5)
    p.add_argument("--wd", type=float, default=0.05)
    p.add_argument("--warmup-epochs", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--limit-train", type=int, default=0)
    p.add_argument("--augment", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", choices=sorted(MODELS), default="vit_fmnist")
    p.add_argument("--train-indices", default="", help="file of training-file indices to train on")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    xtr, ytr = load(a.data_dir, "train")
    xte, yte = load(a.data_dir, "t10k")
    if a.train_indices:
        idx = torch.tensor([int(line) for line in open(a.train_indices) if line.strip()], dtype=torch.int64)
        if len(idx) == 0 or int(idx.min()) < 0 or int(idx.max()) >= len(xtr):
            sys.exit(f"vit_fmnist_train.py: {a.train_indices}: expected indices in [0, {len(xtr)}), "
                     f"got {len(idx)} in [{int(idx.min()) if len(idx) else '-'}, {int(idx.max()) if len(idx) else '-'}]")
        xtr, ytr = xtr[idx], ytr[idx]
    if a.limit_train:
        xtr, ytr = xtr[:a.limit_train], ytr[:a.limit_train]
    model = ViT(**MODELS[a.model])
    is_decay = lambda n, p: p.ndim > 1 and "pos_embed" not in n and "token" not in n  # noqa: E731
    opt = torch.optim.AdamW(
        [{"params": [p for n, p in model.named_parameters() if not is_decay(n, p)], "weight_decay": 0.0},
         {"params": [p for n, p in model.named_parameters() if is_decay(n, p)], "weight_decay": a.wd}], lr=a.lr)
    per_epoch = len(xtr) // a.batch
    total, warmup = a.epochs * per_epoch, int(a.warmup_epochs * per_epoch)
    g = torch.Generator().manual_seed(a.seed)

    def lr_at(s):
        if s < warmup:
            return a.lr * 1e-3 + (a.lr - a.lr * 1e-3) * s / warmup
        t = (s - warmup) / max(1, total - warmup)
        return a.min_lr + 0.5 * (a.lr - a.min_lr) * (1 + math.cos(math.pi * t))

    step, t_start = 0, time.time()
    for ep in range(a.epochs):
        model.train()
        perm = torch.randperm(len(xtr), generator=g)
        loss_sum = 0.0
        for k in range(per_epoch):
            idx = perm[k * a.batch:(k + 1) * a.batch]
            x, y = xtr[idx], ytr[idx]
            if a.augment:
                x = augment(x, g)
            for pg in opt.param_groups:
                pg["lr"] = lr_at(step)
            loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss_sum += loss.item()
            step += 1
        acc = evaluate(model, xte, yte)
        print(f"epoch {ep + 1}: train loss {loss_sum / per_epoch:.4f}, test acc {acc:.4f}, "
              f"{step * a.batch / (time.time() - t_start):.0f} img/s", flush=True)
    secs = time.time() - t_start
    print(json.dumps({"model": a.model, "test_accuracy": evaluate(model, xte, yte), "images_per_second": step * a.batch / secs,
                      "seconds": secs, "epochs": a.epochs}))


@torch.no_grad()
def evaluate(model, x, y):
    model.eval()
    correct = 0
    for i in range(0, len(x), 256):
        correct += (model(x[i:i + 256]).argmax(-1) == y[i:i + 256]).sum().item()
    return correct / len(x)


if __name__ == "__main__":
    main()

"""PyTorch peer of bench/encoder_block_bench.cpp: one pre-norm ViT encoder block (D 768, 12 heads,
MLP 3072, T 197, batch 8), f32 or bf16 autocast (--precision bf16: every row under
torch.autocast("cpu", dtype=torch.bfloat16)), dropout 0, train mode. The block is timm 0.6's Block written with
torch.nn modules; its attention is timm 0.6's Attention by hand (packed qkv Linear, q k^T matmul,
softmax, matmul, proj), since F.scaled_dot_product_attention does not exist in 1.13. Prints one
JSON object on its last line: {"fwd_median": ms, "fwd_min": ms, "step_median": ..., "infer_min": ...}.

    OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/peers/encoder_block.py --threads 2 --reps 20
"""
import peer_env  # noqa: F401  (before torch: OpenBLAS's kernels for this CPU, see peer_env.py)
import argparse
import contextlib
import json
import time

import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        # x: (B, T, C); q, k, v: (B, NH, T, HS)
        B, T, C = x.shape
        q, k, v = self.qkv(x).reshape(B, T, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        att = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def timing(fn, reps, warmup):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    return ts[len(ts) // 2], ts[0]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    B, T, D, NH = 8, 197, 768, 12
    block = Block(D, NH, 4 * D)
    x = torch.randn(B, T, D, requires_grad=True)
    dy = torch.randn(B, T, D)
    params = list(block.parameters())

    def fwd():
        block(x)

    def step():
        for t in params:
            t.grad = None
        x.grad = None
        block(x).backward(dy)

    def infer():
        with torch.no_grad():
            block(x)

    res = {}
    mixed = torch.autocast("cpu", dtype=torch.bfloat16) if a.precision == "bf16" else contextlib.nullcontext()
    with mixed:
        block.train()
        res["fwd_median"], res["fwd_min"] = timing(fwd, a.reps, a.warmup)
        res["step_median"], res["step_min"] = timing(step, a.reps, a.warmup)
        block.eval()
        res["infer_median"], res["infer_min"] = timing(infer, a.reps, a.warmup)
    print(json.dumps(res))


if __name__ == "__main__":
    main()

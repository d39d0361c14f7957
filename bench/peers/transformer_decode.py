"""PyTorch peer of bench/transformer_decode_bench.cpp: batched greedy decoding throughput of a
post-norm Transformer (3 + 3 layers, d_model 256, 8 heads, d_ff 1024, ReLU, vocab --vocab), fp32,
eval, no_grad.

  cached:   written with functional ops; encodes once, projects each decoder layer's cross-attention
            K/V of the memory once, and keeps a per-layer self-attention K/V cache (preallocated,
            written in place), so step t costs O(t) as attn's TransformerSeq2Seq::step.
  uncached: torch.nn.Transformer(batch_first=True) re-run on the whole prefix each step (encoder
            included), as attn's greedy_decode_uncached.
Prints {"cached_tok_s": ..., "uncached_tok_s": ...} on its last line (generated tokens per second,
median of --reps runs of --steps steps on a batch of --batch sources of length --src-len).
"""
import peer_env  # noqa: F401  (before torch: OpenBLAS's kernels for this CPU, see peer_env.py)
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--threads", type=int, default=2)
p.add_argument("--reps", type=int, default=3)
p.add_argument("--batch", type=int, default=32)
p.add_argument("--src-len", type=int, default=32)
p.add_argument("--steps", type=int, default=32)
p.add_argument("--uncached-steps", type=int, default=32)
p.add_argument("--vocab", type=int, default=8000)
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(0)
E, NH, FF, L = 256, 8, 1024, 3
HS = E // NH

model = nn.Transformer(E, NH, L, L, FF, dropout=0.0, batch_first=True).eval()
emb = torch.randn(a.vocab, E) * E ** -0.5
pe = torch.zeros(512, E)
pos = torch.arange(512).unsqueeze(1).double()
div = torch.pow(10000.0, torch.arange(0, E, 2).double() / E)
pe[:, 0::2] = torch.sin(pos / div).float()
pe[:, 1::2] = torch.cos(pos / div).float()
src = torch.randint(4, a.vocab, (a.batch, a.src_len))


def embed(tok, pos0):
    return emb[tok] * math.sqrt(E) + pe[pos0:pos0 + tok.shape[1]]


def attend(q, k, v):   # (B, NH, Lq, HS), (B, NH, Lk, HS)
    s = (q @ k.transpose(-2, -1)) / math.sqrt(HS)
    return torch.softmax(s, -1) @ v


def heads(x):
    B, T, _ = x.shape
    return x.view(B, T, NH, HS).transpose(1, 2)


def decode_cached(steps):
    B = src.shape[0]
    mem = model.encoder(embed(src, 0))
    layers = []
    for l in model.decoder.layers:
        w, b = l.multihead_attn.in_proj_weight, l.multihead_attn.in_proj_bias
        k = heads(F.linear(mem, w[E:2 * E], b[E:2 * E]))
        v = heads(F.linear(mem, w[2 * E:], b[2 * E:]))
        ck = torch.empty(B, NH, steps, HS)
        cv = torch.empty(B, NH, steps, HS)
        layers.append((l, k, v, ck, cv))
    tok = torch.full((B, 1), 2, dtype=torch.long)
    for t in range(steps):
        x = embed(tok, t)
        for l, k, v, ck, cv in layers:
            sa = l.self_attn
            q, kk, vv = F.linear(x, sa.in_proj_weight, sa.in_proj_bias).split(E, -1)
            ck[:, :, t:t + 1] = heads(kk)
            cv[:, :, t:t + 1] = heads(vv)
            h = attend(heads(q), ck[:, :, :t + 1], cv[:, :, :t + 1]).transpose(1, 2).reshape(B, 1, E)
            x = l.norm1(x + sa.out_proj(h))
            ca = l.multihead_attn
            q = F.linear(x, ca.in_proj_weight[:E], ca.in_proj_bias[:E])
            h = attend(heads(q), k, v).transpose(1, 2).reshape(B, 1, E)
            x = l.norm2(x + ca.out_proj(h))
            x = l.norm3(x + l.linear2(F.relu(l.linear1(x))))
        x = model.decoder.norm(x)
        tok = (x[:, 0] @ emb.t()).argmax(-1, keepdim=True)


def decode_uncached(steps):
    B = src.shape[0]
    s = embed(src, 0)
    prefix = torch.full((B, 1), 2, dtype=torch.long)
    for t in range(steps):
        T = prefix.shape[1]
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        y = model(s, embed(prefix, 0), tgt_mask=mask)
        nxt = (y[:, -1] @ emb.t()).argmax(-1, keepdim=True)
        prefix = torch.cat([prefix, nxt], 1)


def median_s(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2]


with torch.no_grad():
    c = median_s(lambda: decode_cached(a.steps), a.reps)
    u = median_s(lambda: decode_uncached(a.uncached_steps), max(1, a.reps // 2))
print(json.dumps({"cached_tok_s": a.batch * a.steps / c, "uncached_tok_s": a.batch * a.uncached_steps / u}))

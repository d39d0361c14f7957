"""PyTorch peer of bench/bert_finetune_bench.cpp: one fine-tuning step of a BertForSequenceClassification
in Hugging Face transformers' layout (tests/golden/gen/bert.py's module tree: separate query / key / value
Linears, an additive mask, eager ops), dropout 0.1, cross-entropy, AdamW (lr 2e-5, weight decay 0.01 off
LayerNorms and biases), f32, on seeded random token ids of the same shape.

    /usr/bin/python3 bench/peers/bert_finetune.py --model bert-base-uncased --batch 8 --seq-len 128 --threads 2
        [--steps 5] [--warmup 1]

Prints one JSON line: {"ms": median step time, "steps": ..., "threads": ...}.
"""
import peer_env  # noqa: F401  (before torch: OpenBLAS's kernels for this CPU, see peer_env.py)
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden", "gen"))
import bert as hf_bert  # noqa: E402
from bert_infer import CONFIGS  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="bert-base-uncased", choices=sorted(CONFIGS))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    vocab, hidden, layers, heads, ffn = CONFIGS[a.model]
    config = {"vocab_size": vocab, "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
              "intermediate_size": ffn, "max_position_embeddings": 512, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
              "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "num_labels": 2}
    model = hf_bert.build(config, "BertForSequenceClassification")
    model.train()
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim <= 1 or "LayerNorm" in name else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=2e-5)
    g = torch.Generator().manual_seed(1)
    B, T = a.batch, a.seq_len
    ids = torch.randint(1000, vocab, (B, T), generator=g)
    types = (torch.arange(T) >= T // 2).long().expand(B, T).contiguous()
    mask = torch.ones(B, T, dtype=torch.long)
    labels = torch.randint(0, 2, (B,), generator=g)

    def step():
        out, _, _ = model(ids, types, mask)
        loss = F.cross_entropy(out["logits"], labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(a.warmup):
        step()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"ms": statistics.median(times), "steps": a.steps, "threads": a.threads, "model": a.model,
                      "batch": B, "seq_len": T}))


if __name__ == "__main__":
    main()

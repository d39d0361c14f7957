"""PyTorch peer of bench/bert_train_bench.cpp: one bert-mini pre-training step (Hugging Face's
BertForPreTraining layout from tests/golden/gen/bert.py: 4 layers, 256 hidden, 4 heads, FFN 1024, dropout
0.1, tied decoder), batch 32 x 128 tokens, 19 masked positions per sequence (labels -100 elsewhere), as
transformers computes it: the MLM logits at every position, cross_entropy(ignore_index=-100) + the NSP
cross-entropy, then AdamW (weight decay 0.01, not on biases and LayerNorms). Prints JSON on its last line:
{"ms": median step time}.

--precision bf16: the forward and the losses under torch.autocast("cpu", dtype=torch.bfloat16) (the backward
follows the forward's dtypes, AdamW stays f32). torch 1.13's CPU layer_norm refuses a bf16 input with f32
weights ("expected scalar type BFloat16 but found Float"), which the MLM head's transform (LayerNorm of
GELU(dense)) gives it under autocast; so under bf16 every LayerNorm's input is cast to f32 first (a forward
pre-hook), as the residual sums the encoder's LayerNorms take are f32 already.

    /usr/bin/python3 bench/peers/bert_train.py [--threads 2] [--steps 10] [--batch 32] [--seq 128]
        [--precision f32|bf16]
"""
import peer_env  # noqa: F401  (before torch: OpenBLAS's kernels for this CPU, see peer_env.py)
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden", "gen"))
import bert  # noqa: E402  (the HF-layout module tree)

MINI = {"vocab_size": 30522, "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
        "intermediate_size": 1024, "max_position_embeddings": 512, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}


def median(ts):
    ts = sorted(ts)
    return ts[len(ts) // 2]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = bert.build(MINI, "BertForPreTraining")
    model.train()
    mixed = a.precision == "bf16"
    if mixed:
        for norm in (m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)):
            norm.register_forward_pre_hook(lambda m, inputs: tuple(t.float() for t in inputs))
    decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
    opt = torch.optim.AdamW([{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": 0.01}],
                            lr=1e-4, eps=1e-6)
    B, T = a.batch, a.seq
    ids = torch.randint(1000, 30000, (B, T))
    ids[:, 0], ids[:, T // 2], ids[:, -1] = 101, 102, 102
    types = torch.zeros(B, T, dtype=torch.long)
    types[:, T // 2 + 1:] = 1
    mask = torch.ones(B, T, dtype=torch.long)
    labels = torch.full((B, T), -100, dtype=torch.long)
    for b in range(B):
        pos = torch.randperm(T - 3)[:19] + 1
        labels[b, pos] = ids[b, pos]
        ids[b, pos] = 103
    nsp = torch.randint(0, 2, (B,))
    ts = []
    for i in range(a.steps + 2):
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mixed):
            out, _, _ = model(ids, types, mask)
            logits = out["prediction_logits"]
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=-100) + \
                F.cross_entropy(out["seq_relationship_logits"], nsp)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i >= 2:
            ts.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"ms": median(ts) if ts else None}))


if __name__ == "__main__":
    main()

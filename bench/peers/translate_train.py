"""PyTorch peer of bench/translate_train_bench.cpp: trains the same Transformer translation model with
torch.nn.Transformer on the batches the C++ side wrote (so data, tokenisation, batch order and step count
are identical), with the same schedule, optimizer and label smoothing, times the training steps the same
way, then greedy-decodes the test sources and writes the generated ids for the C++ side to detokenise and
score with attn's BLEU.

  OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/peers/translate_train.py --work DIR --threads 2
      [--log-every 100] [--precision f32|bf16]

--precision bf16: each training step's forward and loss under torch.autocast("cpu", dtype=torch.bfloat16)
(the backward follows the forward's dtypes; Adam stays f32); greedy decoding stays f32. nn.Transformer's
LayerNorms take f32 residual sums under autocast (post-norm and pre-norm alike), so torch 1.13's CPU
layer_norm, which refuses a bf16 input with f32 weights, needs no cast to f32 here.

Inputs: DIR/batches.safetensors (written by the bench):
  shapes (N, 3) i32 = (B, S, T) per step; src / tgt_in / tgt_out: the steps' (B, S) / (B, T) / (B, T) id
  matrices flattened and concatenated (pad 0, bos 2, eos 3); ntok (N) i32 = non-pad target tokens per step;
  test_src: the test sources' ids concatenated, test_len (M) i32 their lengths;
  __metadata__["config"]: the model / optimizer / decoding settings (JSON).
Outputs: DIR/torch_hyps.json ({"hyps": [[ids, no bos/eos] per test source, input order]}) and, on the last
stdout line, a JSON summary (tokens/s, seconds, losses).

Model: x = dropout(embed(tokens) * sqrt(E) + PE[pos]) (the paper's sinusoids), nn.Transformer (batch_first,
post-norm, relu, final LayerNorms in both stacks), output projection E -> V without bias; embeddings shared
and the output projection tied as the config says. Init: nn.Transformer's own xavier_uniform on every
matrix, then embeddings (and an untied output projection) N(0, E^-1/2), as attn's TransformerSeq2Seq.
Decoding: greedy, batched (64 sentences sorted by source length, as attn's Translator), WITHOUT a KV cache:
the decoder re-runs on the whole prefix each step (torch 1.13's nn.Transformer has no incremental API); the
memory is encoded once per batch and only the last position is projected to the vocabulary. Rows stop at eos; max tokens per row min(max_length - 1, 2 S + 10), as attn.
"""
import peer_env  # noqa: F401  (before torch: OpenBLAS's kernels for this CPU, see peer_env.py)
import argparse
import json
import math
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, BOS, EOS = 0, 2, 3


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    base = 8 + n
    dtypes = {"I32": np.int32, "I64": np.int64, "F32": np.float32, "U8": np.uint8}
    out = {}
    for name, h in header.items():
        b, e = h["data_offsets"]
        out[name] = np.frombuffer(blob[base + b:base + e], dtype=dtypes[h["dtype"]]).reshape(h["shape"])
    return out, meta


def sinusoids(n, d):
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    k = torch.arange(d)
    angle = pos / torch.pow(10000.0, (k // 2 * 2).double() / d)
    pe = torch.where(k % 2 == 0, torch.sin(angle), torch.cos(angle))
    return pe.float()


class Seq2Seq(nn.Module):
    def __init__(self, c):
        super().__init__()
        V, E = c["vocab_size"], c["d_model"]
        self.E = E
        self.transformer = nn.Transformer(d_model=E, nhead=c["nhead"], num_encoder_layers=c["encoder_layers"],
                                          num_decoder_layers=c["decoder_layers"], dim_feedforward=c["d_ff"],
                                          dropout=c["dropout"], activation=c["activation"],
                                          layer_norm_eps=c["layer_norm_eps"], batch_first=True,
                                          norm_first=c["norm_first"])
        self.src_embed = nn.Embedding(V, E)
        self.tgt_embed = self.src_embed if c["share_embeddings"] else nn.Embedding(V, E)
        self.output_proj = nn.Linear(E, V, bias=False)
        self.embed_drop = nn.Dropout(c["dropout"])
        self.register_buffer("pos_table", sinusoids(c["max_length"], E), persistent=False)
        std = E ** -0.5
        with torch.no_grad():
            nn.init.normal_(self.src_embed.weight, 0.0, std)
            if not c["share_embeddings"]:
                nn.init.normal_(self.tgt_embed.weight, 0.0, std)
            if c["tie_output"]:
                self.output_proj.weight = self.tgt_embed.weight
            else:
                nn.init.normal_(self.output_proj.weight, 0.0, std)

    def embed(self, e, tokens):
        T = tokens.shape[1]
        return self.embed_drop(e(tokens) * math.sqrt(self.E) + self.pos_table[:T])

    def encode(self, src, src_pad):
        return self.transformer.encoder(self.embed(self.src_embed, src), src_key_padding_mask=src_pad)

    def decoder_states(self, memory, src_pad, tgt_in):   # (B, T, E), before the output projection
        T = tgt_in.shape[1]
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        return self.transformer.decoder(self.embed(self.tgt_embed, tgt_in), memory, tgt_mask=causal,
                                        tgt_key_padding_mask=tgt_in == PAD, memory_key_padding_mask=src_pad)

    def decode(self, memory, src_pad, tgt_in):
        return self.output_proj(self.decoder_states(memory, src_pad, tgt_in))

    def forward(self, src, src_pad, tgt_in):
        return self.decode(self.encode(src, src_pad), src_pad, tgt_in)


def greedy(model, src_ids, max_length, batch=64):
    """src_ids: list of id lists. Returns id lists (no bos/eos), input order."""
    order = sorted(range(len(src_ids)), key=lambda i: len(src_ids[i]))   # stable, as std::stable_sort
    out = [None] * len(src_ids)
    with torch.no_grad():
        for s in range(0, len(order), batch):
            rows = order[s:s + batch]
            S = max(len(src_ids[i]) for i in rows)
            src = torch.zeros(len(rows), S, dtype=torch.long)
            for r, i in enumerate(rows):
                src[r, :len(src_ids[i])] = torch.tensor(src_ids[i], dtype=torch.long)
            pad = src == PAD
            cap = min(max_length - 1, 2 * S + 10)
            memory = model.encode(src, pad)
            ys = torch.full((len(rows), 1), BOS, dtype=torch.long)
            done = torch.zeros(len(rows), dtype=torch.bool)
            gen = [[] for _ in rows]
            for _ in range(cap):
                # only the last position is projected to the vocabulary
                nxt = model.output_proj(model.decoder_states(memory, pad, ys)[:, -1]).argmax(-1)
                for r in range(len(rows)):
                    if not done[r]:
                        if int(nxt[r]) == EOS:
                            done[r] = True
                        else:
                            gen[r].append(int(nxt[r]))
                if bool(done.all()):
                    break
                ys = torch.cat([ys, torch.where(done, torch.full_like(nxt, PAD), nxt)[:, None]], dim=1)
            for r, i in enumerate(rows):
                out[i] = gen[r]
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--work", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--precision", choices=["f32", "bf16"], default="f32",
                   help="bf16: the training steps' forward and loss under CPU bf16 autocast")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    t_all = time.perf_counter()
    d, meta = read_safetensors(a.work + "/batches.safetensors")
    c = json.loads(meta["config"])
    mc = c["model"]
    torch.manual_seed(c["seed"])
    model = Seq2Seq(mc)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=0.0, betas=(0.9, c["beta2"]), eps=1e-9)
    E, warm, scale = mc["d_model"], max(1, c["warmup_steps"]), c["lr"]
    mixed = a.precision == "bf16"

    def lr_at(step):   # the paper's inverse square root, step counted from 1
        return scale * E ** -0.5 * min(step ** -0.5, step * warm ** -1.5)

    shapes, ntok = d["shapes"], d["ntok"]
    skip = c["rate_skip_steps"]
    offs = [0, 0, 0]
    losses, step_secs = [], []
    for i in range(shapes.shape[0]):
        B, S, T = (int(x) for x in shapes[i])
        src = torch.from_numpy(d["src"][offs[0]:offs[0] + B * S].astype(np.int64).reshape(B, S))
        tgt_in = torch.from_numpy(d["tgt_in"][offs[1]:offs[1] + B * T].astype(np.int64).reshape(B, T))
        tgt_out = torch.from_numpy(d["tgt_out"][offs[2]:offs[2] + B * T].astype(np.int64).reshape(B, T))
        offs = [offs[0] + B * S, offs[1] + B * T, offs[2] + B * T]
        src_pad = src == PAD
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lr_at(i + 1)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mixed):
            logits = model(src, src_pad, tgt_in)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=PAD,
                                   label_smoothing=c["label_smoothing"])
        lv = loss.item()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        step_secs.append(time.perf_counter() - t0)
        losses.append(lv)
        if not math.isfinite(lv):
            raise SystemExit(f"translate_train.py: the loss became {lv} at step {i + 1}")
        if a.log_every > 0 and (i + 1) % a.log_every == 0:
            late = sum(step_secs[skip:])
            print(f"torch step {i + 1}: loss {lv:.4f} (mean of last {a.log_every} "
                  f"{float(np.mean(losses[-a.log_every:])):.4f}), "
                  f"{(int(ntok[skip:i + 1].sum()) / late if late > 0 else 0.0):.0f} tok/s, "
                  f"{time.perf_counter() - t_all:.0f} s", file=sys.stderr, flush=True)
    train_secs = sum(step_secs)
    tokens = int(ntok.sum())
    late_secs = sum(step_secs[skip:])
    late_tokens = int(ntok[skip:].sum())

    model.eval()
    lens = d["test_len"]
    flat = d["test_src"]
    src_ids, o = [], 0
    for n in lens:
        src_ids.append([int(x) for x in flat[o:o + int(n)]])
        o += int(n)
    t_dec = time.perf_counter()
    hyps = greedy(model, src_ids, mc["max_length"])
    dec_secs = time.perf_counter() - t_dec
    with open(a.work + "/torch_hyps.json", "w") as f:
        json.dump({"hyps": hyps}, f)
    print(json.dumps({
        "steps": int(shapes.shape[0]), "train_seconds": train_secs, "tokens": tokens,
        "tokens_per_second": tokens / train_secs if train_secs > 0 else 0.0,
        "tokens_per_second_after_skip": late_tokens / late_secs if late_secs > 0 else 0.0,
        "final_loss": losses[-1] if losses else None,
        "mean_loss_last_100": float(np.mean(losses[-100:])) if losses else None,
        "losses": losses, "decode_seconds": dec_secs, "threads": torch.get_num_threads(),
        "wall_seconds": time.perf_counter() - t_all, "torch": torch.__version__, "precision": a.precision}))


if __name__ == "__main__":
    main()

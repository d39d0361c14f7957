"""PyTorch and ONNX Runtime peers of `attn bench` for BERT: BertModel inference (last hidden state and
pooler) in eval mode under torch.no_grad(), seeded random weights, at the same batch, sequence length
and thread count.

    /usr/bin/python3 bench/peers/bert_infer.py --model bert-base-uncased --batch 1 --seq-len 128 --threads 2
        [--lengths 16,32,...] [--impl hf|encoder|best] [--peer pytorch|onnxruntime] [--dtype f32|bf16|int8]
        [--qengine onednn|qnnpack|best] [--iters 20] [--warmup 3]

Two PyTorch implementations of the same computation:
- hf: the module tree in Hugging Face transformers' layout that the tests compare attn with
  (tests/golden/gen/bert.py: separate query / key / value Linears, an additive mask, eager ops);
- encoder: torch.nn.TransformerEncoder (post-norm, exact GELU, batch_first) with BERT's embeddings and
  pooler, which takes PyTorch's inference fast path (fused native kernels; with a key padding mask, nested
  tensors that skip the padding).
--impl best (the default for --peer pytorch) times both and reports the faster, naming it. --peer
onnxruntime exports the hf tree (bench/peers/ort_peer.py). --lengths runs one batch whose sequences have
the given lengths, padded to the longest with an attention mask (the encoder impl skips the padding).
--dtype bf16: PyTorch's bf16 autocast (pytorch peer only). torch 1.13's encoder fast path refuses autocast
("expected scalar type BFloat16 but found Float"); that implementation then runs with its weights cast to
bf16 instead, named "encoder (bf16 weights)" in the report.
--dtype int8: PyTorch's dynamic int8 of the same f32 model (bench/peers/int8_peer.py:
torch.quantization.quantize_dynamic of its nn.Linear modules, qint8) under --qengine (best, the default: each
engine timed, the faster reported, "qengine" names it). In the hf tree every Linear of the encoder and the
pooler is quantized; in the encoder implementation nn.MultiheadAttention's projections stay f32, and torch
1.13's fast path cannot run a quantized linear1 / linear2 at all (it reads their weight as a tensor): an
implementation that fails is named with its error in "int8_impls_failed" and the other one reports. The
ONNX Runtime peer runs f32 only (its int8 quantizer is not installable here; ONNX Runtime's f32 is the peer
for int8).

Prints one JSON line: latency median / p90 (ms), sequences/s, the implementation timed.
"""
import peer_env  # noqa: F401  (before torch: OpenBLAS's kernels for this CPU, see peer_env.py)
import argparse
import json
import os
import sys

import torch
from torch import nn

import int8_peer
from latency import latency_ms
from ort_peer import time_onnxruntime

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden", "gen"))
import bert as hf_bert  # noqa: E402

# name: (vocab, hidden, layers, heads, intermediate)
CONFIGS = {
    "bert-base-uncased": (30522, 768, 12, 12, 3072),
    "bert-base-cased": (28996, 768, 12, 12, 3072),
    "bert-large-uncased": (30522, 1024, 24, 16, 4096),
    "bert-large-cased": (28996, 1024, 24, 16, 4096),
    "bert-mini": (30522, 256, 4, 4, 1024),
    "bert-small": (30522, 512, 4, 8, 2048),
}


def hf_config(name):
    vocab, hidden, layers, heads, ffn = CONFIGS[name]
    return {"vocab_size": vocab, "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
            "intermediate_size": ffn, "max_position_embeddings": 512, "type_vocab_size": 2,
            "layer_norm_eps": 1e-12, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}


class HfBert(nn.Module):
    """tests/golden/gen/bert.py's BertModel returning (last hidden state, pooler) only."""

    def __init__(self, config):
        super().__init__()
        self.bert = hf_bert.build(config, "BertModel")

    def forward(self, input_ids, token_type_ids, attention_mask):
        x, pooled, _, _ = self.bert(input_ids, token_type_ids, attention_mask)
        return x, pooled


class EncoderBert(nn.Module):
    def __init__(self, config):
        super().__init__()
        c = config
        h, eps = c["hidden_size"], c["layer_norm_eps"]
        self.word = nn.Embedding(c["vocab_size"], h)
        self.position = nn.Embedding(c["max_position_embeddings"], h)
        self.token_type = nn.Embedding(c["type_vocab_size"], h)
        self.norm = nn.LayerNorm(h, eps=eps)
        layer = nn.TransformerEncoderLayer(h, c["num_attention_heads"], c["intermediate_size"], dropout=0.0,
                                           activation="gelu", layer_norm_eps=eps, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, c["num_hidden_layers"], enable_nested_tensor=True)
        self.pooler = nn.Linear(h, h)

    def forward(self, input_ids, token_type_ids, attention_mask):
        b, t = input_ids.shape
        pos = torch.arange(t).unsqueeze(0)
        x = self.norm(self.word(input_ids) + self.position(pos) + self.token_type(token_type_ids))
        x = self.encoder(x, src_key_padding_mask=attention_mask == 0)
        if x.is_nested:
            x = x.to_padded_tensor(0.0, (b, t, x.size(-1)))
        return x, torch.tanh(self.pooler(x[:, 0]))


def inputs(config, lengths):
    g = torch.Generator().manual_seed(0)
    t = max(lengths)
    ids = torch.randint(1000, config["vocab_size"], (len(lengths), t), generator=g)
    mask = torch.zeros(len(lengths), t, dtype=torch.int64)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    ids = ids * mask
    types = torch.zeros_like(ids)
    types[:, t // 2:] = 1
    return {"input_ids": ids, "token_type_ids": types * mask, "attention_mask": mask}


def time_pytorch(model, feed, iters, warmup, dtype, autocast=True):
    return latency_ms(lambda: model(**feed), iters, warmup,
                      lambda: torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16" and autocast))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="bert-base-uncased", choices=sorted(CONFIGS))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--lengths", default="", help="comma-separated lengths of one batch (overrides --batch/--seq-len)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16", "int8"])
    ap.add_argument("--qengine", default="best", choices=["onednn", "qnnpack", "best"],
                    help="--dtype int8: PyTorch's quantized engine (best: time each, report the faster)")
    ap.add_argument("--impl", default="best", choices=["hf", "encoder", "best"])
    ap.add_argument("--peer", default="pytorch", choices=["pytorch", "onnxruntime"])
    a = ap.parse_args()
    if a.peer == "onnxruntime" and a.dtype == "int8":
        ap.error("--dtype int8 has no ONNX Runtime peer: ONNX Runtime's int8 quantizer (the Python package "
                 "onnxruntime.quantization) is not installable here and onnxruntime-node has none; compare int8 "
                 "with ONNX Runtime's f32 (--peer onnxruntime --dtype f32)")
    torch.set_num_threads(a.threads)
    lengths = [int(x) for x in a.lengths.split(",")] if a.lengths else [a.seq_len] * a.batch
    config = hf_config(a.model)
    feed = inputs(config, lengths)
    report = {"model": a.model, "batch": len(lengths), "seq_len": max(lengths), "lengths": lengths,
              "threads": a.threads, "dtype": a.dtype}
    if a.peer == "onnxruntime":
        if a.dtype != "f32":
            raise SystemExit("bert_infer.py: the ONNX Runtime peer runs f32 only")
        torch.manual_seed(0)
        r = time_onnxruntime(HfBert(config).eval(), feed, ["last_hidden_state", "pooler_output"], threads=a.threads,
                             iters=a.iters, warmup=a.warmup)
        r.update(report)
        r["impl"] = "hf (torch.onnx.export)"
    else:
        impls = ["hf", "encoder"] if a.impl == "best" else [a.impl]
        results, int8_runs, int8_failed = {}, {}, {}
        for impl in impls:
            torch.manual_seed(0)
            model = (HfBert(config) if impl == "hf" else EncoderBert(config)).eval()
            if a.dtype == "int8":
                def reference(q, model=model):
                    with torch.no_grad():
                        return int8_peer.max_abs_diff(q(**feed), model(**feed))
                try:
                    int8_runs[impl] = int8_peer.run_engines(
                        model, int8_peer.engines(a.qengine),
                        lambda q: time_pytorch(q, feed, a.iters, a.warmup, a.dtype), reference)
                except (RuntimeError, AttributeError, TypeError) as e:
                    int8_failed[impl] = f"{type(e).__name__}: {e}"
                    if impl == "encoder":
                        int8_failed[impl] += (" (nn.TransformerEncoderLayer's inference fast path reads linear1.weight "
                                              "as a tensor; a dynamically quantized Linear's weight is a method)")
                    continue
                results[impl] = int8_runs[impl]["latency_ms"]
                continue
            try:
                results[impl] = time_pytorch(model, feed, a.iters, a.warmup, a.dtype)
            except RuntimeError:
                if a.dtype != "bf16":
                    raise
                results[impl + " (bf16 weights)"] = time_pytorch(model.to(torch.bfloat16), feed, a.iters, a.warmup,
                                                                 a.dtype, autocast=False)
        if not results:
            raise SystemExit("bert_infer.py: no implementation runs --dtype int8: " +
                             "; ".join(f"{k}: {v}" for k, v in int8_failed.items()))
        impl = min(results, key=lambda k: results[k]["median"])
        r = {"peer": "pytorch", "torch": torch.__version__, "openblas_coretype": peer_env.OPENBLAS_CORETYPE,
             "impl": impl, "latency_ms": results[impl], "all_impls_ms": {k: v["median"] for k, v in results.items()}}
        if a.dtype == "int8":
            r.update(int8_runs[impl])
            r["fast_path"] = impl == "encoder"
            r["int8_impls_failed"] = int8_failed
        r.update(report)
    r["sequences_per_s"] = len(lengths) / (r["latency_ms"]["median"] / 1e3)
    print(json.dumps(r))


if __name__ == "__main__":
    main()

"""PyTorch peer of `attn bench`: ViT / DeiT inference latency in eval mode under torch.no_grad(), with
seeded random weights, at the same batch and thread count. Models are torchvision's VisionTransformer
built with the registry configs `attn bench --model` uses (DeiT = the same encoder at its width; the
distillation token adds one token and one head, which this peer includes).

    /usr/bin/python3 bench/peers/vit_infer.py --model vit_base_patch16_224 --batch 1 --threads 2 [--iters 20]
    [--dtype f32|bf16|int8] [--qengine onednn|qnnpack|best] [--peer pytorch|onnxruntime]

--dtype bf16: PyTorch's bf16 autocast of the f32 model and the model and input cast to bf16, both timed, the
faster reported ("impl"; both medians in "all_impls_ms").
--dtype int8: PyTorch's dynamic int8 of the same f32 model (bench/peers/int8_peer.py:
torch.quantization.quantize_dynamic of its nn.Linear modules, qint8) under --qengine (best, the default:
each engine timed, the faster reported). torchvision's attention is nn.MultiheadAttention, whose in_proj
is a bare parameter and whose out_proj is not of type nn.Linear, so those stay f32: the JSON's "quantized"
says how many Linears and weight bytes ran in int8 and how many stayed f32. The ONNX Runtime peer runs
f32 only (its int8 quantizer is not installable here; ONNX Runtime's f32 is the peer for int8).

Prints one JSON line: latency median / p90 (ms), images/s. Run it with OMP_WAIT_POLICY=PASSIVE and
without and keep the better figure (docs/design.md, "Peers in the benchmarks").
"""
import peer_env  # noqa: F401  (before torch: OpenBLAS's kernels for this CPU, see peer_env.py)
import argparse
import json
import sys

import torch
import torch.nn as nn
from torchvision.models.vision_transformer import VisionTransformer

import int8_peer
from latency import latency_ms
from ort_peer import time_onnxruntime

# name: (patch, dim, depth, heads, mlp, distilled)
CONFIGS = {
    "vit_tiny_patch16_224": (16, 192, 12, 3, 768, False),
    "vit_small_patch16_224": (16, 384, 12, 6, 1536, False),
    "vit_base_patch16_224": (16, 768, 12, 12, 3072, False),
    "vit_base_patch32_224": (32, 768, 12, 12, 3072, False),
    "vit_large_patch16_224": (16, 1024, 24, 16, 4096, False),
    "deit_tiny_patch16_224": (16, 192, 12, 3, 768, False),
    "deit_small_patch16_224": (16, 384, 12, 6, 1536, False),
    "deit_base_patch16_224": (16, 768, 12, 12, 3072, False),
    "deit_tiny_distilled_patch16_224": (16, 192, 12, 3, 768, True),
    "deit_small_distilled_patch16_224": (16, 384, 12, 6, 1536, True),
    "deit_base_distilled_patch16_224": (16, 768, 12, 12, 3072, True),
}


class Distilled(nn.Module):
    """torchvision's encoder with DeiT's distillation token and second head (mean of the two heads)."""

    def __init__(self, vit, dim):
        super().__init__()
        self.vit = vit
        self.dist_token = nn.Parameter(torch.zeros(1, 1, dim))
        n = vit.encoder.pos_embedding.shape[1] + 1
        vit.encoder.pos_embedding = nn.Parameter(torch.randn(1, n, dim) * 0.02)
        self.head_dist = nn.Linear(dim, 1000)

    def forward(self, x):
        v = self.vit
        x = v._process_input(x)
        b = x.shape[0]
        x = torch.cat([v.class_token.expand(b, -1, -1), self.dist_token.expand(b, -1, -1), x], dim=1)
        x = v.encoder(x)
        return (v.heads(x[:, 0]) + self.head_dist(x[:, 1])) / 2


def head_input(model, x):
    """What the classification head of model(x) sees (the class token after the encoder's final norm)."""
    heads = next(m for name, m in model.named_modules() if name in ("heads", "vit.heads"))
    seen = []
    hook = heads.register_forward_pre_hook(lambda m, inputs: seen.append(inputs[0]))
    try:
        model(x)
    finally:
        hook.remove()
    return seen[0]


def time_pytorch(model, x, iters, warmup):
    return latency_ms(lambda: model(x), iters, warmup)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="vit_base_patch16_224", choices=sorted(CONFIGS))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16", "int8"])
    ap.add_argument("--qengine", default="best", choices=["onednn", "qnnpack", "best"],
                    help="--dtype int8: PyTorch's quantized engine (best: time each, report the faster)")
    ap.add_argument("--peer", default="pytorch", choices=["pytorch", "onnxruntime"],
                    help="onnxruntime: the same model exported with torch.onnx.export, run by ort_peer.py (f32 only)")
    a = ap.parse_args()
    if a.peer == "onnxruntime" and a.dtype == "int8":
        ap.error("--dtype int8 has no ONNX Runtime peer: ONNX Runtime's int8 quantizer (the Python package "
                 "onnxruntime.quantization) is not installable here and onnxruntime-node has none; compare int8 "
                 "with ONNX Runtime's f32 (--peer onnxruntime --dtype f32)")
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    patch, dim, depth, heads, mlp, distilled = CONFIGS[a.model]
    model = VisionTransformer(image_size=224, patch_size=patch, num_layers=depth, num_heads=heads, hidden_dim=dim,
                              mlp_dim=mlp, num_classes=1000)
    # torchvision zero-initialises the head: random head weights (as attn's timm init) make the logits, and so
    # the ONNX Runtime and int8 output checks, mean something. Speed is unchanged.
    with torch.no_grad():
        nn.init.trunc_normal_(model.heads.head.weight, std=0.02)
    if distilled:
        model = Distilled(model, dim)
    model.eval()
    x = torch.randn(a.batch, 3, 224, 224)
    if a.dtype == "bf16" and a.peer == "pytorch":
        # PyTorch's two ways to run bf16: autocast of the f32 model, and the model and input cast to bf16; the
        # faster counts, named in "impl", with both medians.
        both = {}
        try:
            both["autocast"] = latency_ms(lambda: model(x), a.iters, a.warmup,
                                          lambda: torch.autocast("cpu", dtype=torch.bfloat16))
        except RuntimeError as e:
            print(f"vit_infer.py: bf16 autocast failed: {str(e).splitlines()[0][:200]}", file=sys.stderr)
        mb, xb = model.to(torch.bfloat16), x.to(torch.bfloat16)
        both["bf16 cast"] = time_pytorch(mb, xb, a.iters, a.warmup)
        impl = min(both, key=lambda k: both[k]["median"])
        r = {"peer": "pytorch", "torch": torch.__version__, "model": a.model, "batch": a.batch, "threads": a.threads,
             "dtype": a.dtype, "impl": impl, "latency_ms": both[impl],
             "all_impls_ms": {k: v["median"] for k, v in both.items()}}
        r["images_per_s"] = a.batch / (r["latency_ms"]["median"] / 1e3)
        print(json.dumps(r))
        return
    if a.peer == "onnxruntime":
        if a.dtype != "f32":
            raise SystemExit("vit_infer.py: the ONNX Runtime peer runs f32 only")
        r = time_onnxruntime(model, {"images": x}, ["logits"], threads=a.threads, iters=a.iters, warmup=a.warmup)
        r.update({"model": a.model, "batch": a.batch, "dtype": a.dtype,
                  "images_per_s": a.batch / (r["latency_ms"]["median"] / 1e3)})
        print(json.dumps(r))
        return
    r = {"peer": "pytorch", "torch": torch.__version__, "model": a.model, "batch": a.batch, "threads": a.threads,
         "dtype": a.dtype}
    if a.dtype == "int8":
        def reference(q):   # the class token's features: torchvision zero-initialises the head's weights
            with torch.no_grad():
                return int8_peer.max_abs_diff(head_input(q, x), head_input(model, x))
        r.update(int8_peer.run_engines(model, int8_peer.engines(a.qengine),
                                       lambda q: time_pytorch(q, x, a.iters, a.warmup), reference))
    else:
        r["latency_ms"] = time_pytorch(model, x, a.iters, a.warmup)
    r["images_per_s"] = a.batch / (r["latency_ms"]["median"] / 1e3)
    print(json.dumps(r))


if __name__ == "__main__":
    main()

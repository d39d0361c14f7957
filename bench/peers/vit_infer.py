"""PyTorch peer of `attn bench`: ViT / DeiT inference latency in eval mode under torch.no_grad(), with
seeded random weights, at the same batch and thread count. Models are torchvision's VisionTransformer
built with the registry configs `attn bench --model` uses (DeiT = the same encoder at its width; the
distillation token adds one token and one head, which this peer includes).

    /usr/bin/python3 bench/peers/vit_infer.py --model vit_base_patch16_224 --batch 1 --threads 2 [--iters 20]
    [--dtype f32|bf16] [--peer pytorch|onnxruntime]

Prints one JSON line: latency median / p90 (ms), images/s. Run it with OMP_WAIT_POLICY=PASSIVE and
without and keep the better figure (docs/design.md, "Peers in the benchmarks").
"""
import peer_env  # noqa: F401  (before torch: OpenBLAS's kernels for this CPU, see peer_env.py)
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
from torchvision.models.vision_transformer import VisionTransformer

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="vit_base_patch16_224", choices=sorted(CONFIGS))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    ap.add_argument("--peer", default="pytorch", choices=["pytorch", "onnxruntime"],
                    help="onnxruntime: the same model exported with torch.onnx.export, run by ort_peer.py (f32 only)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    patch, dim, depth, heads, mlp, distilled = CONFIGS[a.model]
    model = VisionTransformer(image_size=224, patch_size=patch, num_layers=depth, num_heads=heads, hidden_dim=dim,
                              mlp_dim=mlp, num_classes=1000)
    if distilled:
        model = Distilled(model, dim)
    model.eval()
    x = torch.randn(a.batch, 3, 224, 224)
    if a.dtype == "bf16":
        model = model.to(torch.bfloat16)
        x = x.to(torch.bfloat16)
    if a.peer == "onnxruntime":
        if a.dtype != "f32":
            raise SystemExit("vit_infer.py: the ONNX Runtime peer runs f32 only")
        r = time_onnxruntime(model, {"images": x}, ["logits"], threads=a.threads, iters=a.iters, warmup=a.warmup)
        r.update({"model": a.model, "batch": a.batch, "dtype": a.dtype,
                  "images_per_s": a.batch / (r["latency_ms"]["median"] / 1e3)})
        print(json.dumps(r))
        return
    times = []
    with torch.no_grad():
        for _ in range(a.warmup):
            model(x)
        for _ in range(a.iters):
            t = time.perf_counter()
            model(x)
            times.append(time.perf_counter() - t)
    times.sort()
    med = statistics.median(times)
    p90 = times[min(len(times) - 1, max(0, -(-9 * len(times) // 10) - 1))]
    print(json.dumps({"peer": "pytorch", "torch": torch.__version__, "model": a.model, "batch": a.batch,
                      "threads": a.threads, "dtype": a.dtype, "latency_ms": {"median": med * 1e3, "p90": p90 * 1e3},
                      "images_per_s": a.batch / med}))


if __name__ == "__main__":
    main()

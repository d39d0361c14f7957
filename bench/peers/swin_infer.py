"""PyTorch / ONNX Runtime peer of `attn bench`: Swin Transformer inference latency (torchvision's swin_t,
swin_s, swin_b, swin_v2_t, ...) in eval mode under torch.no_grad(), seeded random weights, at the same batch
and thread count.

    /usr/bin/python3 bench/peers/swin_infer.py --model swin_t --batch 1 --threads 2 [--iters 20]
        [--dtype f32|bf16] [--impl eager|traced|best] [--peer pytorch|onnxruntime]

PyTorch at its best setting: OpenBLAS's kernels for this CPU (peer_env.py), and of two ways to run the same
module the faster (--impl best, the default): eager, and torch.jit.trace + torch.jit.freeze (constant
shift masks and bias gathers folded, oneDNN fusions of the frozen graph). --dtype bf16: PyTorch's bf16
autocast (the pytorch peer only); where torch cannot run the model under it (torch 1.13 cannot), the model
and input cast to bf16, named in "impl". --peer onnxruntime: the module exported with torch.onnx.export, run by
ort_peer.py (f32 only; the result carries max_abs_diff against PyTorch).

Prints one JSON line: latency median / p90 (ms), images/s, the implementation timed.
"""
import peer_env  # noqa: F401  (before torch: OpenBLAS's kernels for this CPU, see peer_env.py)
import argparse
import json

import torch
import torchvision

from latency import latency_ms
from ort_peer import time_onnxruntime

MODELS = ["swin_t", "swin_s", "swin_b", "swin_v2_t", "swin_v2_s", "swin_v2_b"]


def image_size(model):
    return 256 if "_v2_" in model else 224


def time_pytorch(model, x, iters, warmup, dtype):
    return latency_ms(lambda: model(x), iters, warmup,
                      lambda: torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"))


def traced(model, x, dtype):
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
        return torch.jit.freeze(torch.jit.trace(model, (x,), check_trace=False))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="swin_t", choices=MODELS)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    ap.add_argument("--impl", default="best", choices=["eager", "traced", "best"])
    ap.add_argument("--peer", default="pytorch", choices=["pytorch", "onnxruntime"])
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = getattr(torchvision.models, a.model)().eval()
    s = image_size(a.model)
    x = torch.randn(a.batch, 3, s, s)
    report = {"model": a.model, "batch": a.batch, "image_size": s, "threads": a.threads, "dtype": a.dtype}
    if a.peer == "onnxruntime":
        if a.dtype != "f32":
            raise SystemExit("swin_infer.py: the ONNX Runtime peer runs f32 only")
        r = time_onnxruntime(model, {"images": x}, ["logits"], threads=a.threads, iters=a.iters, warmup=a.warmup)
        r.update(report)
        r["impl"] = "torchvision (torch.onnx.export)"
    else:
        impls = ["eager", "traced"] if a.impl == "best" else [a.impl]
        results, errors = {}, {}
        for impl in impls:
            try:   # an impl torch cannot run (see below) is left out, its error reported
                m = model if impl == "eager" else traced(model, x, a.dtype)
                results[impl] = time_pytorch(m, x, a.iters, a.warmup, a.dtype)
            except RuntimeError as e:
                errors[impl] = str(e).splitlines()[0][:200]
        if a.dtype == "bf16" and not results:
            # torch 1.13's CPU autocast fails on torchvision's Swin (layer_norm: "expected scalar type
            # BFloat16 but found Float"): the model and input cast to bf16 instead, as vit_infer.py does.
            mb, xb = model.to(torch.bfloat16), x.to(torch.bfloat16)
            for impl in impls:
                try:
                    m = mb if impl == "eager" else traced(mb, xb, "f32")
                    results[impl + ", bf16 cast"] = time_pytorch(m, xb, a.iters, a.warmup, "f32")
                except RuntimeError as e:
                    errors[impl + ", bf16 cast"] = str(e).splitlines()[0][:200]
        if not results:
            raise SystemExit(f"swin_infer.py: no implementation ran: {errors}")
        impl = min(results, key=lambda k: results[k]["median"])
        r = {"peer": "pytorch", "torch": torch.__version__, "torchvision": torchvision.__version__,
             "openblas_coretype": peer_env.OPENBLAS_CORETYPE, "impl": impl, "latency_ms": results[impl],
             "all_impls_ms": {k: v["median"] for k, v in results.items()}}
        if errors:
            r["impl_errors"] = errors
        r.update(report)
    r["images_per_s"] = a.batch / (r["latency_ms"]["median"] / 1e3)
    print(json.dumps(r))


if __name__ == "__main__":
    main()

"""PyTorch peer of `attn eval --weights W --model NAME --data DIR`: top-1 / top-5 / loss of a ViT on an
ImageNet-style folder, as timm's validate.py and torchvision's reference scripts run it —
torchvision.datasets.ImageFolder, the eval transform (Resize(256) bilinear, CenterCrop(224),
ToTensor, Normalize with ImageNet's mean / std: torchvision's ImageClassification preset), a
DataLoader, the model in eval mode under torch.no_grad().

    /usr/bin/python3 bench/peers/folder_eval.py make DIR --images N [--seed S] [--model NAME]
        writes N JPEGs (500 x 375 or 375 x 500, quality 90) into DIR/val/<wnid>/ over Imagenette's ten
        classes, and DIR/weights.safetensors: torchvision's VisionTransformer at NAME's size
        (bench/peers/vit_infer.py's configs) with seeded random weights, in torchvision's layout
    /usr/bin/python3 bench/peers/folder_eval.py run DIR [--model NAME] [--batch B] [--threads T] [--workers W]
        prints one JSON line: images, seconds (the whole loop: decoding, transforms, forward), img/s,
        top1, top5, loss. Folder classes map to ImageNet-1k indices by WordNet ID (the list attn ships,
        read from src/data/imagenet_wnids.cpp), as attn eval maps them.
"""
import peer_env  # noqa: F401  (before torch: OpenBLAS's kernels for this CPU, see peer_env.py)
import argparse
import json
import os
import re
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
import torchvision.transforms as T
from PIL import Image
from torchvision.datasets import ImageFolder
from torchvision.models.vision_transformer import VisionTransformer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, HERE)
import pth_to_safetensors  # noqa: E402
from vit_infer import CONFIGS  # noqa: E402

IMAGENETTE = ["n01440764", "n02102040", "n02979186", "n03000684", "n03028079", "n03394916", "n03417042",
              "n03425413", "n03445777", "n03888605"]


def wnids():
    with open(os.path.join(ROOT, "src", "data", "imagenet_wnids.cpp")) as f:
        return ["n" + d for d in re.findall(r'"(\d{8})"', f.read())]


def build(name):
    patch, dim, depth, heads, mlp, distilled = CONFIGS[name]
    assert not distilled, "folder_eval.py: the distilled models have no torchvision layout"
    return VisionTransformer(image_size=224, patch_size=patch, num_layers=depth, num_heads=heads, hidden_dim=dim,
                             mlp_dim=mlp, num_classes=1000)


def make(a):
    rng = np.random.default_rng(a.seed)
    for k in range(a.images):
        h, w = (375, 500) if k % 2 else (500, 375)
        yy, xx = np.mgrid[0:h, 0:w]
        base = (xx * int(rng.integers(1, 4)) // 3 + yy * int(rng.integers(1, 4)) // 3)[..., None] + rng.integers(
            0, 256, size=3)
        px = np.clip(base % 256 + rng.integers(-30, 31, size=(h, w, 3)), 0, 255).astype(np.uint8)
        d = os.path.join(a.dir, "val", IMAGENETTE[k % len(IMAGENETTE)])
        os.makedirs(d, exist_ok=True)
        Image.fromarray(px).save(os.path.join(d, "%05d.JPEG" % k), quality=90)
    torch.manual_seed(a.seed)
    model = build(a.model)
    with torch.no_grad():   # the head as the body (torchvision starts it at zero)
        torch.nn.init.trunc_normal_(model.heads.head.weight, std=0.02)
    with open(os.path.join(a.dir, "weights.safetensors"), "wb") as f:
        f.write(pth_to_safetensors.serialize(model.state_dict()))


def run(a):
    torch.set_num_threads(a.threads)
    model = build(a.model)
    sd = {}
    # the file attn reads, through the project's own reader (no safetensors package on Debian)
    import struct
    with open(os.path.join(a.dir, "weights.safetensors"), "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    for key, v in header.items():
        if key == "__metadata__":
            continue
        lo, hi = v["data_offsets"]
        assert v["dtype"] == "F32"
        sd[key] = torch.frombuffer(bytearray(data[8 + n + lo:8 + n + hi]), dtype=torch.float32).reshape(v["shape"])
    model.load_state_dict(sd)
    model.eval()
    tf = T.Compose([T.Resize(256, interpolation=T.InterpolationMode.BILINEAR), T.CenterCrop(224), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = ImageFolder(os.path.join(a.dir, "val"), transform=tf)
    index = {w: i for i, w in enumerate(wnids())}
    to_imagenet = torch.tensor([index[c] for c in ds.classes])
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=False, num_workers=a.workers)
    top1 = top5 = count = 0
    loss = 0.0
    t0 = time.perf_counter()
    with torch.no_grad():
        for x, y in loader:
            y = to_imagenet[y]
            logits = model(x)
            top = logits.topk(5, dim=1).indices
            top1 += int((top[:, 0] == y).sum())
            top5 += int((top == y[:, None]).any(1).sum())
            loss += float(F.cross_entropy(logits.double(), y, reduction="sum"))
            count += len(y)
    secs = time.perf_counter() - t0
    print(json.dumps({"bench": "folder_eval", "side": "torch", "model": a.model, "images": count, "seconds": secs,
                      "images_per_second": count / secs, "top1": top1 / count, "top5": top5 / count,
                      "loss": loss / count, "batch": a.batch, "workers": a.workers, "threads": a.threads,
                      "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "default")}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["make", "run"])
    p.add_argument("dir")
    p.add_argument("--images", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", default="deit_small_patch16_224")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--workers", type=int, default=0)
    a = p.parse_args()
    make(a) if a.mode == "make" else run(a)


if __name__ == "__main__":
    main()

"""References for attn's data pipeline: IDX parsing (numpy, big-endian), gzip (Python's gzip module),
Fashion-MNIST (torchvision's readers) and torchvision 0.14's transforms driven by attn's random draws.

Random transforms: attn maps each torch draw to ONE uniform u in [0, 1) (see attn/data/transforms.h).
Here torchvision's own transform classes run with their module's `torch` replaced by a shim that
answers torch.rand / torch.randint / torch.empty(1).uniform_ from the given list of u's, so the
draw order and the geometry are torchvision's, not a re-implementation.
"""
import gzip as _gzip
import math
import os
import tempfile

import numpy as np
import torch
import torchvision
import torchvision.transforms as T
import torchvision.transforms.functional as TF
import torchvision.transforms.transforms as TT
from torchvision.datasets import mnist as _mnist


def _bytes(t):
    return t.numpy().astype(np.uint8).tobytes()


def _u8(b):
    return torch.from_numpy(np.frombuffer(bytes(b), dtype=np.uint8).copy())


# ---- IDX ----

_BE = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def idx_numpy(inp, args):
    """Parses IDX bytes with numpy's big-endian dtypes; i8/i16 widened to i32 as attn does."""
    data = _bytes(inp["bytes"])
    assert data[0] == 0 and data[1] == 0
    code, nd = data[2], data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(nd)]
    arr = np.frombuffer(data, dtype=np.dtype(_BE[code]), offset=4 + 4 * nd)
    assert arr.size == int(np.prod(dims, dtype=np.int64))
    arr = arr.reshape(dims)
    if code in (0x09, 0x0B, 0x0C):
        arr = arr.astype(np.int32)
    elif code == 0x08:
        arr = arr.astype(np.uint8)
    else:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return {"out": torch.from_numpy(np.ascontiguousarray(arr))}


def gzip(inp, args):
    """gzip-compresses the bytes; members > 1 splits them into that many concatenated members."""
    data = _bytes(inp["bytes"])
    members = int(args.get("members", 1))
    step = max(1, math.ceil(len(data) / members))
    out = b"".join(_gzip.compress(data[i:i + step], mtime=0) for i in range(0, len(data), step))
    return {"out": _u8(out)}


# ---- Fashion-MNIST ----

def fashion_files(inp, args):
    """torchvision's read_image_file / read_label_file on the package's (gunzipped) files."""
    d, prefix = args["dir"], args["prefix"]
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for key, name, reader in (("images", "images-idx3-ubyte", _mnist.read_image_file),
                                  ("labels", "labels-idx1-ubyte", _mnist.read_label_file)):
            raw = os.path.join(tmp, name)
            with _gzip.open(os.path.join(d, f"{prefix}-{name}.gz"), "rb") as f, open(raw, "wb") as g:
                g.write(f.read())
            out[key] = reader(raw)
    return out


def fashion_classes(inp, args):
    """torchvision's FashionMNIST class names joined by newlines, as bytes."""
    return {"out": _u8("\n".join(torchvision.datasets.FashionMNIST.classes).encode())}


# ---- transforms ----

class _Scripted:
    """Stands in for the `torch` module inside torchvision.transforms.transforms."""

    def __init__(self, draws):
        self.draws = [float(u) for u in draws]
        self.used = 0

    def _next(self):
        u = self.draws[self.used]
        self.used += 1
        return u

    def __getattr__(self, name):
        return getattr(torch, name)

    def rand(self, *size, **kw):
        return torch.tensor([self._next()], dtype=torch.float64)

    def randint(self, low, high, size, **kw):
        return torch.tensor([int(low) + int(math.floor(self._next() * (int(high) - int(low))))])

    def empty(self, *size, **kw):
        owner = self

        class _Empty:
            def uniform_(self, a, b):
                a, b = float(a), float(b)
                return torch.tensor([a + (b - a) * owner._next()], dtype=torch.float32)
        return _Empty()


def _run_scripted(transform, img, draws):
    shim = _Scripted(draws.tolist())
    saved = TT.torch
    TT.torch = shim
    try:
        out = transform(img.clone())
    finally:
        TT.torch = saved
    return {"out": out.contiguous(), "used": torch.tensor([shim.used], dtype=torch.int64)}


def random_crop(inp, args):
    t = T.RandomCrop(tuple(args["size"]), padding=int(args["padding"]))
    return _run_scripted(t, inp["img"], inp["draws"])


def random_hflip(inp, args):
    return _run_scripted(T.RandomHorizontalFlip(float(args["p"])), inp["img"], inp["draws"])


def random_erasing(inp, args):
    t = T.RandomErasing(p=float(args["p"]), scale=tuple(args["scale"]), ratio=tuple(args["ratio"]), value=0)
    return _run_scripted(t, inp["img"], inp["draws"])


def pad_crop(inp, args):
    img = TF.pad(inp["img"], int(args["padding"])) if int(args["padding"]) > 0 else inp["img"]
    return {"out": TF.crop(img, int(args["top"]), int(args["left"]), int(args["h"]), int(args["w"])).contiguous()}


def hflip(inp, args):
    return {"out": TF.hflip(inp["img"]).contiguous()}


def erase(inp, args):
    v = torch.tensor([float(args["value"])])[:, None, None]
    return {"out": TF.erase(inp["img"].clone(), int(args["top"]), int(args["left"]), int(args["h"]), int(args["w"]), v)}


def normalize(inp, args):
    return {"out": T.Normalize(args["mean"], args["std"])(inp["img"].clone()).contiguous()}


def to_tensor(inp, args):
    """torchvision's ToTensor on (N, H, W) u8 images, passed as one H x W x N array: (N, H, W) f32."""
    return {"out": T.ToTensor()(inp["images"].permute(1, 2, 0).numpy()).contiguous()}

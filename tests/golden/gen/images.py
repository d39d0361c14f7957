"""References for attn's image I/O, ImageFolder, RandAugment, Mixup/CutMix, EMA and attention rollout.

Image files are written by PIL here and returned as bytes (the C++ test writes them to disk), so the
on-disk reference cache stays valid. Decoding references are PIL's Image.open(...).convert(mode);
resizing is torchvision.transforms.functional.resize on PIL images; RandAugment ops are
torchvision 0.14's _apply_op on u8 tensors, and RandAugment itself runs torchvision's class with its
module's `torch` replaced by a shim answering torch.randint from attn's uniform draws
(floor(u * n), see attn/data/transforms.h). Mixup/CutMix re-write timm's Mixup formulas
(timm.data.mixup: one_hot, mixup_target, rand_bbox, cutmix_bbox_and_lam, Mixup._mix_batch) given
the same lam and box centre; EMA is timm's ModelEmaV2 update; rollout is Abnar & Zuidema's
formula in numpy (float64), as jacobgil's vit-explain computes it.
"""
import io
import math
import os
import tempfile

import numpy as np
import torch
import torchvision.transforms as T
import torchvision.transforms.autoaugment as TA
import torchvision.transforms.functional as TF
from PIL import Image


def _u8(b):
    return torch.from_numpy(np.frombuffer(bytes(b), dtype=np.uint8).copy())


def _np_u8(t):
    return t.numpy().astype(np.uint8)


# ---- encoding (PIL) and decoding references ----

def encode(inp, args):
    """pixels: u8 (H, W, C) -> a file written by PIL in args["format"] from mode args["mode"]; returns the
    bytes and PIL's decoding of them converted to L, RGB and RGBA (and the mode PIL opened)."""
    px = _np_u8(inp["pixels"])
    mode, fmt = args["mode"], args["format"]
    if mode in ("L", "1", "P", "I;16"):
        arr = px[:, :, 0]
    else:
        arr = px
    if mode == "1":
        im = Image.fromarray(arr > 127)
    elif mode == "P":
        im = Image.fromarray(px[:, :, :3] if px.shape[2] >= 3 else np.repeat(px, 3, axis=2), "RGB").quantize(
            colors=int(args.get("colors", 16)))
        if args.get("transparency") is not None:
            im.info["transparency"] = int(args["transparency"])
    elif mode == "I;16":
        im = Image.fromarray((arr.astype(np.uint16) * 257).astype(np.uint16), "I;16")
    else:
        im = Image.fromarray(arr, mode)
    buf = io.BytesIO()
    kw = {}
    if fmt == "JPEG":
        kw["quality"] = int(args.get("quality", 90))
        if "subsampling" in args:
            kw["subsampling"] = int(args["subsampling"])
        if args.get("progressive"):
            kw["progressive"] = True
    if fmt == "PNG":
        if args.get("bits"):
            kw["bits"] = int(args["bits"])
        if mode == "P" and args.get("transparency") is not None:
            kw["transparency"] = int(args["transparency"])
    im.save(buf, format=fmt, **kw)
    data = buf.getvalue()
    out = {"bytes": _u8(data)}
    dec = Image.open(io.BytesIO(data))
    dec.load()
    for m in ("L", "RGB", "RGBA", "LA"):
        out[m] = torch.from_numpy(np.array(dec.convert(m)).reshape(dec.size[1], dec.size[0], len(m)).copy())
    return out


def pil_decode(inp, args):
    """Decodes the given file bytes with PIL and converts to args["mode"]: u8 (H, W, C)."""
    im = Image.open(io.BytesIO(bytes(_np_u8(inp["bytes"]))))
    im = im.convert(args["mode"])
    return {"out": torch.from_numpy(np.array(im).reshape(im.size[1], im.size[0], len(args["mode"])).copy())}


_FILTERS = {"nearest": TF.InterpolationMode.NEAREST, "bilinear": TF.InterpolationMode.BILINEAR,
            "bicubic": TF.InterpolationMode.BICUBIC}


def resize(inp, args):
    """torchvision's F.resize on a PIL image: u8 (H, W, C) with C 1 (L) or 3 (RGB) -> u8 (h, w, C)."""
    px = _np_u8(inp["img"])
    c = px.shape[2]
    im = Image.fromarray(px[:, :, 0] if c == 1 else px, "L" if c == 1 else "RGB")
    out = TF.resize(im, list(args["size"]), interpolation=_FILTERS[args["filter"]])
    return {"out": torch.from_numpy(np.array(out).reshape(out.size[1], out.size[0], c).copy())}


def resize_f(inp, args):
    """PIL mode "F" resize of each channel of an f32 (C, H, W) image."""
    x = inp["img"].numpy().astype(np.float32)
    h, w = args["size"]
    resample = {"nearest": Image.NEAREST, "bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC}[args["filter"]]
    planes = [np.array(Image.fromarray(x[c], "F").resize((w, h), resample)) for c in range(x.shape[0])]
    return {"out": torch.from_numpy(np.stack(planes).astype(np.float32))}


# ---- ImageFolder ----

def image_folder(inp, args):
    """Builds the tree args["files"] (relative paths; contents inp["file<i>"]) in a temporary folder and
    returns torchvision's ImageFolder: every image (N, C, S, S) f32 and the targets, with
    transform Compose([Grayscale() if channels == 1, Resize((S, S)), ToTensor()])."""
    import torchvision.datasets as D
    s, c = int(args["size"]), int(args["channels"])
    tf = [T.Grayscale()] if c == 1 else []
    tf += [T.Resize((s, s)), T.ToTensor()]
    with tempfile.TemporaryDirectory() as root:
        for i, rel in enumerate(args["files"]):
            p = os.path.join(root, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(bytes(_np_u8(inp[f"file{i}"])))
        for d in args.get("empty_dirs", []):
            os.makedirs(os.path.join(root, d), exist_ok=True)
        ds = D.ImageFolder(root, transform=T.Compose(tf))
        images = torch.stack([ds[i][0] for i in range(len(ds))])
        targets = torch.tensor(ds.targets, dtype=torch.int64)
        order = torch.tensor([args["files"].index(os.path.relpath(p, root)) for p, _ in ds.samples], dtype=torch.int64)
        classes = _u8("\n".join(ds.classes).encode())
    return {"images": images, "targets": targets, "order": order, "classes": classes}


# ---- RandAugment ----

def aug_op(inp, args):
    """torchvision's _apply_op on a u8 (C, H, W) tensor, NEAREST, fill None."""
    out = TA._apply_op(inp["img"].clone(), args["op"], float(args["magnitude"]),
                       interpolation=TF.InterpolationMode.NEAREST, fill=None)
    return {"out": out.contiguous()}


def aug_space(inp, args):
    """RandAugment's magnitude table (num_bins, 14) for an (h, w) image, f64 of the f32/int values."""
    ra = T.RandAugment(num_magnitude_bins=int(args["num_bins"]))
    space = ra._augmentation_space(int(args["num_bins"]), (int(args["h"]), int(args["w"])))
    cols = []
    for name, (mags, signed) in space.items():
        if mags.ndim == 0:
            cols.append(torch.zeros(int(args["num_bins"]), dtype=torch.float64))
        else:
            cols.append(torch.tensor([float(m.item()) for m in mags], dtype=torch.float64))
    return {"out": torch.stack(cols, dim=1), "signed": torch.tensor([int(s) for _, s in space.values()]),
            "names": _u8("\n".join(space.keys()).encode())}


class _Shim:
    """Stands in for `torch` in torchvision.transforms.autoaugment: randint from the given uniforms."""

    def __init__(self, draws):
        self.draws = [float(u) for u in draws]
        self.used = 0

    def __getattr__(self, name):
        return getattr(torch, name)

    def randint(self, *a, **kw):
        if len(a) == 2:
            lo, hi = 0, int(a[0])
        else:
            lo, hi = int(a[0]), int(a[1])
        u = self.draws[self.used]
        self.used += 1
        return torch.tensor([lo + int(math.floor(u * (hi - lo)))])


def rand_augment(inp, args):
    shim = _Shim(inp["draws"].tolist())
    saved = TA.torch
    TA.torch = shim
    try:
        t = T.RandAugment(num_ops=int(args["num_ops"]), magnitude=int(args["magnitude"]),
                          num_magnitude_bins=int(args["num_bins"]))
        out = t(inp["img"].clone())
    finally:
        TA.torch = saved
    return {"out": out.contiguous(), "used": torch.tensor([shim.used], dtype=torch.int64)}


# ---- Mixup / CutMix (timm's formulas) ----

def _one_hot(x, num_classes, on_value=1., off_value=0.):
    x = x.long().view(-1, 1)
    return torch.full((x.size()[0], num_classes), off_value).scatter_(1, x, on_value)


def _mixup_target(target, num_classes, lam=1., smoothing=0.0):
    off_value = smoothing / num_classes
    on_value = 1. - smoothing + off_value
    y1 = _one_hot(target, num_classes, on_value=on_value, off_value=off_value)
    y2 = _one_hot(target.flip(0), num_classes, on_value=on_value, off_value=off_value)
    return y1 * lam + y2 * (1. - lam)


def _rand_bbox(img_shape, lam, cy, cx, margin=0.):
    ratio = np.sqrt(1 - lam)
    img_h, img_w = img_shape[-2:]
    cut_h, cut_w = int(img_h * ratio), int(img_w * ratio)
    yl = np.clip(cy - cut_h // 2, 0, img_h)
    yh = np.clip(cy + cut_h // 2, 0, img_h)
    xl = np.clip(cx - cut_w // 2, 0, img_w)
    xh = np.clip(cx + cut_w // 2, 0, img_w)
    return yl, yh, xl, xh


def mixup(inp, args):
    """Mixup._mix_batch + mixup_target given lam (and, for CutMix, the box centre cy, cx)."""
    x = inp["x"].clone()
    lam = float(args["lam"])
    if lam != 1.:
        if args["cutmix"]:
            yl, yh, xl, xh = _rand_bbox(x.shape, lam, int(args["cy"]), int(args["cx"]))
            if args.get("correct_lam", True):
                bbox_area = (yh - yl) * (xh - xl)
                lam = 1. - bbox_area / float(x.shape[-2] * x.shape[-1])
            x[:, :, yl:yh, xl:xh] = x.flip(0)[:, :, yl:yh, xl:xh]
            box = [int(yl), int(yh), int(xl), int(xh)]
        else:
            x_flipped = x.flip(0).mul_(1. - lam)
            x.mul_(lam).add_(x_flipped)
            box = [0, 0, 0, 0]
    else:
        box = [0, 0, 0, 0]
    target = _mixup_target(inp["target"], int(args["num_classes"]), lam, float(args["smoothing"]))
    return {"x": x, "target": target, "lam": torch.tensor([lam], dtype=torch.float64),
            "box": torch.tensor(box, dtype=torch.int64)}


# ---- EMA (timm ModelEmaV2 update) ----

def ema(inp, args):
    """Every tensor 'e.<name>' is updated with 'm.<name>' for `steps` steps: e = d * e + (1 - d) * m_k
    where m_k = inp['m<k>.<name>']; returns the final 'e.<name>'."""
    d = float(args["decay"])
    names = [k[2:] for k in inp if k.startswith("e.")]
    out = {}
    for n in names:
        e = inp["e." + n].clone()
        for k in range(int(args["steps"])):
            m = inp[f"m{k}.{n}"]
            e.copy_(d * e + (1. - d) * m)
        out["e." + n] = e
    return out


# ---- attention rollout ----

def rollout(inp, args):
    """maps (L, B, NH, T, T) -> rollout (B, T, T) and the class rows (B, T - prefix), numpy float64."""
    maps = inp["maps"].double().numpy()
    fusion, prefix = args.get("fusion", "mean"), int(args["prefix"])
    L, B, H, Tn, _ = maps.shape
    res = np.zeros((B, Tn, Tn))
    for b in range(B):
        result = np.eye(Tn)
        for l in range(L):
            a = maps[l, b]
            a = {"mean": a.mean(axis=0), "max": a.max(axis=0), "min": a.min(axis=0)}[fusion]
            a = a + np.eye(Tn)
            a = a / a.sum(axis=-1, keepdims=True)
            result = a @ result
        res[b] = result
    last = maps[-1].mean(axis=1)[:, 0, prefix:]
    return {"rollout": torch.from_numpy(res), "cls": torch.from_numpy(res[:, 0, prefix:].copy()),
            "last": torch.from_numpy(last.copy())}


def encode_interlaced(inp, args):
    """An Adam7-interlaced 8-bit PNG (gray, RGB or RGBA; PIL cannot write these) built by hand with
    zlib, and PIL's decoding of it converted to the stored mode."""
    import struct
    import zlib
    px = _np_u8(inp["pixels"])
    h, w, c = px.shape
    color = {1: 0, 2: 4, 3: 2, 4: 6}[c]
    raw = b""
    for y0, x0, dy, dx in ((0, 0, 8, 8), (0, 4, 8, 8), (4, 0, 8, 4), (0, 2, 4, 4), (2, 0, 4, 2), (0, 1, 2, 2),
                           (1, 0, 2, 1)):
        sub = px[y0::dy, x0::dx]
        if sub.size == 0:
            continue
        for row in sub:
            raw += b"\x00" + row.tobytes()   # filter type 0 (None)

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color, 0, 0, 1)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    im = Image.open(io.BytesIO(data))
    im.load()
    mode = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[c]
    out = np.array(im.convert(mode)).reshape(h, w, c)
    return {"bytes": _u8(data), "out": torch.from_numpy(out.copy())}
